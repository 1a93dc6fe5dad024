"""Small records of the group layer: rank-table entries, batched point-to-point items, async handles, and the
row-major mesh arithmetic. Re-exported by :mod:`tensorfabric.transfer.group`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

__all__ = ["Handle", "RankEntry", "SendRecv", "ravel", "unravel"]


@dataclass(frozen=True)
class RankEntry:
    """One member of a group."""

    global_rank: int
    local_rank: int
    group_rank: int
    host: str
    pid: int


@dataclass(frozen=True)
class SendRecv:
    """One half of a batched point-to-point exchange; ``peer`` is a rank in the group."""

    kind: Literal["send", "recv"]
    tensor: torch.Tensor
    peer: int


class Handle:
    """An async collective in flight. ``wait()`` finishes it, records its stats and returns its result."""

    __slots__ = ("_works", "_finish", "_done", "_result")

    def __init__(self, works: Sequence[Any], finish: Callable[[], Any]) -> None:
        self._works = works
        self._finish = finish
        self._done = False
        self._result: Any = None

    def is_completed(self) -> bool:
        return self._done or all(w.is_completed() for w in self._works)

    def wait(self) -> Any:
        if not self._done:
            self._result = self._finish()
            self._done = True
        return self._result


def unravel(index: int, shape: Sequence[int]) -> list[int]:
    """Row-major coordinates of ``index`` in a mesh of ``shape``."""
    coords = []
    for dim in reversed(shape):
        coords.append(index % dim)
        index //= dim
    return coords[::-1]


def ravel(coords: Sequence[int], shape: Sequence[int]) -> int:
    """Inverse of :func:`unravel`."""
    index = 0
    for c, dim in zip(coords, shape, strict=True):
        index = index * dim + c
    return index
