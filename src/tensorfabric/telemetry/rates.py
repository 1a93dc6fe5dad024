"""Counter deltas and rates with wrap and reset detection.

A counter that goes down has either wrapped (a 32-bit hardware counter passing 2**32) or been reset (driver
reload, ``sonic-clear``, reboot). Neither may produce a negative rate, and a reset is reported as an event
rather than hidden: sonic-utilities' ``ns_diff`` clamps to zero and so loses it.

Three kinds of decrease, judged in this order:

* **glitch** -- a dip no larger than the metric's tolerance (``MetricSpec.glitch``, absolute) or one part in a
  thousand of the previous value: a firmware-sampled counter read a moment early. The increase is 0 and the
  engine keeps the previous value, so neither its detectors nor Prometheus ever see the dip (Prometheus would
  read any decrease as a reset and add the whole counter to its rate);
* **wrap** -- only for counters the catalogue gives a width (``MetricSpec.wrap``): the previous value fits the
  width and the wrapped advance ``current + wrap - previous`` is at most an eighth of the range (5.4e8
  events in one poll for 32 bits: tens of millions per second, more than any of these Q counters sees). A
  32-bit counter at 4.29e9 that reads 500 wrapped; one at 3e9 that reads 10 was reset (a wrapped advance of
  1.3e9 in one poll is not plausible), and so was one whose previous value did not fit in 32 bits;
* **reset** -- anything else; the increase since the reset is the new value itself (counters restart at 0).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tensorfabric.samples import Sample
from tensorfabric.telemetry.metrics import spec

__all__ = ["CounterEvent", "Rate", "RateTracker", "counter_delta"]

EventKind = Literal["", "glitch", "wrap", "reset"]

GLITCH_RELATIVE = 1e-3
WRAP_MAX_SHARE = 1 / 8


def counter_delta(previous: float, current: float, wrap: float | None = None,
                  glitch: float = 0.0) -> tuple[float, EventKind]:
    """Increase from ``previous`` to ``current`` (never negative) and what happened in between."""
    if current >= previous:
        return current - previous, ""
    drop = previous - current
    if drop <= glitch or drop <= GLITCH_RELATIVE * previous:
        return 0.0, "glitch"
    if wrap is not None and previous < wrap:
        wrapped = current + wrap - previous
        if wrapped <= wrap * WRAP_MAX_SHARE:
            return wrapped, "wrap"
    return current, "reset"


@dataclass(frozen=True, slots=True)
class CounterEvent:
    """A counter wrapped or reset between two polls."""

    metric: str
    labels: tuple[tuple[str, str], ...]
    time: float
    kind: Literal["glitch", "wrap", "reset"]
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
                increase, _ = self.record(sample.metric, key[1], sample.time, before[1], sample.value)
                rates.append(Rate(sample.metric, key[1], before[0], sample.time, increase))
        return rates

    def record(self, metric: str, labels: tuple[tuple[str, str], ...], time: float, previous: float,
               current: float) -> tuple[float, EventKind]:
        """The increase from ``previous`` to ``current`` and its kind, keeping a glitch, wrap or reset as an event.

        For callers that keep the last value of each series themselves (the engine, on its Tracks).
        """
        entry = spec(metric)
        increase, event = counter_delta(previous, current, entry.wrap if entry else None,
                                        entry.glitch if entry else 0.0)
        if event:
            self.events.append(CounterEvent(metric, labels, time, event, previous, current))
            count_key = (metric, event)
            self.event_counts[count_key] = self.event_counts.get(count_key, 0) + 1
        return increase, event
