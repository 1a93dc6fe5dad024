"""One timestamp per poll, shared by every source the poll reads.

Prometheus stamps every series of a scrape with the scrape's start; the monitor does the same. Without it, 64
sources read one after another carry 64 slightly different times, and the engine -- which evaluates the
detectors once per distinct poll time so that a replayed recording sees what the live monitor saw -- would
run every detector 64 times per poll. A source keeps its place in the reading order from poll to poll, so
stamping it with the poll's start moves its rate intervals by the jitter of that offset only (milliseconds
against a 15 s interval).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["PollClock"]


class PollClock:
    """A clock that, inside :meth:`frozen`, returns the time the poll started; outside it, the real time."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._now: float | None = None

    def __call__(self) -> float:
        return self._clock() if self._now is None else self._now

    @contextmanager
    def frozen(self) -> Iterator[float]:
        """Hold one time for the duration of a poll (re-entrant: an inner poll keeps the outer time)."""
        if self._now is not None:
            yield self._now
            return
        self._now = self._clock()
        try:
            yield self._now
        finally:
            self._now = None
