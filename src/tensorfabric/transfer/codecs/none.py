"""none: float32 passed through unchanged (``unit_error = 0``); the scales section still exists so the layout
matches the other codecs, with every scale 1.0. Collectives treat ``none`` as "no codec" and take the plain
path; the codec itself is used to test the compressed algorithm's plumbing without quantization error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tensorfabric.transfer.codecs import register
from tensorfabric.transfer.codecs.base import BlockCodec

if TYPE_CHECKING:
    import torch


class NoneCodec(BlockCodec):
    name: ClassVar[str] = "none"
    bits: ClassVar[int] = 32
    qmax: ClassVar[float] = 1.0
    unit_error: ClassVar[float] = 0.0

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        import torch

        ones = torch.ones(x.numel() // self.block, dtype=torch.float32, device=x.device)
        return torch.cat([x.reshape(-1).to(torch.float32).view(torch.uint8), ones.view(torch.uint8)])

    def encode_into(self, x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(self.encode(x))

    def decode(self, data: torch.Tensor, numel: int) -> torch.Tensor:
        import torch

        return data[: numel * 4].clone().view(torch.float32)

    def decode_into(self, data: torch.Tensor, numel: int, out: torch.Tensor) -> None:
        out.copy_(self.decode(data, numel))

    def decode_add_(self, data: torch.Tensor, numel: int, out: torch.Tensor) -> None:
        out += self.decode(data, numel)


register("none", NoneCodec)
