"""The shared shape of a block codec: per-block absmax scaling, ``[payload | float32 scales]`` layout."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    import torch

__all__ = ["TINY", "BlockCodec", "float32_view"]

_SCALE_BYTES = 4  # one float32 scale per block
TINY = 2.0**-126  # smallest normal float32: a smaller scale would overflow its inverse
_BELOW_TINY = 2.0**-126 - 2.0**-149  # the float32 just below TINY: ``x > _BELOW_TINY`` is ``x >= TINY``


def _store_float32(raw: torch.Tensor, values: torch.Tensor) -> None:
    """Write float32 ``values`` into the uint8 bytes ``raw``, through a float32 view where ``raw`` is 4-byte
    aligned (one cast-free copy) and byte for byte where it is not (e.g. the scales after an odd payload)."""
    import torch

    if raw.storage_offset() % _SCALE_BYTES:
        raw.copy_(values.reshape(-1).view(torch.uint8))
    else:
        raw.view(torch.float32).copy_(values.reshape(-1))


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
        return numel // self.block * sum(self.layout())

    def layout(self) -> tuple[int, ...]:
        """Bytes per block of each section of an encoding, in order (``[payload | scales]`` here); an encoding
        of ``numel`` elements is each section's ``numel / block`` entries, section after section."""
        return (self.payload_nbytes(self.block), _SCALE_BYTES)

    def element_range(self, data: torch.Tensor, numel: int, lo: int, hi: int) -> list[torch.Tensor]:
        """Views of ``data`` (an encoding of ``numel`` elements) whose concatenation is the encoding of
        elements ``lo:hi`` alone (whole blocks): quantization is per block, so a run of blocks of a batched
        encoding is byte for byte the encoding of those blocks."""
        nb, b0, b1 = numel // self.block, lo // self.block, hi // self.block
        out, base = [], 0
        for width in self.layout():
            out.append(data[base + b0 * width:base + b1 * width])
            base += nb * width
        return out

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

        # Few and in-place operations: at the sizes of a prefill all_reduce (tens of thousands of values)
        # each one's fixed cost is as large as its work, and on ranks sharing cores it is paid per call.
        numel = x.numel()
        blocks = x.reshape(-1, self.block)
        scratch = self._workspace(numel, x.device).view(-1, self.block)
        scales = torch.abs(blocks, out=scratch).amax(dim=1, keepdim=True).div_(self.qmax)
        # A scale below the smallest float32 normal would make its inverse overflow, so such blocks (absmax
        # < qmax * 2**-126) and all-zero blocks encode as 0: the scale is zeroed, and its inverse (1/0 = inf)
        # too.
        torch.threshold_(scales, _BELOW_TINY, 0.0)
        split = self.payload_nbytes(numel)
        _store_float32(out[split:], scales)
        inv = torch.reciprocal(scales).nan_to_num_(0.0, 0.0, 0.0)
        self._quantize_into(torch.mul(blocks, inv, out=scratch), out[:split])

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
