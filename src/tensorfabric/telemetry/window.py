"""A window of samples as detectors see it: per-series points, increases and paused fractions.

Detectors are pure functions of a Window. Building one groups samples by series once; the queries below are
what every detector needs (the latest increase of a counter, over how many intervals, the last gauge value).

Only fresh series are evidence. A series whose newest point lags the window's end by more than
:data:`STALE_INTERVALS` of its own last interval has stopped (its source ended or lost it): :meth:`Window.series`
leaves it out, so an alert resting on it clears instead of holding its last verdict for as long as the engine keeps
the series' last two points. The lag is measured against the series' own interval, so a slow source and a
fast one, or a replay on its own clock, are each judged by their own pace.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from functools import lru_cache
from itertools import pairwise
from operator import itemgetter, le, sub
from typing import Any

from tensorfabric.samples import Sample
from tensorfabric.telemetry.metrics import spec
from tensorfabric.telemetry.rates import counter_delta

__all__ = ["STALE_INTERVALS", "Labels", "Window", "label_of", "subject_of"]

Labels = tuple[tuple[str, str], ...]
Point = tuple[float, float]

# Label helpers are pure functions of a label tuple, and the engine hands detectors the same tuples on every
# poll, so their results are cached across polls (bounded: label churn must not grow them without bound).
_CACHE = 1 << 16
_LABEL_SETS: dict[Labels, frozenset[tuple[str, str]]] = {}
_VALUE = itemgetter(1)

STALE_INTERVALS = 2.5
"""A series that missed this many of its own intervals (measured from its last one) is no longer evidence: two
late polls are tolerated, a third means the source stopped."""


def _fresh(points: list[Point], end: float) -> bool:
    """Whether a series (time-sorted points) still reports at ``end``; one point says nothing about its pace."""
    if len(points) < 2:
        return True
    last = points[-1][0]
    return end - last <= STALE_INTERVALS * (last - points[-2][0])


@lru_cache(maxsize=_CACHE)
def label_of(labels: Labels, name: str) -> str | None:
    """``dict(labels).get(name)``, cached."""
    for key, value in reversed(labels):  # the last one wins, as in dict(labels)
        if key == name:
            return value
    return None


def _wrap_of(metric: str) -> float | None:
    """Where a counter of ``metric`` wraps (None: 64-bit or unknown), for :func:`counter_delta`."""
    entry = spec(metric)
    return entry.wrap if entry else None


def subject_of(labels: Mapping[str, str] | Labels, *keys: str) -> str:
    """A readable subject such as ``leaf1 Ethernet4 prio 3`` from the labels that are present."""
    if isinstance(labels, tuple):
        return _subject(labels, keys)
    return _subject_uncached(labels, keys)


@lru_cache(maxsize=_CACHE)
def _subject(labels: Labels, keys: tuple[str, ...]) -> str:
    return _subject_uncached(labels, keys)


def _subject_uncached(labels: Mapping[str, str] | Labels, keys: tuple[str, ...]) -> str:
    found = dict(labels)
    parts = [found.get("host", ""), found.get("device", "") if found.get("device") != found.get("host") else "",
             found.get("port", "")]
    parts = [p for p in parts if p]
    for key in keys:
        if found.get(key):
            parts.append(f"{'prio' if key == 'priority' else key} {found[key]}")
    return " ".join(parts) or "fabric"


class Window:
    """Samples grouped by series, each series sorted by time."""

    def __init__(self, samples: Iterable[Sample] = ()) -> None:
        grouped: dict[str, dict[Labels, list[Point]]] = defaultdict(lambda: defaultdict(list))
        for s in samples:
            grouped[s.metric][s.series[1]].append((s.time, s.value))
        for series in grouped.values():
            for points in series.values():
                points.sort()
        self._data: Mapping[str, Mapping[Labels, list[Point]]] = grouped
        self._memo: dict[tuple[str, Labels, int | None], list[tuple[float, float, float]]] = {}
        self.memo: dict[tuple[object, ...], Any] = {}
        """Scratch space for detectors sharing derived values within one evaluation."""

    @classmethod
    def from_points(cls, data: Mapping[str, Mapping[Labels, list[Point]]], *, end: float | None = None) -> Window:
        """A window over already grouped, time-sorted points (the engine's history).

        ``end`` is :attr:`end` when the caller already knows it (the engine tracks the newest point it filed),
        saving a scan of every series.
        """
        window = cls(())
        window._data = data
        if end is not None:
            window.memo["end",] = end
        return window

    @property
    def end(self) -> float:
        """Time of the newest point in the window (0 when empty)."""
        if ("end",) not in self.memo:
            self.memo["end",] = max((pts[-1][0] for series in self._data.values() for pts in series.values() if pts),
                                    default=0.0)
        return float(self.memo["end",])

    def metrics(self) -> set[str]:
        return set(self._data)

    def series(self, metric: str, **match: str) -> Iterator[tuple[Labels, list[Point]]]:
        """Every fresh series of ``metric`` whose labels include ``match`` (stale ones are not evidence)."""
        end = self.end
        if not match:
            for labels, points in self._data.get(metric, {}).items():
                if _fresh(points, end):
                    yield labels, points
            return
        wanted = set(match.items())
        sets = _LABEL_SETS
        for labels, points in self._data.get(metric, {}).items():
            have = sets.get(labels)
            if have is None:  # detectors query the same series many times per evaluation, and every poll
                if len(sets) > _CACHE:
                    sets.clear()
                have = sets[labels] = frozenset(labels)
            if wanted <= have and _fresh(points, end):
                yield labels, points

    def stale(self, metric: str) -> list[Labels]:
        """The series of ``metric`` that stopped reporting (left out of :meth:`series`)."""
        end = self.end
        return [labels for labels, points in self._data.get(metric, {}).items() if not _fresh(points, end)]

    def poll_interval(self) -> float:
        """Seconds between the window's last two poll times (0 with fewer than two): the pace the newest evidence
        arrived at, which an alert's age is judged against."""
        if ("poll_interval",) not in self.memo:
            end = self.end
            before = max((pts[-2][0] for series in self._data.values() for pts in series.values()
                          if len(pts) >= 2 and pts[-1][0] == end), default=end)
            self.memo["poll_interval",] = end - before
        return float(self.memo["poll_interval",])

    def recent_increases(self, metric: str, last: int, **match: str) -> list[tuple[Labels, list[tuple[float, float,
                                                                                                  float]]]]:
        """(labels, :meth:`increases` of its ``last`` intervals) for every matching series, computed once per
        window."""
        key = ("recent_increases", metric, last, *sorted(match.items()))
        cached: list[tuple[Labels, list[tuple[float, float, float]]]] | None = self.memo.get(key)
        if cached is None:
            cached = [(labels, self.increases(metric, labels, last)) for labels, _ in self.series(metric, **match)]
            self.memo[key] = cached
        return cached

    def last_increases(self, metric: str, **match: str) -> list[tuple[Labels, float, float]]:
        """(labels, increase, seconds) over the last interval of every matching series with two points or more:
        :meth:`increase` for a whole metric at once, computed once per window."""
        key = ("last_increases", metric, *sorted(match.items()))
        cached: list[tuple[Labels, float, float]] | None = self.memo.get(key)
        if cached is None:
            cached = []
            wrap = _wrap_of(metric)
            for labels, points in self.series(metric, **match):
                if len(points) < 2:
                    continue
                (t0, v0), (t1, v1) = points[-2], points[-1]
                cached.append((labels, v1 - v0 if v1 >= v0 else counter_delta(v0, v1, wrap)[0], t1 - t0))
            self.memo[key] = cached
        return cached

    def points(self, metric: str, labels: Labels) -> list[Point]:
        return self._data.get(metric, {}).get(labels, [])

    def increases(self, metric: str, labels: Labels, last: int | None = None) -> list[tuple[float, float, float]]:
        """(start, end, increase) per interval of a counter series (only the ``last`` ones when given), wraps and
        resets handled."""
        key = (metric, labels, last)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        points = self.points(metric, labels)
        if last is not None:
            points = points[-(last + 1):]
        wrap = _wrap_of(metric)
        # counter_delta only where the counter went down: the common case stays in the comprehension
        steps = [(t0, t1, v1 - v0 if v1 >= v0 else counter_delta(v0, v1, wrap)[0])
                 for (t0, v0), (t1, v1) in pairwise(points)]
        self._memo[key] = steps
        return steps

    def total_increase(self, metric: str, labels: Labels) -> float:
        """``sum`` of every :meth:`increases` step of a counter series (in the same order, so the same float),
        without building the list of steps."""
        points = self.points(metric, labels)
        values = list(map(_VALUE, points))
        if all(map(le, values, values[1:])):  # no wrap or reset: every step is a plain difference (loops in C)
            total: float = sum(map(sub, values[1:], values[:-1]))  # 0 (an int) when empty, as sum() of the steps
            return total
        wrap = _wrap_of(metric)
        return sum(v1 - v0 if v1 >= v0 else counter_delta(v0, v1, wrap)[0] for (_, v0), (_, v1) in pairwise(points))

    def increase(self, metric: str, labels: Labels, intervals: int = 1) -> tuple[float, float] | None:
        """(increase, seconds) over the last ``intervals`` intervals; None with fewer than two points."""
        if intervals == 1:  # the hot path of every detector: no intermediate lists
            points = self.points(metric, labels)
            if len(points) < 2:
                return None
            (t0, v0), (t1, v1) = points[-2], points[-1]
            if v1 >= v0:
                return v1 - v0, t1 - t0
            return counter_delta(v0, v1, _wrap_of(metric))[0], t1 - t0
        steps = self.increases(metric, labels, intervals)
        if not steps:
            return None
        return sum(s[2] for s in steps), steps[-1][1] - steps[0][0]

    def rate(self, metric: str, labels: Labels, intervals: int = 1) -> float | None:
        """Per-second rate over the last intervals; for ``roce_pfc_paused_seconds_total`` the paused fraction."""
        got = self.increase(metric, labels, intervals)
        if got is None or got[1] <= 0:
            return None
        return got[0] / got[1]

    def last(self, metric: str, labels: Labels) -> float | None:
        points = self.points(metric, labels)
        return points[-1][1] if points else None

    def with_labels(self, metric: str, base: Labels, **changes: str) -> Labels | None:
        """The fresh series of ``metric`` whose labels equal ``base`` with ``changes`` applied (or None)."""
        wanted = {**dict(base), **changes}
        key = tuple(sorted(wanted.items()))
        points = self._data.get(metric, {}).get(key)
        return key if points is not None and _fresh(points, self.end) else None
