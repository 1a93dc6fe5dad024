"""``replay:PATH`` -- Samples from a JSON-lines file (what the simulator and ``monitor --record`` write).

The file is followed like ``tail -F``: each poll returns the lines appended since the last one, so a monitor can
watch a recording that is still being written; a file replaced under the same name (log rotation: a new inode)
or truncated (shorter than what was read) is read again from its start. A bad line is an error of that poll;
the good lines are kept, and the errors of one poll are bounded (a file of junk gives a summary, not millions
of messages).
"""

from __future__ import annotations

import os
from pathlib import Path

from tensorfabric.errors import InputError, ParseError
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

    def read(self) -> Reading:
        try:
            with self._path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                if stat.st_ino != self._inode or stat.st_size < self._offset:  # rotated or truncated
                    self._inode, self._offset, self._line = stat.st_ino, 0, 1
                handle.seek(self._offset)
                data = handle.read()
        except OSError as exc:
            raise InputError(f"{self.name}: cannot read: {exc.strerror or exc}") from exc
        end = data.rfind(b"\n") + 1  # a half-written last line waits for the next poll
        chunk = data[:end].decode("utf-8", errors="replace")
        self._offset += end
        samples, errors = parse_lines(chunk, source=str(self._path), first_line=self._line)
        self._line += chunk.count("\n")
        return Reading(tuple(samples), tuple(errors))


def open_source(arg: str, ctx: SourceContext) -> ReplaySource:
    path = Path(arg)
    if not arg or not path.is_file():
        raise InputError(f"replay:{arg}: {arg!r} is not a file (expected JSON lines of samples)")
    return ReplaySource(path)
