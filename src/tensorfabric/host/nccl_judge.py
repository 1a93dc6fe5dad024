"""One judgement per NCCL variable, shared by the host doctor and the fabric linter.

Each function reads a value the way NCCL does and says what it means for RoCE; the callers only add their
subject (a live host's environment, a host in a fabric spec) and their evidence. NCCL reads numeric variables
with ``strtoll(value, nullptr, 0)`` (``ncclLoadParam`` in ``src/misc/param.cc``), so hex such as ``0x6a`` is a
number too, and an empty value leaves the variable's default. strtoll would also read ``abc`` as 0 and ``106x``
as 106; a value that is not wholly an integer is reported as invalid here instead of guessed at.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from tensorfabric import roce

__all__ = ["GidIndex", "IbTc", "NcclList", "exact_list", "judge_gid_index", "judge_ib_tc", "split_nccl_list"]


def _nccl_int(raw: str) -> int | None:
    text = raw.strip()
    if not text:
        return 0  # the default of NCCL_IB_TC, and of NCCL_IB_GID_INDEX before NCCL 2.21 (the link-local entry)
    try:
        return int(text, 0)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class IbTc:
    """``NCCL_IB_TC`` read: the traffic-class byte, the DSCP it carries, and whether that DSCP is lossless."""

    raw: str
    value: int | None
    """The traffic-class byte, or ``None`` when the value is not an integer 0..255."""
    lossless: bool

    @property
    def dscp(self) -> int | None:
        return None if self.value is None else roce.dscp_of_traffic_class(self.value)


def judge_ib_tc(raw: str, roce_dscps: Collection[int]) -> IbTc:
    """Does ``NCCL_IB_TC=raw`` put RoCE data on one of the lossless ``roce_dscps``?"""
    value = _nccl_int(raw)
    if value is not None and not 0 <= value <= 255:
        value = None
    lossless = value is not None and roce.dscp_of_traffic_class(value) in roce_dscps
    return IbTc(raw, value, lossless)


@dataclass(frozen=True, slots=True)
class GidIndex:
    """``NCCL_IB_GID_INDEX`` read: the index (``None`` when not an integer) and whether it pins a table entry."""

    raw: str
    index: int | None

    @property
    def pinned(self) -> bool:
        """A negative index is NCCL's "select automatically" (the default since 2.21) and pins nothing."""
        return self.index is not None and self.index >= 0


def judge_gid_index(raw: str) -> GidIndex:
    """Read ``NCCL_IB_GID_INDEX=raw``; an empty value is judged as index 0, the default of NCCL < 2.21."""
    return GidIndex(raw, _nccl_int(raw))


@dataclass(frozen=True, slots=True)
class NcclList:
    """NCCL's interface/HCA list syntax: leading ``^`` excludes, then ``=`` means exact names, not prefixes."""

    exclude: bool
    exact: bool
    names: tuple[str, ...]

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The names NCCL matches by prefix (``mlx5_1`` also matches ``mlx5_10``); empty for an exact list."""
        return () if self.exact else self.names


def split_nccl_list(value: str) -> NcclList:
    """Read ``value`` as NCCL does (``:port`` suffixes dropped from the names)."""
    text = value.strip()
    exclude = text.startswith("^")
    text = text.removeprefix("^")
    exact = text.startswith("=")
    names = tuple(t.split(":")[0].strip() for t in text.removeprefix("=").split(",") if t.strip())
    return NcclList(exclude, exact, names)


def exact_list(raw: str) -> str:
    """The exact-match form of a list, keeping an exclusion: ``^mlx5_1`` -> ``^=mlx5_1``."""
    parsed = split_nccl_list(raw)
    return f"{'^' if parsed.exclude else ''}={raw.strip().lstrip('^').lstrip('=')}"
