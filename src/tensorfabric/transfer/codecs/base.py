"""The shared shape of a block codec: per-block absmax scaling, ``[payload | float32 scales]`` layout."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import torch

__all__ = ["BlockCodec"]

_SCALE_BYTES = 4  # one float32 scale per block


class BlockCodec:
    """Symmetric block quantizer. Subclasses set ``name``, ``bits``, ``unit_error`` and the level mapping."""

    name: ClassVar[str] = ""
    bits: ClassVar[int] = 8
    unit_error: ClassVar[float] = 0.0
    """``u`` in ``|decode(encode(x)) - x| <= u * blockmax``."""
    qmax: ClassVar[float] = 1.0
    """Largest representable magnitude in scaled units; the block absmax maps onto it."""

    def __init__(self, block: int = 64) -> None:
        self.block = block

    def __repr__(self) -> str:
        return f"{type(self).__name__}(block={self.block})"

    def padded(self, numel: int, parts: int = 1) -> int:
        """Smallest length >= numel that splits into ``parts`` chunks of whole blocks."""
        unit = self.block * parts
        return -(-numel // unit) * unit

    def payload_nbytes(self, numel: int) -> int:
        return numel * self.bits // 8

    def encoded_nbytes(self, numel: int) -> int:
        """Exact wire size of ``numel`` elements (a multiple of ``block``): payload + scales."""
        assert numel % self.block == 0, f"numel {numel} is not a multiple of block {self.block}"
        return self.payload_nbytes(numel) + numel // self.block * _SCALE_BYTES

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Flat float32 ``x`` (length a multiple of ``block``) -> flat uint8 ``[payload | scales]``."""
        import torch

        blocks = x.reshape(-1, self.block)
        absmax = blocks.abs().amax(dim=1, keepdim=True)
        scales = absmax / self.qmax
        # An all-zero block has scale 0; dividing by 1 instead keeps its levels at exactly 0.
        safe = torch.where(scales > 0, scales, torch.ones_like(scales))
        payload = self._quantize(blocks / safe)
        return torch.cat([payload.reshape(-1), scales.reshape(-1).view(torch.uint8)])

    def decode(self, data: torch.Tensor, numel: int) -> torch.Tensor:
        """Inverse of :meth:`encode`: flat uint8 -> flat float32 of ``numel`` elements."""
        import torch

        split = self.payload_nbytes(numel)
        raw = data[split:]
        if raw.storage_offset() % _SCALE_BYTES:
            raw = raw.clone()  # a float32 view needs 4-byte alignment (odd payload sizes, chunk slices)
        scales = raw.view(torch.float32).reshape(-1, 1)
        levels = self._dequantize(data[:split], numel).reshape(-1, self.block)
        return (levels * scales).reshape(-1)

    def _quantize(self, scaled: torch.Tensor) -> torch.Tensor:
        """Scaled values in [-qmax, qmax] (rows of ``block``) -> uint8 payload."""
        raise AssertionError(f"{type(self).__name__} must define _quantize")

    def _dequantize(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        """uint8 payload -> float32 levels in scaled units."""
        raise AssertionError(f"{type(self).__name__} must define _dequantize")
