"""Reading SONiC config_db JSON as operators paste it: whole, or table by table when it is not one object.

A paste may be one JSON object, a table pasted without the outer braces (``"WRED_PROFILE": {...},``), a file after a
``$ cat`` prompt with other commands' output around it, an excerpt cut at both ends, or a Redis dump whose
entries are flat ``"TABLE|key": {...}`` objects (``sonic-db-dump``, ``redis-dump``): each entry counts as a
table. :class:`TableDoc` keeps the input's line numbers, finds the header of every table it is told to read and
where its closing brace is (string aware, one pass per table, tables never rescanned), so a reader can use the
tables that are whole and leave a cut one out.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tensorfabric.fabric.parsers._read import Reading

__all__ = ["Dups", "TableDoc"]

# A table name, or a flat Redis key (``PORT_QOS_MAP|Ethernet0``, ``QUEUE|lc1|asic0|Ethernet0|3``): one bounded class
# after the name, so a 10 MB line of quotes costs one pass.
_HEADER = re.compile(r'"([A-Za-z][A-Za-z0-9_]{0,63}(?:\|[^"\\\n]{1,256})?)"[ \t]*:[ \t]*\{')


class Dups:
    """``object_pairs_hook`` that keeps every value of a repeated key, by the identity of the object."""

    def __init__(self) -> None:
        self.repeated: dict[int, dict[str, list[Any]]] = {}

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        again: dict[str, list[Any]] = {}
        for key, value in pairs:
            if key in out:
                again.setdefault(key, [out[key]]).append(value)
            out[key] = value
        if again:
            self.repeated[id(out)] = again
        return out


def _close(doc: str, start: int) -> int:
    """Index just past the brace that closes the object opening at ``doc[start]``, or -1 when the text ends first."""
    depth = 0
    i = start
    n = len(doc)
    while i < n:
        ch = doc[i]
        if ch == '"':
            i += 1
            while i < n and doc[i] != '"':
                i += 2 if doc[i] == "\\" else 1
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


class TableDoc:
    """The paste as one string whose line numbers are the input's, with header positions of its tables."""

    def __init__(self, r: Reading, *, known: Callable[[str], bool], within: range | None = None) -> None:
        """``within``: only these line numbers (one file of several pasted one after another)."""
        self.known = known
        rows = [""] * r.text.total
        for section in r.text.sections():
            # Output of other commands in the paste ("Running command: ...") is not part of the JSON.
            if not any("{" in line.text or '"' in line.text for line in section.content()):
                continue
            for line in section.content():
                if within is not None and line.number not in within:
                    continue
                if 0 < line.number <= len(rows):
                    rows[line.number - 1] = line.text
        self.text = "\n".join(rows)
        self.starts = [0]
        for row in rows[:-1]:
            self.starts.append(self.starts[-1] + len(row) + 1)

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def tables(self) -> list[tuple[str, int, int]]:
        """``(name, start, end)`` of every known table or namespace object, outermost first (end -1: cut off)."""
        found: list[tuple[str, int, int]] = []
        covered = -1
        for match in _HEADER.finditer(self.text):
            name = match.group(1)
            if match.start() < covered or not (self.known(name) or name.isupper()):
                continue
            brace = match.end() - 1
            end = _close(self.text, brace)
            found.append((name, match.start(), end))
            covered = end if end >= 0 else len(self.text)
        return found
