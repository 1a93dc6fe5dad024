"""What comes in from a source before the engine files it: each read in its own thread (one at most per source),
all of a poll's reads under one deadline, negative counters and names Prometheus cannot carry refused, and the
errors of one poll bounded."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from tensorfabric.errors import TensorFabricError
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources import Reading, Source

__all__ = ["MAX_ERRORS", "Answer", "Reader", "bad_names", "bounded", "checked", "read_all"]

_VALUE = attrgetter("value")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,199}")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,99}")
MAX_ERRORS = 20
"""Errors kept per source per poll; the rest are counted in one summary line (a replay of junk has millions)."""


class Reader:
    """One source read in its own daemon thread: at most one read in flight per source, never restarted while
    it runs, and its answer kept until a poll takes it.

    A read that outlives its poll's deadline keeps its thread (Python cannot stop it) but gets no second one:
    polls that come while it runs start nothing and wait on nothing, so a source that never answers holds one
    thread for good and costs each poll nothing. A read that answers after its deadline is not lost: the next
    poll takes that answer when its own fresh read does not answer in time.
    """

    def __init__(self, source: Source) -> None:
        self.source = source
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._finished = threading.Event()
        self._answer: Reading | Exception | None = None
        self._answered_at = 0.0
        self.busy_since: float | None = None
        """``time.monotonic()`` when the read in flight started (None: none in flight)."""
        self.last_took_s: float | None = None
        """How long the last finished read took (None: none finished yet)."""

    def begin(self) -> bool:
        """Start a read unless one is in flight; True when this call started it."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return False
            self._finished = threading.Event()
            self.busy_since = time.monotonic()
            self._thread = threading.Thread(target=self._run, args=(self._finished,),
                                            name=f"source {self.source.name}", daemon=True)
            self._thread.start()
            return True

    def _run(self, finished: threading.Event) -> None:
        answer: Reading | Exception
        try:
            answer = self.source.read()
        except (TensorFabricError, OSError) as exc:
            answer = exc
        except Exception as exc:  # noqa: BLE001 -- a source bug must cost its own poll only, not the monitor
            answer = RuntimeError(f"{type(exc).__name__}: {exc}")
        with self._lock:
            self._answer, self._answered_at = answer, time.monotonic()  # the newest answer wins
            if self.busy_since is not None:
                self.last_took_s = self._answered_at - self.busy_since
            self.busy_since = None
        finished.set()

    def wait(self, timeout_s: float) -> bool:
        """Wait for the read :meth:`begin` started; True when it has answered."""
        return self._finished.wait(timeout_s)

    def take(self) -> tuple[Reading | Exception, float] | None:
        """The newest answer no poll has taken yet, with ``time.monotonic()`` when it came (None: no answer)."""
        with self._lock:
            if self._answer is None:
                return None
            answer, self._answer = self._answer, None
            return answer, self._answered_at


def checked(samples: Sequence[Sample]) -> tuple[Sequence[Sample], tuple[str, ...]]:
    """The samples without negative counter values (bad input: no counter goes below zero), and one error each."""
    if not samples or min(map(_VALUE, samples)) >= 0:
        return samples, ()
    bad = [s for s in samples if s.kind == "counter" and s.value < 0]
    if not bad:
        return samples, ()
    refused = tuple(f"{s.metric} {dict(s.labels)}: negative counter value {s.value:g} refused"[:200] for s in bad)
    return [s for s in samples if not (s.kind == "counter" and s.value < 0)], refused


_NAMES_OK: set[tuple[str, tuple[str, ...]]] = set()


def bad_names(sample: Sample) -> str:
    """Why Prometheus could not carry this sample's metric or label names ("" when it can)."""
    key = (sample.metric, tuple(sample.labels))
    if key in _NAMES_OK:
        return ""
    if _METRIC_NAME.fullmatch(sample.metric) is None:
        return f"metric name {sample.metric[:60]!r} is not [a-zA-Z_:][a-zA-Z0-9_:]*; sample refused"
    for name in sample.labels:
        if _LABEL_NAME.fullmatch(name) is None or name.startswith("__"):
            return (f"{sample.metric}: label name {name[:60]!r} is reserved (__*) or not [a-zA-Z_][a-zA-Z0-9_]*; "
                    "sample refused")
    if len(_NAMES_OK) > 10_000:
        _NAMES_OK.clear()
    _NAMES_OK.add(key)
    return ""


def bounded(errors: tuple[str, ...]) -> tuple[str, ...]:
    if len(errors) <= MAX_ERRORS:
        return errors
    return (*errors[:MAX_ERRORS], f"... and {len(errors) - MAX_ERRORS} more errors in this poll")


_RESERVE = 0.05
"""Share of the source deadline a poll always keeps back for filing what it read (the first poll has no
measure of that time yet)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What one poll got from one source: a reading, the error it raised, or None (no answer by the deadline)."""

    source: Source
    answer: Reading | Exception | None
    at: float | None
    """``time.monotonic()`` when the answer came; with no answer, when the read still in flight began."""


def read_all(sources: Sequence[Source], readers: dict[str, Reader], started: float, deadline_s: float | None,
             filing_s: float) -> list[Answer]:
    """Every source's answer: a reading, the error it raised, or (past the deadline) none.

    Without a deadline the sources are read one after another in this thread. With one, each is read by its
    :class:`Reader` (kept in ``readers`` by source name), all under one deadline from ``started``, less the time
    filing their readings takes (``filing_s``, kept back so that a scrape waiting on this poll gets its answer by
    the deadline)."""
    if deadline_s is None:
        out: list[Answer] = []
        for source in sources:
            try:
                reading: Reading | Exception = source.read()
            except (TensorFabricError, OSError) as exc:
                reading = exc
            out.append(Answer(source, reading, time.monotonic()))
        return out
    started_reads = []
    for source in sources:
        reader = readers.get(source.name)
        if reader is None or reader.source is not source:
            reader = readers[source.name] = Reader(source)
        # a source whose last read outlived the deadline is read in the background: its fresh read starts
        # but is not waited on (taken by a later poll), so a dead source costs one poll its deadline, once
        slow = reader.last_took_s is not None and reader.last_took_s > deadline_s
        started_reads.append((source, reader, reader.begin() and not slow))
    # A read still running from an earlier poll already had its deadline: it is not waited on again (it is
    # taken if it answered meanwhile).
    reserve = min(max(filing_s, _RESERVE * deadline_s), deadline_s / 2)
    deadline = started + deadline_s - reserve
    for _, reader, fresh in started_reads:
        if fresh:
            reader.wait(max(0.0, deadline - time.monotonic()))
    answers: list[Answer] = []
    for source, reader, _ in started_reads:
        taken = reader.take()
        answers.append(Answer(source, None, reader.busy_since) if taken is None else Answer(source, *taken))
    return answers
