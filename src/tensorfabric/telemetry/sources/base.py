"""What every source shares: the Source protocol, the per-poll Reading and the injected OS boundary."""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tensorfabric.errors import DiscoveryError, InputError
from tensorfabric.intake import ReadReport
from tensorfabric.samples import Sample

__all__ = ["CounterFilter", "Reading", "Runner", "Source", "SourceContext", "capture_or_run", "run_command",
           "to_number"]

Runner = Callable[[Sequence[str]], str]


def run_command(argv: Sequence[str], timeout_s: float = 10.0) -> str:
    """Run a command and return its stdout; failures become DiscoveryError naming the command."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DiscoveryError(f"{' '.join(argv)}: {exc}") from exc
    if done.returncode != 0:
        raise DiscoveryError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[:200]}")
    return done.stdout


_MAX_NAME = 128  # longer "counter names" are garbage, and regexes only ever see bounded text


@dataclass(frozen=True, slots=True)
class CounterFilter:
    """Which counters without a canonical name a source exports in the generic family, and how many at most.

    ``allow``/``deny`` are regexes searched in the raw counter name (deny wins); ``max_series`` caps the generic
    series one source may create over its life, so a driver with thousands of per-ring counters cannot blow up
    the exporter's cardinality (node_exporter#2096: ethtool keys were 10 196 of 17 738 series).
    """

    allow: re.Pattern[str] | None = None
    deny: re.Pattern[str] | None = None
    max_series: int = 1024

    @classmethod
    def parse(cls, allow: str | None, deny: str | None, max_series: int = 1024) -> CounterFilter:
        def compile_(what: str, text: str | None) -> re.Pattern[str] | None:
            if not text:
                return None
            try:
                return re.compile(text)
            except re.error as exc:
                raise InputError(f"{what} {text!r}: not a regular expression ({exc})") from exc
        if max_series < 0:
            raise InputError(f"--counters-max {max_series}: expected 0 or more series")
        return cls(compile_("--counters-allow", allow), compile_("--counters-deny", deny), max_series)

    def admits(self, name: str) -> bool:
        if len(name) > _MAX_NAME:
            return False
        if self.deny is not None and self.deny.search(name):
            return False
        return self.allow is None or self.allow.search(name) is not None


@dataclass(frozen=True, slots=True)
class SourceContext:
    """The OS boundary a source may touch: host label, command runner and clock; and the generic-counter filter."""

    host: str = field(default_factory=socket.gethostname)
    run: Runner = run_command
    clock: Callable[[], float] = time.time
    counters: CounterFilter = field(default_factory=CounterFilter)


@dataclass(frozen=True, slots=True)
class Reading:
    """One poll of one source: the samples it could read and the errors it met on the way.

    A source that hits a bad file or counter keeps going and reports it here; only a source that cannot
    read anything at all raises.
    """

    samples: tuple[Sample, ...] = ()
    errors: tuple[str, ...] = ()
    read: ReadReport | None = None
    """What a source of pasted text read (lines used, not understood, warnings); None for live sources."""


class Source(Protocol):
    """A counter source. ``name`` is the ``KIND:ARG`` it was opened with."""

    name: str

    def read(self) -> Reading:
        """Poll once. Raises TensorFabricError when nothing at all could be read."""
        ...


def to_number(text: str) -> float | None:
    """A counter value as a float; None for text that is not a finite number (``N/A (no PMA)``, garbage)."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


def capture_or_run(name: str, path: Path | None, ctx: SourceContext, argv: Sequence[str]) -> str:
    """The tool's text: from a captured file when ``path`` is given, else by running ``argv`` live."""
    if path is None:
        return ctx.run(argv)
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        raise InputError(f"{name}: cannot read {path}: {exc.strerror or exc}") from exc
