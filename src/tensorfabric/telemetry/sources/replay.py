"""``replay:PATH`` -- Samples from a JSON-lines file (what the simulator and ``monitor --record`` write).

The file is followed like ``tail -F``: each poll returns the lines appended since the last one, so a monitor can
watch a recording that is still being written; a file replaced under the same name (log rotation: a new inode)
or truncated (shorter than what was read) is read again from its start. A bad line is an error of that poll;
the good lines are kept, and the errors of one poll are bounded (a file of junk gives a summary, not millions
of messages).

A last line without a newline is read as soon as it is a whole sample (a recording whose writer ended without
one); while it is not, it waits for the writer, and when a poll finds it unchanged and still not a sample, that
is reported (never dropped silently). A file that is not text (NUL bytes, mostly control bytes) is refused when
the source is opened, like every other file input.
"""

from __future__ import annotations

import os
from pathlib import Path

from tensorfabric.errors import InputError, ParseError
from tensorfabric.intake import decode
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources.base import Reading, SourceContext

__all__ = ["ReplaySource", "open_source", "parse_lines"]


MAX_ERRORS = 19  # plus the summary line: within the monitor's 20 errors per source and poll


def parse_lines(text: str, *, source: str, first_line: int = 1) -> tuple[list[Sample], list[str]]:
    samples: list[Sample] = []
    errors: list[str] = []
    bad = 0
    for number, line in enumerate(text.splitlines(), start=first_line):
        if not line.strip():
            continue
        try:
            samples.append(Sample.from_json(line, source=source, line=number))
        except ParseError as exc:
            bad += 1
            if bad <= MAX_ERRORS:
                errors.append(str(exc))
    if bad > MAX_ERRORS:
        errors.append(f"{source}: {bad - MAX_ERRORS} more lines that are not samples")
    return samples, errors


class ReplaySource:
    def __init__(self, path: Path) -> None:
        self.name = f"replay:{path}"
        self._path = path
        self._offset = 0
        self._line = 1
        self._inode: int | None = None
        self._pending = b""
        """An unterminated last line that was not a sample at the last poll (it stays unread until it is)."""
        self._reported = False

    def read(self) -> Reading:
        try:
            with self._path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                if stat.st_ino != self._inode or stat.st_size < self._offset:  # rotated or truncated
                    self._inode, self._offset, self._line, self._pending = stat.st_ino, 0, 1, b""
                handle.seek(self._offset)
                data = handle.read()
        except OSError as exc:
            raise InputError(f"{self.name}: cannot read: {exc.strerror or exc}") from exc
        end = data.rfind(b"\n") + 1
        chunk = data[:end].decode("utf-8", errors="replace")
        self._offset += end
        samples, errors = parse_lines(chunk, source=str(self._path), first_line=self._line)
        self._line += chunk.count("\n")
        tail = data[end:]
        if tail.strip():
            samples, errors = self._tail(tail, samples, errors)
        else:
            self._pending = b""
        return Reading(tuple(samples), tuple(errors))

    def _tail(self, tail: bytes, samples: list[Sample], errors: list[str]) -> tuple[list[Sample], list[str]]:
        """The last line has no newline: a whole sample is read now; anything else waits for the writer once."""
        text = tail.decode("utf-8", errors="replace")
        try:
            sample = Sample.from_json(text, source=str(self._path), line=self._line)
        except ParseError as exc:
            if tail == self._pending and not self._reported:  # a poll later and unchanged: the writer stopped
                errors = [*errors, f"{exc} (the last line has no newline and is not a whole sample)"]
                self._reported = True
            elif tail != self._pending:
                self._pending, self._reported = tail, False
            return samples, errors
        self._offset += len(tail)
        self._pending = b""
        return [*samples, sample], errors


_HEAD_BYTES = 65536


def open_source(arg: str, ctx: SourceContext) -> ReplaySource:
    path = Path(arg)
    if not arg or not path.is_file():
        raise InputError(f"replay:{arg}: {arg!r} is not a file (expected JSON lines of samples)")
    try:
        with path.open("rb") as handle:
            head = handle.read(_HEAD_BYTES)
    except OSError as exc:
        raise InputError(f"replay:{arg}: cannot read: {exc.strerror or exc}") from exc
    if head.strip():  # an empty file is a recording about to start; a binary one is the wrong file
        decode(head, source=f"replay:{arg}", what="JSON lines of samples (what `monitor --record` and `simulate` "
                                                  "write)")
    return ReplaySource(path)
