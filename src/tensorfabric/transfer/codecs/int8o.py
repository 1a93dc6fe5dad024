"""int8 with one outlier per block: each block's largest-magnitude value travels exactly, the rest as int8
levels scaled by the block's *second* largest magnitude.

Why: real LLM activations have a few channels of "massive activations" (SmolLM2-135M's down_proj sums reach
|x| = 21 741 among O(1) values; docs/inference.md). Plain block int8 scales a block by its absmax, so one
such value sets a step of ~170 for its 63 neighbours and they all round to zero. Here the outlier is sent as
its float32 value and its index, and the neighbours get a step set by the largest of *them*.

Layout per message of ``numel`` elements, ``nb = numel / block`` blocks:
``[levels: numel int8 | scales: nb float32 | outliers: nb float32 | index: nb uint8]``, so a block of 64 costs
64 + 9 bytes (3.51x smaller than float32; plain int8 is 68 bytes, 3.76x).

Error: the outlier is exact; every other element of the block rounds within half a step, ``M2/254``, where
``M2 <= M`` is the block's second largest magnitude, so ``unit_error = 1/254`` against the block absmax (the
bound the collectives document) holds, and against ``M2`` it is the same 1/254. Blocks hold at most 256
values (the index is one byte).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from tensorfabric.errors import InputError
from tensorfabric.transfer.codecs import register
from tensorfabric.transfer.codecs.base import TINY, BlockCodec, float32_view

if TYPE_CHECKING:
    import torch



class Int8OutlierCodec(BlockCodec):
    name: ClassVar[str] = "int8o"
    bits: ClassVar[int] = 8
    qmax: ClassVar[float] = 127.0
    unit_error: ClassVar[float] = 1.0 / 254.0

    def __init__(self, block: int = 64) -> None:
        if block > 256:
            raise InputError(f"codec block: {block} is more than int8o's 256 (its outlier index is one byte)")
        super().__init__(block)
        self._ties_buf: torch.Tensor | None = None

    def _ties(self, numel: int, device: torch.device) -> torch.Tensor:
        import torch

        buf = self._ties_buf
        if buf is None or buf.numel() < numel or buf.device != device:
            buf = self._ties_buf = torch.empty(numel, dtype=torch.float32, device=device)
        return buf[:numel].view(-1, self.block)

    def _positions(self, device: torch.device) -> torch.Tensor:
        import torch

        return torch.arange(self.block, dtype=torch.float32, device=device).view(1, -1)

    def layout(self) -> tuple[int, ...]:
        return (self.block, 4, 4, 1)

    def _sections(self, data: torch.Tensor, numel: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                   torch.Tensor]:
        levels, scales, outliers, index = self.element_range(data, numel, 0, numel)
        return levels, scales, outliers, index

    def encode_into(self, x: torch.Tensor, out: torch.Tensor) -> None:
        import torch

        numel = x.numel()
        blocks = x.reshape(-1, self.block)
        mag = self._workspace(numel, x.device).view(-1, self.block)
        torch.abs(blocks, out=mag)
        # The index of a largest magnitude (the last, on ties): float compare, multiply and max run 22 us per
        # 48K values on one core, torch.max(dim)'s indices 53 us and argmax 100 us.
        ties = self._ties(numel, x.device)
        torch.eq(mag, mag.amax(dim=1, keepdim=True), out=ties)
        index = ties.mul_(self._positions(x.device)).amax(dim=1, keepdim=True).long()
        outlier = blocks.gather(1, index)
        mag.scatter_(1, index, 0.0)
        scales = mag.amax(dim=1, keepdim=True) / self.qmax
        usable = scales >= TINY
        inv = torch.where(usable, 1.0 / scales, 0.0)
        scaled = torch.mul(blocks, inv, out=mag)
        scaled.scatter_(1, index, 0.0)  # the outlier's level is 0: it travels in its own section
        levels, scale_b, outlier_b, index_b = self._sections(out, numel)
        # |scaled| <= 127 * (1 + 2**-23) off the outlier, so rounding stays within -127..127.
        levels.view(torch.int8).copy_(scaled.round_().reshape(-1))
        scale_b.copy_(torch.where(usable, scales, 0.0).reshape(-1).view(torch.uint8))
        outlier_b.copy_(outlier.reshape(-1).view(torch.uint8))
        index_b.copy_(index.reshape(-1))

    def decode_into(self, data: torch.Tensor, numel: int, out: torch.Tensor) -> None:
        import torch

        levels, scales, outliers, index = self._sections(data, numel)
        out2d = out.view(-1, self.block)
        out2d.copy_(levels.view(torch.int8).reshape(-1, self.block))
        out2d.mul_(float32_view(scales).reshape(-1, 1))
        out2d.scatter_(1, index.long().reshape(-1, 1), float32_view(outliers).reshape(-1, 1))

    def decode_add_(self, data: torch.Tensor, numel: int, out: torch.Tensor) -> None:
        import torch

        levels, scales, outliers, index = self._sections(data, numel)
        out2d = out.view(-1, self.block)
        out2d.addcmul_(levels.view(torch.int8).reshape(-1, self.block), float32_view(scales).reshape(-1, 1))
        out2d.scatter_add_(1, index.long().reshape(-1, 1), float32_view(outliers).reshape(-1, 1))


register("int8o", Int8OutlierCodec)
