"""The monitor engine: poll sources, keep a bounded history, run detectors, remember source errors.

History is kept at two resolutions. Every series keeps its full-resolution points for the longest short
lookback (25 minutes by default: the watchdog-flap and link-flap windows). Metrics a long-horizon detector
needs (capacity trend: days) also keep one point per ``coarse_step_s``, so two weeks of 15-second polls cost
~4000 points per series rather than 80 000. Samples are evaluated in time order, one poll time at a time, so
a replayed recording sees the same alerts a live monitor would have.
"""

from __future__ import annotations

import logging
import time as _time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from tensorfabric.errors import TensorFabricError
from tensorfabric.samples import Alert, Sample
from tensorfabric.telemetry.detectors import Detector, Thresholds, load
from tensorfabric.telemetry.rates import CounterEvent, RateTracker
from tensorfabric.telemetry.sources import Source
from tensorfabric.telemetry.window import Labels, Point, Window

__all__ = ["Monitor", "PollResult", "SourceStatus"]

log = logging.getLogger(__name__)

History = dict[str, dict[Labels, list[Point]]]
Series = tuple[str, Labels]


@dataclass(slots=True)
class SourceStatus:
    """Health of one source as the exporter reports it."""

    up: bool = True
    errors_total: int = 0
    last_errors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PollResult:
    """What one poll produced: the samples read, the alerts active afterwards, and the errors met."""

    time: float
    samples: tuple[Sample, ...]
    alerts: tuple[Alert, ...]
    errors: dict[str, tuple[str, ...]] = field(default_factory=dict)


class Monitor:
    def __init__(self, sources: Sequence[Source] = (), *, detectors: Sequence[Detector] | None = None,
                 limits: Thresholds | None = None, clock: Callable[[], float] = _time.time,
                 coarse_step_s: float = 300.0, stale_s: float = 300.0) -> None:
        self.sources = list(sources)
        self.detectors = list(load() if detectors is None else detectors)
        self.limits = limits or Thresholds()
        self.clock = clock
        short = [d.lookback_s for d in self.detectors if not d.long_metrics] or [120.0]
        self.fine_s = max(short)
        self.coarse_step_s = coarse_step_s
        self.stale_s = stale_s
        self.long_s = max([d.lookback_s for d in self.detectors if d.long_metrics] or [0.0])
        self._long_metrics = {m for d in self.detectors for m in d.long_metrics}
        self._fine: History = defaultdict(dict)
        self._coarse: History = defaultdict(dict)
        self._latest: dict[tuple[str, Labels], Sample] = {}
        self._owner: dict[tuple[str, Labels], str] = {}
        self._keys: dict[tuple[str, tuple[tuple[str, str], ...]], Series] = {}
        self._keys_by_id: dict[tuple[str, int], tuple[Series, Mapping[str, str]]] = {}
        self._since: dict[tuple[str, str, str], float] = {}
        self._evaluated_until = float("-inf")
        self._coarse_changed = False
        self._long_alerts: dict[str, list[Alert]] = {}
        self._last_run: dict[str, float] = {}
        self._now = float("-inf")
        self._expired_at = float("-inf")
        self.rates = RateTracker()
        self.status: dict[str, SourceStatus] = {s.name: SourceStatus() for s in self.sources}
        self.alerts: tuple[Alert, ...] = ()

    @property
    def counter_events(self) -> list[CounterEvent]:
        """The most recent counter wraps and resets (bounded)."""
        return list(self.rates.events)

    def window(self) -> Window:
        """The short-horizon window the detectors saw last."""
        return Window.from_points(self._fine)

    def latest(self) -> list[Sample]:
        """The newest sample of every series seen so far."""
        return list(self._latest.values())

    def latest_by_series(self) -> dict[tuple[str, Labels], Sample]:
        """The newest sample of every series, keyed by its series identity (metric, sorted labels)."""
        return dict(self._latest)

    def poll(self) -> PollResult:
        """Read every source once; a failing source is recorded and the others carry on."""
        samples: list[tuple[Series, Sample]] = []
        errors: dict[str, tuple[str, ...]] = {}
        for source in self.sources:
            status = self.status.setdefault(source.name, SourceStatus())
            try:
                reading = source.read()
            except (TensorFabricError, OSError) as exc:
                status.up, status.last_errors = False, (str(exc),)
                status.errors_total += 1
                errors[source.name] = status.last_errors
                log.warning("source %s failed: %s", source.name, exc)
                continue
            kept, clashes = self._claim(source.name, reading.samples)
            problems = reading.errors + clashes
            status.up, status.last_errors = True, problems
            status.errors_total += len(problems)
            if problems:
                errors[source.name] = problems
                for message in problems[:5]:
                    log.warning("source %s: %s", source.name, message)
            samples += kept
        self._ingest_keyed(samples)
        plain = tuple(sample for _, sample in samples)
        return PollResult(self.clock() if not plain else max(s.time for s in plain), plain, self.alerts, errors)

    def _claim(self, name: str, samples: Iterable[Sample]) -> tuple[list[tuple[Series, Sample]], tuple[str, ...]]:
        """Keep the samples of series this source owns; a series is owned by the first source that reported it.

        Two sources reading the same counter (sysfs hw_counters and ``rdma statistic`` both do) would otherwise
        interleave two readings of one series and turn their difference into a bogus rate, wrap or reset.
        """
        kept: list[tuple[Series, Sample]] = []
        clashes: dict[str, str] = {}
        for sample in samples:
            key = self._series_key(sample)  # computed once per sample and passed along
            owner = self._owner.setdefault(key, name)
            if owner == name:
                kept.append((key, sample))
            else:
                clashes.setdefault(owner, sample.metric)
        return kept, tuple(f"series already read by {owner} (e.g. {metric}) dropped from this source"
                           for owner, metric in clashes.items())

    def _series_key(self, sample: Sample) -> Series:
        """``sample.series`` without re-sorting labels seen before (sources emit the same label sets each poll)."""
        # Sources hand out the same label dict for a series on every poll, so its identity finds the key without
        # copying the labels; the entry keeps that dict alive, so its id cannot be reused by another one.
        labels = sample.labels
        hit = self._keys_by_id.get((sample.metric, id(labels)))
        if hit is not None and hit[1] is labels:
            return hit[0]
        raw = (sample.metric, tuple(labels.items()))
        key = self._keys.get(raw)
        if key is None:
            if len(self._keys) > 500_000:  # label churn must not grow the caches without bound
                self._keys.clear()
                self._keys_by_id.clear()
            key = self._keys[raw] = sample.series
        if len(self._keys_by_id) < 500_000:
            self._keys_by_id[(sample.metric, id(labels))] = (key, labels)
        return key

    def ingest(self, samples: Iterable[Sample]) -> tuple[Alert, ...]:
        """Add samples (any order) and run the detectors once per new poll time."""
        return self._ingest_keyed([(self._series_key(s), s) for s in samples])

    def _ingest_keyed(self, samples: list[tuple[Series, Sample]]) -> tuple[Alert, ...]:
        by_time: dict[float, list[tuple[Series, Sample]]] = defaultdict(list)
        for item in samples:
            by_time[item[1].time].append(item)
        for t in sorted(by_time):
            group = by_time[t]
            self.rates.update_keyed(group, rates_wanted=False)
            for key, sample in group:
                self._add(key, sample)
            if t > self._evaluated_until:
                self._now = t
                self._trim(t)
                if t - self._expired_at >= self.stale_s / 5:  # a sweep of every series: not on every poll
                    self._expire()
                    self._expired_at = t
                self.evaluate()
                self._evaluated_until = t
        return self.alerts

    def _add(self, key: Series, sample: Sample) -> None:
        current = self._latest.get(key)
        if current is None or current.time <= sample.time:
            self._latest[key] = sample
        points = self._fine[sample.metric].setdefault(key[1], [])
        if not points or points[-1][0] < sample.time:
            points.append((sample.time, sample.value))
        if sample.metric in self._long_metrics:
            coarse = self._coarse[sample.metric].setdefault(key[1], [])
            if not coarse or sample.time - coarse[-1][0] >= self.coarse_step_s:
                coarse.append((sample.time, sample.value))
                self._coarse_changed = True

    def _expire(self) -> None:
        """Forget the latest value of series a source stopped reporting: absent is not zero, and not stale either.

        Per source, so a replayed recording (its own clock) and a live source do not expire each other.
        """
        newest: dict[str, float] = {}
        for sample in self._latest.values():
            if sample.time > newest.get(sample.source, float("-inf")):
                newest[sample.source] = sample.time
        gone = [key for key, sample in self._latest.items() if sample.time < newest[sample.source] - self.stale_s]
        for key in gone:
            del self._latest[key]

    def _trim(self, now: float) -> None:
        for history, keep_s in ((self._fine, self.fine_s), (self._coarse, self.long_s)):
            for series in history.values():
                for points in series.values():
                    cut = 0
                    while cut < len(points) - 2 and points[cut][0] < now - keep_s:
                        cut += 1
                    if cut:
                        del points[:cut]

    def evaluate(self) -> tuple[Alert, ...]:
        """Run every detector on the current history; alerts keep the time they were first seen."""
        short = Window.from_points(self._fine)
        found: list[Alert] = []
        for detector in self.detectors:
            last_run = self._last_run.get(detector.name)
            if last_run is not None and (
                    (detector.long_metrics and not self._coarse_changed) or self._now - last_run < detector.every_s):
                found += self._long_alerts.get(detector.name, [])  # nothing new for it since its last run
                continue
            self._last_run[detector.name] = self._now
            window = short if not detector.long_metrics else Window.from_points(
                {m: self._coarse.get(m, {}) for m in detector.long_metrics})
            try:
                alerts_of = detector.detect(window, self.limits)
            except (ArithmeticError, ValueError) as exc:  # a detector bug must not stop monitoring
                log.error("detector %s failed: %s", detector.name, exc)
                alerts_of = []
            self._long_alerts[detector.name] = alerts_of
            found += alerts_of
        self._coarse_changed = False
        since: dict[tuple[str, str, str], float] = {}
        alerts: list[Alert] = []
        for alert in found:
            key = (alert.detector, alert.subject, alert.severity)
            first = self._since.get(key, since.get(key, alert.since))
            since[key] = min(first, alert.since)
            alerts.append(Alert(alert.detector, alert.severity, alert.subject, since[key], alert.evidence,
                                alert.recommendation))
        self._since = since
        self.alerts = tuple(alerts)
        return self.alerts
