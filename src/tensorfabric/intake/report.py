"""What a reader read: the :class:`ReadReport` every reader of pasted text returns beside its facts, and the
:class:`Tally` a reader keeps while it reads.

The contract it carries: a text holding one recognised fact is never refused; lines that carry the format's marker
but no rule reads are listed as *not understood* (by number), everything else (prose, other programs' output) is
*skipped*; a malformed value inside a recognised line is a *warning* naming the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensorfabric.errors import ParseError
from tensorfabric.intake.text import Line, Text

__all__ = ["ReadReport", "Tally"]

_SHOWN = 10
"""Line numbers listed in a one-line summary; the JSON form lists them all."""


@dataclass(frozen=True, slots=True)
class ReadReport:
    source: str
    format: str
    """What the text was read as: ``NCCL log``, ``UCX log``, ``GID table``, ``nccl-tests output``, ..."""
    version: str | None
    total: int
    """Physical lines in the input."""
    used: int
    """Lines a fact came from."""
    not_understood: tuple[int, ...]
    """Lines that carry the format's marker but that no rule read."""
    skipped: int
    """Other content lines (prose, other programs' output), passed over."""
    envelopes: tuple[str, ...]
    """What was taken off the lines (``Ray prefix``, ``timestamps``, ``CRLF``, ...)."""
    sections: int
    warnings: tuple[str, ...]
    long_lines: tuple[int, ...] = ()
    elided: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """``NCCL 2.27 log``: the format with its version, when known, before the last word."""
        if not self.version:
            return self.format
        head, sep, tail = self.format.rpartition(" ")
        return f"{head} {self.version} {tail}" if sep else f"{self.format} {self.version}"

    def summary(self) -> str:
        """One line for people: ``read as NCCL 2.27 log (Ray prefix): 412 lines used, 3 not understood (17, 40)``."""
        wrapped = f" ({', '.join(self.envelopes)})" if self.envelopes else ""
        parts = [f"{self.used} line{'s' if self.used != 1 else ''} used"]
        if self.not_understood:
            shown = ", ".join(map(str, self.not_understood[:_SHOWN]))
            more = f", +{len(self.not_understood) - _SHOWN} more" if len(self.not_understood) > _SHOWN else ""
            parts.append(f"{len(self.not_understood)} not understood ({shown}{more})")
        if self.skipped:
            parts.append(f"{self.skipped} other skipped")
        if self.warnings:
            parts.append(f"{len(self.warnings)} warning{'s' if len(self.warnings) != 1 else ''}")
        if self.long_lines:
            parts.append(f"{len(self.long_lines)} over-long skipped")
        if self.elided:
            parts.append(f"cut at {len(self.elided)} elision{'s' if len(self.elided) != 1 else ''}")
        if self.sections > 1:
            parts.append(f"{self.sections} sections")
        return f"read {self.source} as {self.label}{wrapped}: {', '.join(parts)}"

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "format": self.format, "version": self.version, "total_lines": self.total,
                "used": self.used, "not_understood": list(self.not_understood), "skipped": self.skipped,
                "envelopes": list(self.envelopes), "sections": self.sections, "warnings": list(self.warnings),
                "long_lines": list(self.long_lines), "elided": list(self.elided), "summary": self.summary()}


class Tally:
    """A reader's bookkeeping while it reads one :class:`Text`."""

    def __init__(self, text: Text, format: str) -> None:  # noqa: A002 -- the word users see
        self.text = text
        self.format = format
        self.version: str | None = None
        self.sections = 1
        self._used: set[int] = set()
        self._unknown: dict[int, None] = {}
        self._warnings: list[str] = []

    def use(self, line: Line | int) -> None:
        number = line if isinstance(line, int) else line.number
        self._used.add(number)
        self._unknown.pop(number, None)

    def not_understood(self, line: Line | int) -> None:
        number = line if isinstance(line, int) else line.number
        if number not in self._used:
            self._unknown[number] = None

    def warn(self, line: Line | int, message: str) -> None:
        number = line if isinstance(line, int) else line.number
        self._warnings.append(f"line {number}: {message}")

    @property
    def used(self) -> int:
        return len(self._used)

    def require(self, expected: str) -> None:
        """ParseError unless a fact was read: it names what was expected and shows the first line."""
        if self._used:
            return
        first = next((line for line in self.text.lines if line.kind != "blank"), None)
        shown = f"; the first line is {first.text[:100]!r} (line {first.number})" if first else ""
        long = (f" ({len(self.text.long_lines)} line(s) over the length limit were skipped)"
                if self.text.long_lines else "")
        raise ParseError(f"nothing here reads as {self.format}: expected {expected}{shown}{long}",
                         source=self.text.source)

    def report(self) -> ReadReport:
        unknown = tuple(sorted(self._unknown))
        counted = self._used | set(unknown)
        skipped = sum(1 for line in self.text.lines if line.kind == "text" and line.number not in counted)
        return ReadReport(self.text.source, self.format, self.version, self.text.total, len(self._used), unknown,
                          skipped, self.text.envelopes, self.sections, tuple(self._warnings), self.text.long_lines,
                          self.text.elided)
