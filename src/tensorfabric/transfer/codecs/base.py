"""The shared shape of a block codec: per-block absmax scaling, ``[payload | float32 scales]`` layout."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import torch

__all__ = ["TINY", "BlockCodec", "float32_view"]

_SCALE_BYTES = 4  # one float32 scale per block
TINY = 2.0**-126  # smallest normal float32: a smaller scale would overflow its inverse


def float32_view(raw: torch.Tensor) -> torch.Tensor:
    """uint8 bytes as float32, copied first when they are not 4-byte aligned (odd payload sizes, chunk slices
    of a send buffer): a float32 view needs the alignment."""
    import torch

    if raw.storage_offset() % _SCALE_BYTES:
        raw = raw.clone()
    return raw.view(torch.float32)


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
        self._ws: torch.Tensor | None = None

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

    def _workspace(self, numel: int, device: torch.device) -> torch.Tensor:
        """A reused float32 scratch buffer: fresh multi-MiB tensors cost page faults on every call."""
        import torch

        ws = self._ws
        if ws is None or ws.numel() < numel or ws.device != device:
            ws = self._ws = torch.empty(numel, dtype=torch.float32, device=device)
        return ws[:numel]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Flat float32 ``x`` (length a multiple of ``block``) -> flat uint8 ``[payload | scales]``."""
        import torch

        out = torch.empty(self.encoded_nbytes(x.numel()), dtype=torch.uint8, device=x.device)
        self.encode_into(x, out)
        return out

    def encode_into(self, x: torch.Tensor, out: torch.Tensor) -> None:
        """:meth:`encode` into ``out`` (``encoded_nbytes(x.numel())`` uint8), e.g. a slice of a send buffer."""
        import torch

        numel = x.numel()
        blocks = x.reshape(-1, self.block)
        scratch = self._workspace(numel, x.device).view(-1, self.block)
        absmax = torch.abs(blocks, out=scratch).amax(dim=1, keepdim=True)
        scales = absmax / self.qmax
        # Multiply by the inverse (cheaper than dividing). A scale below the smallest float32 normal would
        # make the inverse overflow, so such blocks (absmax < qmax * 2**-126) and all-zero blocks encode as 0.
        usable = scales >= TINY
        inv = torch.where(usable, 1.0 / scales, 0.0)
        scaled = torch.mul(blocks, inv, out=scratch)
        split = self.payload_nbytes(numel)
        self._quantize_into(scaled, out[:split])
        # Copied as bytes: the scales section need not be 4-byte aligned (e.g. block 2 of int8).
        out[split:].copy_(torch.where(usable, scales, 0.0).reshape(-1).view(torch.uint8))

    def _scales(self, data: torch.Tensor, numel: int) -> torch.Tensor:
        return float32_view(data[self.payload_nbytes(numel):]).reshape(-1, 1)

    def decode(self, data: torch.Tensor, numel: int) -> torch.Tensor:
        """Inverse of :meth:`encode`: flat uint8 -> flat float32 of ``numel`` elements."""
        import torch

        out = torch.empty(numel, dtype=torch.float32, device=data.device)
        self.decode_into(data, numel, out)
        return out

    def decode_into(self, data: torch.Tensor, numel: int, out: torch.Tensor) -> None:
        """Decode into the float32 tensor ``out`` (``numel`` contiguous elements) without allocating."""
        out2d = out.view(-1, self.block)
        out2d.copy_(self._levels(data[:self.payload_nbytes(numel)], numel).reshape(-1, self.block))
        out2d.mul_(self._scales(data, numel))

    def decode_add_(self, data: torch.Tensor, numel: int, out: torch.Tensor) -> None:
        """``out += decode(data)`` in float32 (the all_reduce accumulation)."""
        import torch

        levels = self._levels(data[:self.payload_nbytes(numel)], numel).reshape(-1, self.block)
        if levels.dtype != torch.int8:  # addcmul_ promotes int8 but not every level type
            levels = self._workspace(numel, data.device).view(-1, self.block).copy_(levels)
        out.view(-1, self.block).addcmul_(levels, self._scales(data, numel))

    def _quantize_into(self, scaled: torch.Tensor, payload: torch.Tensor) -> None:
        """Scaled values in [-qmax, qmax] (rows of ``block``, may be modified) -> the uint8 ``payload``."""
        raise AssertionError(f"{type(self).__name__} must define _quantize_into")

    def _levels(self, payload: torch.Tensor, numel: int) -> torch.Tensor:
        """uint8 payload -> levels in scaled units (a dtype ``copy_`` and ``addcmul_`` accept)."""
        raise AssertionError(f"{type(self).__name__} must define _levels")
