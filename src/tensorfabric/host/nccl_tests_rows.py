"""One nccl-tests/rccl-tests result row, read by its shape so every era and fork reads the same::

    size count [type [redop]] [root]  time algbw busbw wrong  [time algbw busbw wrong]  [timestamp]

``wrong`` is ``#wrong`` (elements that failed the check, ``%g``: ``0``, ``12``, ``1e+06``) since nccl-tests' 2.13
resync (2022), ``N/A`` with ``-c 0`` or where a check does not apply (alltoall/sendrecv in-place), and in older
releases the column ``error``: the largest deviation, ``%5.0le`` (``0e+00``, ``2e-06``), which is no count of wrong
elements. ``-I`` adds ``i_min i_max i_p99 i_cv%`` to each group (eight values), ``-S`` a timestamp; the 2017 form
printed ``bytes N type op time algbw busbw res`` with time in milliseconds; rccl-tests can print in-place only;
nccl-tests' trace replay and mscclpp-test print one group after a blank one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from tensorfabric.intake import Line

__all__ = ["Header", "Placement", "SizeResult", "decode_nccl_code", "name_collective", "parse_header", "parse_row",
           "row_start"]

_ROW_START = re.compile(r"\d{1,20}[ \t]+\d{1,20}(?:[ \t]|$)")
_NUMBER = re.compile(r"-?(?:\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][+-]?\d{1,4})?")
_NONFINITE = frozenset({"nan", "-nan", "inf", "-inf"})
_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2}")
_TOKEN = re.compile(r"\S+")
_BLANK_GROUP = 24
"""A gap this wide before the first value means the first group was printed blank (``writeBenchMarkLineNullBody``
prints 32 spaces); ordinary columns are separated by two spaces plus at most one empty ``%6s`` label."""


@dataclass(frozen=True, slots=True)
class Header:
    """What a column-header line says about the rows under it."""

    placements: int
    """Groups of values per row (``busbw`` columns): 2 (out-of-place, in-place) or 1."""
    width: int
    """Values per group: 4, or 8 with per-iteration statistics (``-I``)."""
    wrong: Literal["count", "deviation"]
    root: bool
    time_scale: float
    """Microseconds per printed time unit: 1, or 1000 in the 2017 form (milliseconds)."""


@dataclass(frozen=True, slots=True)
class Placement:
    """The out-of-place or the in-place measurement of one size."""

    time_us: float
    algbw: float
    """GB/s, GB = 1e9 bytes."""
    busbw: float
    wrong: int | None = None
    """Elements that failed the check; None when not checked (``N/A``) or in an old release's ``error`` column."""
    max_error: float | None = None
    """Old releases' ``error`` column: the largest deviation (``2e-06`` is normal for float sums)."""

    def to_dict(self) -> dict[str, Any]:
        return {"time_us": self.time_us, "algbw": self.algbw, "busbw": self.busbw, "wrong": self.wrong,
                "max_error": self.max_error}


@dataclass(frozen=True, slots=True)
class SizeResult:
    line: int
    size: int
    """Bytes (``max(sendBytes, recvBytes)``)."""
    count: int
    type: str
    redop: str
    root: int | None
    out_of_place: Placement | None
    in_place: Placement | None

    @property
    def key(self) -> tuple[str, str, int | None]:
        return self.type, self.redop, self.root

    @property
    def busbw(self) -> float:
        return max((p.busbw for p in (self.out_of_place, self.in_place) if p is not None), default=0.0)

    @property
    def wrong(self) -> int:
        return sum(p.wrong or 0 for p in (self.out_of_place, self.in_place) if p is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "size": self.size, "count": self.count, "type": self.type, "redop": self.redop,
                "root": self.root, "out_of_place": self.out_of_place.to_dict() if self.out_of_place else None,
                "in_place": self.in_place.to_dict() if self.in_place else None, "busbw": self.busbw}


def row_start(text: str) -> bool:
    """Whether the (stripped) text opens like a result row: two whole numbers, size and count."""
    return _ROW_START.match(text) is not None


def parse_header(text: str) -> Header | None:
    """The column-header line (``#  size  count  type  redop  root  time  algbw  busbw  #wrong ...``), or None."""
    words = text.lstrip("#").split()
    if not words or words[0] not in ("size", "bytes") or "busbw" not in words or "algbw" not in words:
        return None
    groups = max(1, words.count("busbw"))
    width = 8 if "i_min" in words else 4
    wrong: Literal["count", "deviation"] = "deviation" if ("error" in words or "res" in words) else "count"
    return Header(groups, width, wrong, "root" in words, 1000.0 if "res" in words else 1.0)


def parse_row(line: Line, header: Header | None, order: tuple[str, ...]) -> tuple[SizeResult | None, str]:
    """``(row, "")``, ``(row, warning)`` for a row with a malformed value, or ``(None, why)``."""
    spans = [(m.start(), m.group()) for m in _TOKEN.finditer(line.text)]
    if len(spans) < 3:
        return None, "a size and a count but no measurements (the line is cut)"
    tokens = [t for _, t in spans]
    i = 2
    while i < len(tokens) and i < 5 and not _is_number(tokens[i]):
        i += 1
    labels, values = tokens[2:i], tokens[i:]
    while values and _STAMP.fullmatch(values[-1]):
        values.pop()
    widths = (header.width,) if header is not None else (4, 8)
    for width in (*widths, *(w for w in (4, 8) if w not in widths)):
        shaped = _shape(values, width, header.root if header and width == header.width else None)
        if shaped is not None:
            break
    else:
        return None, (f"{len(values)} values after {' '.join(tokens[:i])!r}: expected [root] and one or two groups "
                      "of time, algbw, busbw, #wrong")
    root, groups = shaped
    gap = spans[i][0] - (spans[i - 1][0] + len(spans[i - 1][1])) if i < len(spans) else 0
    names = _placements(len(groups), order, header, blank_first=gap >= _BLANK_GROUP)
    wrong_kind = header.wrong if header is not None else None
    scale = header.time_scale if header is not None else 1.0
    warning = ""
    placed: dict[str, Placement] = {}
    for name, group in zip(names, groups, strict=True):
        placement, problem = _placement(group, wrong_kind, scale)
        placed[name] = placement
        warning = warning or problem
    row = SizeResult(line.number, int(tokens[0]), int(tokens[1]), labels[0] if labels else "",
                     labels[1] if len(labels) > 1 else "", root, placed.get("out-of-place"), placed.get("in-place"))
    return row, warning


def _is_number(token: str) -> bool:
    return token.lower() in _NONFINITE or _NUMBER.fullmatch(token) is not None


def _is_wrong(token: str) -> bool:
    return token == "N/A" or _is_number(token.rstrip("*"))


def _shape(values: list[str], width: int, root: bool | None) -> tuple[int | None, list[list[str]]] | None:
    """Root and value groups when ``values`` has the shape, else None."""
    extra = len(values) % width
    if extra not in (0, 1) or (root is True and not extra) or (root is False and extra):
        return None
    lead = None
    if extra:
        if _NUMBER.fullmatch(values[0]) is None or "." in values[0]:
            return None
        lead = int(float(values[0]))
    groups = [values[k:k + width] for k in range(extra, len(values), width)]
    if not 1 <= len(groups) <= 2:
        return None
    for group in groups:
        if not all(_is_number(v) for v in group[:3]) or not _is_wrong(group[3]):
            return None
        if not all(_is_number(v) for v in group[4:]):
            return None
    return lead, groups


def _placements(count: int, order: tuple[str, ...], header: Header | None, *, blank_first: bool) -> tuple[str, ...]:
    if count == 2:
        return order if len(order) == 2 else ("out-of-place", "in-place")
    if len(order) == 1 or (header is not None and header.placements == 1):
        return order[:1] if len(order) == 1 else ("in-place",)
    return (order[1],) if blank_first else (order[0],)


def _placement(group: list[str], wrong_kind: str | None, scale: float) -> tuple[Placement, str]:
    numbers = [_float(v) for v in group[:3]]
    problem = ""
    if any(not math.isfinite(v) for v in numbers):
        problem = f"non-finite value in {' '.join(group[:3])!r} read as 0"
        numbers = [v if math.isfinite(v) else 0.0 for v in numbers]
    time, algbw, busbw = numbers
    wrong, error = _wrong(group[3].rstrip("*"), wrong_kind)
    return Placement(time * scale, algbw, busbw, wrong, error), problem


def _float(token: str) -> float:
    return float(token.replace("-nan", "nan"))


def _wrong(token: str, kind: str | None) -> tuple[int | None, float | None]:
    if token == "N/A":
        return None, None
    value = _float(token)
    if not math.isfinite(value):
        return None, None
    if kind is None:
        # %g prints counts as integers up to 1e+06; the old %5.0le deviation is always in e-notation
        mantissa, e, exponent = token.lower().partition("e")
        kind = "deviation" if (e and int(exponent) < 6) or "." in mantissa else "count"
    if kind == "deviation":
        return None, value
    return int(value), None


_COLLECTIVE_NAMES = ("all_reduce", "all_gather", "reduce_scatter", "alltoallv", "alltoall", "broadcast", "reduce",
                     "sendrecv", "gather", "scatter", "hypercube")


def decode_nccl_code(code: str) -> str:
    # NCCL_VERSION_CODE: major*1000 + minor*100 + patch before 2.9, major*10000 + minor*100 + patch since
    value = int(code)
    if value >= 20900:
        return f"{value // 10000}.{value // 100 % 100}.{value % 100}"
    return f"{value // 1000}.{value // 100 % 10}.{value % 100}"


def name_collective(test: str, rows: Iterable[SizeResult]) -> tuple[str, bool]:
    """The collective a table measured: from the binary's name where it has one, else inferred from its rows."""
    name = test.removesuffix("_mpi").removesuffix("_perf")
    if name in _COLLECTIVE_NAMES:
        return name, True
    return _infer(tuple(rows)), False


def _infer(rows: tuple[SizeResult, ...]) -> str:
    """The collective from the row labels and busbw/algbw, the factor nccl-tests applies (doc/PERFORMANCE.md):
    all_reduce 2(n-1)/n (>= 1), reduce_scatter/all_gather/alltoall (n-1)/n (< 1), broadcast/reduce/sendrecv 1."""
    measured = [p for r in rows for p in (r.out_of_place, r.in_place) if p is not None and p.algbw > 0 and p.busbw > 0]
    if not rows or not measured:
        return ""
    widest = max(measured, key=lambda p: p.algbw)
    ratio = widest.busbw / widest.algbw
    first = rows[0]
    reduces = first.redop not in ("", "none")
    if first.root is not None and first.root >= 0:
        return "reduce" if reduces else "broadcast"
    if reduces:
        return "reduce_scatter" if ratio < 0.99 else "all_reduce"
    return "sendrecv" if ratio >= 0.99 else ""
