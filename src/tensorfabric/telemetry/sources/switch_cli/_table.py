"""What the switch table readers share: header columns, rows split to them, and queue names made into labels."""

from __future__ import annotations

import re

__all__ = ["RULE", "columns", "queue_label", "row", "snake"]

RULE = re.compile(r"[-=+|_ ]{3,}")
"""A table rule: ``---------  ------``, ``=====``, ``+-------+``."""
_GAP = re.compile(r"\s{2,}")
_QUEUE = re.compile(r"(UC|MC|ALL|VOQ|TC|Q|TXQ|UCQ|MCQ)?(\d{1,3})", re.IGNORECASE)
_SNAKE = re.compile(r"[^a-z0-9]+")


def columns(header: str) -> list[str]:
    """Column names of a header printed with two or more spaces between columns (names may hold one space)."""
    return [name for name in _GAP.split(header.strip()) if name]


def row(line: str, width: int) -> list[str] | None:
    """The cells of a table row of ``width`` columns, split at whitespace; the last column takes what is left over
    (a timestamp such as ``01/10/2008, 21:20:00``). None when the row has fewer cells."""
    cells = line.split()
    if len(cells) < width:
        return None
    if len(cells) > width:
        cells = [*cells[:width - 1], " ".join(cells[width - 1:])]
    return cells


def queue_label(name: str) -> str | None:
    """A queue label from a printed queue name: unicast and "all" queues by their index (``UC3``, ``ALL3``, ``TC3``,
    ``3`` -> ``3``, matching the priority a lossless queue serves), multicast and VOQ queues prefixed (``MC10`` ->
    ``mc10``) so they are never taken for a lossless unicast queue."""
    match = _QUEUE.fullmatch(name.strip())
    if match is None:
        return None
    kind = (match.group(1) or "").upper()
    index = str(int(match.group(2)))
    if kind in ("MC", "MCQ"):
        return f"mc{index}"
    if kind == "VOQ":
        return f"voq{index}"
    return index


def snake(text: str) -> str:
    """``WRED/AFD & Tail Drop Byts`` -> ``wred_afd_tail_drop_byts``: a printed row name as a generic counter name."""
    return _SNAKE.sub("_", text.lower()).strip("_")[:100]
