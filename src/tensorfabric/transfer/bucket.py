"""Bucketing: coalesce many small tensors into flat buffers so one collective moves them all.

Tensors are grouped by dtype and device (a flat buffer has one of each) and packed in order into buckets of
at most ``bucket_bytes`` (a tensor larger than that gets a bucket of its own). ``Bucket.views`` are views into
``Bucket.flat`` shaped like the inputs; after a collective on ``flat`` they hold the results, and
``copy_back()`` writes them into the original tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["Bucket", "buckets"]


@dataclass(frozen=True)
class Bucket:
    flat: torch.Tensor
    """One contiguous 1-D buffer holding every member, in order."""
    views: tuple[torch.Tensor, ...]
    """Views into ``flat``, one per member, each shaped like its original."""
    originals: tuple[torch.Tensor, ...]

    def copy_back(self) -> None:
        for view, original in zip(self.views, self.originals, strict=True):
            if view.data_ptr() != original.data_ptr():
                original.copy_(view)


def _pack(members: Sequence[torch.Tensor]) -> Bucket:
    import torch

    flat = torch.cat([m.reshape(-1) for m in members])
    views = []
    offset = 0
    for m in members:
        views.append(flat[offset:offset + m.numel()].view(m.shape))
        offset += m.numel()
    return Bucket(flat, tuple(views), tuple(members))


def buckets(tensors: Sequence[torch.Tensor], bucket_bytes: int = 25 * 2**20) -> list[Bucket]:
    """Pack ``tensors`` into flat buckets (see the module docstring); order within a dtype is preserved."""
    if bucket_bytes < 1:
        raise InputError(f"bucket_bytes: {bucket_bytes!r} must be a positive size such as 25M")
    by_kind: dict[tuple[object, object], list[torch.Tensor]] = {}
    for t in tensors:
        by_kind.setdefault((t.dtype, t.device), []).append(t)
    result: list[Bucket] = []
    for members in by_kind.values():
        current: list[torch.Tensor] = []
        size = 0
        for t in members:
            nbytes = t.numel() * t.element_size()
            if current and size + nbytes > bucket_bytes:
                result.append(_pack(current))
                current, size = [], 0
            current.append(t)
            size += nbytes
        if current:
            result.append(_pack(current))
    return result
