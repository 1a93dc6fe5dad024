"""Counter deltas and rates with wrap and reset detection.

A counter that goes down has either wrapped (a 32-bit hardware counter passing 2**32) or been reset (driver
reload, ``sonic-clear``, reboot). Neither may produce a negative rate, and a reset is reported as an event
rather than hidden: sonic-utilities' ``ns_diff`` clamps to zero and so loses it.

Wrap versus reset: a drop is read as a wrap only when the metric's catalogue entry gives a modulus and the
previous value sat in the top half of the range -- a 32-bit counter near 2**32 that comes back small. Any other
drop is a reset, and the increase since the reset is the new value itself (counters restart at zero).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tensorfabric.samples import Sample
from tensorfabric.telemetry.metrics import spec

__all__ = ["CounterEvent", "Rate", "RateTracker", "counter_delta"]

EventKind = Literal["", "wrap", "reset"]


def counter_delta(previous: float, current: float, wrap: float | None = None) -> tuple[float, EventKind]:
    """Increase from ``previous`` to ``current`` (never negative) and what happened in between."""
    if current >= previous:
        return current - previous, ""
    if wrap is not None and previous >= wrap / 2 and current < wrap / 2:
        return current + wrap - previous, "wrap"
    return current, "reset"


@dataclass(frozen=True, slots=True)
class CounterEvent:
    """A counter wrapped or reset between two polls."""

    metric: str
    labels: tuple[tuple[str, str], ...]
    time: float
    kind: Literal["wrap", "reset"]
    previous: float
    current: float


@dataclass(frozen=True, slots=True)
class Rate:
    """Per-second increase of one counter series over one poll interval."""

    metric: str
    labels: tuple[tuple[str, str], ...]
    start: float
    end: float
    increase: float

    @property
    def per_second(self) -> float:
        return self.increase / (self.end - self.start)


class RateTracker:
    """Remembers the last value of every counter series and turns each new poll into Rates and events."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, float]] = {}
        self.events: deque[CounterEvent] = deque(maxlen=1000)
        """The most recent wraps and resets (bounded: a monitor runs for months)."""
        self.event_counts: dict[tuple[str, str], int] = {}
        """How many wraps/resets each metric has had, by (metric, kind)."""

    def update(self, samples: Iterable[Sample]) -> list[Rate]:
        """Rates since each counter's previous reading; older or same-time readings are ignored."""
        rates: list[Rate] = []
        for sample in samples:
            if sample.kind != "counter":
                continue
            key = sample.series
            before = self._last.get(key)
            if before is not None and before[0] >= sample.time:
                continue  # same or older poll: nothing new to say
            self._last[key] = (sample.time, sample.value)
            if before is not None:
                increase = self.record(sample.metric, key[1], sample.time, before[1], sample.value)
                rates.append(Rate(sample.metric, key[1], before[0], sample.time, increase))
        return rates

    def record(self, metric: str, labels: tuple[tuple[str, str], ...], time: float, previous: float,
               current: float) -> float:
        """The increase from ``previous`` to ``current``, keeping a wrap or reset as an event.

        For callers that keep the last value of each series themselves (the engine, on its Tracks).
        """
        entry = spec(metric)
        increase, event = counter_delta(previous, current, entry.wrap if entry else None)
        if event:
            self.events.append(CounterEvent(metric, labels, time, event, previous, current))
            count_key = (metric, event)
            self.event_counts[count_key] = self.event_counts.get(count_key, 0) + 1
        return increase
