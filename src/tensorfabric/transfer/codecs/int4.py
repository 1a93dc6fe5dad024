"""int4: symmetric levels -7..7 packed two per byte, one float32 scale ``M/7`` per block.

Round-to-nearest gives ``|err| <= (M/7)/2 = M/14`` (``unit_error = 1/14``). A level ``q`` is stored as the
nibble ``q + 8`` (1..15); element ``2i`` goes in the low nibble of byte ``i``, element ``2i+1`` in the high one.
Wire: half a byte per element + 4 bytes per block (block 64: 36 B per 64 values, 7.1x smaller than float32).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tensorfabric.transfer.codecs import register
from tensorfabric.transfer.codecs.base import BlockCodec

if TYPE_CHECKING:
    import torch


class Int4Codec(BlockCodec):
    name: ClassVar[str] = "int4"
    bits: ClassVar[int] = 4
    qmax: ClassVar[float] = 7.0
    unit_error: ClassVar[float] = 1.0 / 14.0

    def _quantize_into(self, scaled: torch.Tensor, payload: torch.Tensor) -> None:
        import torch

        nibbles = scaled.round_().add_(8).to(torch.uint8).reshape(-1, 2)
        torch.bitwise_or(nibbles[:, 0], nibbles[:, 1] << 4, out=payload)

    def _levels(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        import torch

        pairs = torch.stack([payload & 0x0F, payload >> 4], dim=1).reshape(-1)
        return pairs.view(torch.int8) - 8


register("int4", Int4Codec)
