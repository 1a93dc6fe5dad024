"""The monitor engine: poll sources, keep a bounded history, run detectors, remember source errors.

A poll is single-flight: a caller that arrives while another thread's poll runs waits for that poll and gets its
result (concurrent scrapes share one collection instead of queueing for one each). With a source deadline every
source is read in its own thread, all under one deadline; a source that does not answer in time keeps its last
values, which are served marked stale (``SourceStatus.stale_s``) until ``stale_s`` has passed, and is read in
the background (not waited on) until one of its reads is quick again: a dead source costs one poll its deadline.
The reading itself is :func:`telemetry.intake.read_all`, the sharing of a poll :mod:`telemetry.single_flight`, and
which source owns a series (the first that reported it) :mod:`telemetry.series_owners`; this module files what
they bring.

History is kept at two resolutions. Every series keeps its full-resolution points for the longest short
lookback (25 minutes by default: the watchdog-flap and link-flap windows). The series a long-horizon detector
reads (capacity trend: RX pause time on lossless priorities, over days) also keep one point per
``coarse_step_s``, so two weeks of 15-second polls cost ~4000 points per series rather than 80 000, stored as
arrays the garbage collector does not walk. Samples are evaluated in time order, one poll time at a time, so
a replayed recording sees the same alerts a live monitor would have.
"""

from __future__ import annotations

import logging
import threading
import time as _time
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from tensorfabric.samples import Alert, Sample
from tensorfabric.telemetry.clock import PollClock
from tensorfabric.telemetry.detectors import Detector, Thresholds, load
from tensorfabric.telemetry.detectors.base import aged
from tensorfabric.telemetry.intake import Answer, Reader, bounded, checked, read_all
from tensorfabric.telemetry.metrics import GENERIC
from tensorfabric.telemetry.rates import CounterEvent, RateTracker
from tensorfabric.telemetry.series_owners import Groups, SeriesOwners
from tensorfabric.telemetry.single_flight import SingleFlight
from tensorfabric.telemetry.sources import Reading, Source
from tensorfabric.telemetry.tracks import Track, TrackIndex
from tensorfabric.telemetry.window import Labels, Window

__all__ = ["Monitor", "PollResult", "SourceStatus"]

log = logging.getLogger(__name__)

@dataclass(slots=True)
class SourceStatus:
    """Health of one source as the exporter reports it."""

    up: bool = True
    errors_total: int = 0
    last_errors: tuple[str, ...] = ()
    recognised: int = -1
    """Canonical samples in the last reading (-1: not read yet); 0 with samples means an unknown driver."""
    read_at: float | None = None
    """``time.monotonic()`` when the source last answered with a reading (None: never)."""
    stale_s: float | None = None
    """Age of the values served for this source when the last poll began: 0.0 when that poll read it, more while
    its last good values stand in for a source that did not answer or failed (None: never read)."""


@dataclass(frozen=True, slots=True)
class PollResult:
    """What one poll produced: the samples read, the alerts active afterwards, and the errors met."""

    time: float
    samples: tuple[Sample, ...]
    alerts: tuple[Alert, ...]
    errors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    stale: dict[str, float] = field(default_factory=dict)
    """Sources this poll got no reading from whose earlier values are still served, with their age in seconds."""


class Monitor:
    def __init__(self, sources: Sequence[Source] = (), *, detectors: Sequence[Detector] | None = None,
                 limits: Thresholds | None = None, clock: Callable[[], float] = _time.time,
                 coarse_step_s: float = 300.0, stale_s: float = 300.0,
                 source_deadline_s: float | None = None) -> None:
        self.sources = list(sources)
        self.source_deadline_s = source_deadline_s
        """With a deadline every source is read in its own thread and a poll takes at most about this long: its
        sources are waited on for the deadline less the time filing their readings takes; a source still busy
        from an earlier poll is neither restarted nor waited on, one whose last read outlived the deadline is
        read without being waited on until a read of it is quick again, and a source with no answer has its last
        values served stale (None: read one after another in the polling thread)."""
        self.lock = threading.RLock()
        """Held while a poll files its readings and while a scrape renders; never while sources are read."""
        self._flights: SingleFlight[PollResult] = SingleFlight()
        self._silent: set[str] = set()
        self._forgotten: set[str] = set()
        self._filing_s = 0.0
        """What filing a poll's readings took lately; kept back from the next poll's wait on its sources (at least
        ``intake._RESERVE`` of the deadline, at most half of it)."""
        self.collected_at: float | None = None
        """``time.monotonic()`` when the last poll finished (what a scrape's "fresh enough" is measured from)."""
        self.generation = 0
        """Bumped whenever what a scrape would show may have changed (a poll, ingest or evaluation)."""
        self._readers: dict[str, Reader] = {}
        self._unknown_warned: set[str] = set()
        self.listeners: list[Callable[[PollResult], None]] = []
        """Called with every poll's result, whoever polled (the CLI loop or a scrape): --record, poll counts."""
        self.polled_at: float | None = None
        """``time.monotonic()`` when the last poll started (the exporter's collect-on-scrape cache age)."""
        self.detectors = list(load() if detectors is None else detectors)
        self.limits = limits or Thresholds()
        self.clock = clock
        short = [d.lookback_s for d in self.detectors if not d.long_metrics] or [120.0]
        self.fine_s = max(short)
        self.coarse_step_s = coarse_step_s
        self.stale_s = stale_s
        self.long_s = max([d.lookback_s for d in self.detectors if d.long_metrics] or [0.0])
        self._long_readers = [(d.long_metrics, d.long_series) for d in self.detectors if d.long_metrics]
        self._tracks = TrackIndex(self._keeps_coarse)
        self._fine = self._tracks.fine
        self._coarse = self._tracks.coarse
        self._latest: dict[tuple[str, Labels], Sample] = {}
        self._since: dict[tuple[str, str, str], float] = {}
        self._evaluated_until = float("-inf")
        self._coarse_changed = False
        self._long_alerts: dict[str, list[Alert]] = {}
        self._last_run: dict[str, float] = {}
        self._now = float("-inf")
        self._newest: float | None = None
        """Time of the newest point in the fine history, which is the short window's ``end``."""
        self._owners = SeriesOwners(self._tracks)
        self._expired_at = float("-inf")
        self.rates = RateTracker()
        self.status: dict[str, SourceStatus] = {s.name: SourceStatus() for s in self.sources}
        self.alerts: tuple[Alert, ...] = ()
        self._fed_at: float | None = None
        """When a poll last brought samples (monotonic): the standing alerts' evidence is that old."""

    def _keeps_coarse(self, metric: str, labels: Labels) -> bool:
        """Whether some long-horizon detector reads this series (asked once per series; the detectors and
        limits the monitor was made with decide, like the horizons above)."""
        return any(metric in metrics and (reads is None or reads(labels, self.limits))
                   for metrics, reads in self._long_readers)

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
        """Read every source once; a failing source is recorded and the others carry on.

        Called while another thread's poll runs, it waits for that poll and returns its result (listeners are
        called once per poll). With a :class:`PollClock` (what ``tensorfabric monitor`` gives the sources and
        the monitor) every live source stamps this poll with one time, so the detectors run once per poll, not
        once per source."""
        return self._flights.run(self._poll_on_one_clock, reentrant=self._poll)

    def _poll_on_one_clock(self) -> PollResult:
        if isinstance(self.clock, PollClock):
            with self.clock.frozen():
                return self._poll()
        return self._poll()

    def _poll(self) -> PollResult:
        self.polled_at = started = _time.monotonic()
        # without the lock: scrapes render the last collection meanwhile
        answers = read_all(self.sources, self._readers, started, self.source_deadline_s, self._filing_s)
        with self.lock:
            filing = _time.monotonic()
            result = self._file(answers, started)
            self.collected_at = _time.monotonic()
            took = self.collected_at - filing
            self._filing_s = max(took, 0.8 * self._filing_s + 0.2 * took)  # up at once, down slowly
            self.generation += 1
            for listener in self.listeners:
                listener(result)
        return result

    def _file(self, answers: list[Answer], started: float) -> PollResult:
        by_time: Groups = {}
        samples: list[Sample] = []
        errors: dict[str, tuple[str, ...]] = {}
        stale: dict[str, float] = {}
        for answer in answers:
            source, outcome = answer.source, answer.answer
            status = self.status.setdefault(source.name, SourceStatus())
            if outcome is None:
                self._stale(source.name, status, started, stale)
                self._no_answer(source.name, status, answer.at, errors)
                continue
            if source.name in self._silent:
                self._silent.discard(source.name)
                if isinstance(outcome, Reading):
                    log.warning("source %s answers again", source.name)
            if not isinstance(outcome, Reading):
                self._stale(source.name, status, started, stale)
                status.up, status.last_errors = False, (str(outcome),)
                status.errors_total += 1
                errors[source.name] = status.last_errors
                log.warning("source %s failed: %s", source.name, outcome)
                continue
            self._forgotten.discard(source.name)
            status.read_at = answer.at
            status.stale_s = max(0.0, started - answer.at) if answer.at is not None else 0.0
            read, refused = checked(outcome.samples)
            kept, layout = self._owners.claim(source.name, read, by_time)
            problems = bounded(outcome.errors + refused + layout.invalid)
            # up: the last poll read cleanly. Clashes are configuration (two sources on one series), not failures.
            status.up, status.last_errors = not problems, problems + layout.clashes
            if read:  # a source that ended (a replay read to its end) keeps what it recognised: ended, not unknown
                status.recognised = layout.recognised
            status.errors_total += len(problems) + len(layout.clashes)
            if problems or layout.clashes:
                errors[source.name] = status.last_errors
                for message in status.last_errors[:5]:
                    log.warning("source %s: %s", source.name, message)
            if read and not layout.recognised and source.name not in self._unknown_warned:
                self._unknown_warned.add(source.name)
                log.warning("source %s: none of its %d counters has a canonical name (driver not known); they are "
                            "exported as %s only", source.name, len(read), GENERIC)
            samples += kept
        if by_time:
            self._ingest_grouped(by_time)
            self._fed_at = _time.monotonic()
        elif self._fed_at is not None:
            # nothing new to run the detectors on: the standing alerts age, and resolve once their evidence is stale
            self.alerts = aged(self.alerts, _time.monotonic() - self._fed_at)
        return PollResult(self.clock() if not samples else max(by_time), tuple(samples), self.alerts, errors, stale)

    def _stale(self, name: str, status: SourceStatus, started: float, stale: dict[str, float]) -> None:
        """A source this poll got no reading from: its last values stand, aged; after ``stale_s`` they go."""
        if status.read_at is None:
            return
        status.stale_s = max(0.0, started - status.read_at)
        if status.stale_s <= self.stale_s:
            stale[name] = status.stale_s
            return
        if name not in self._forgotten:  # absent, not frozen forever at its last value
            self._forgotten.add(name)
            layout = self._owners.layouts.get(name)
            for track in layout.tracks if layout else ():
                if track is not None:
                    self._latest.pop(track.key, None)

    def _no_answer(self, name: str, status: SourceStatus, busy_since: float | None,
                   errors: dict[str, tuple[str, ...]]) -> None:
        reading_for = "" if busy_since is None else f"; its read has run {_time.monotonic() - busy_since:.1f} s"
        served = ("" if status.stale_s is None or name in self._forgotten
                  else f"; its values of {status.stale_s:.0f} s ago are served, marked stale")
        status.up = False
        status.last_errors = (f"no answer within the {self.source_deadline_s:g} s source deadline"
                              f"{reading_for}{served}",)
        status.errors_total += 1
        errors[name] = status.last_errors
        if name not in self._silent:  # once when it goes quiet, not once per scrape
            self._silent.add(name)
            log.warning("source %s: %s", name, status.last_errors[0])

    def ingest(self, samples: Iterable[Sample]) -> tuple[Alert, ...]:
        """Add samples (any order) and run the detectors once per new poll time."""
        with self.lock:
            by_time: Groups = defaultdict(lambda: ([], []))
            for sample in samples:
                group = by_time[sample.time]
                group[0].append(self._tracks.track(sample))
                group[1].append(sample)
            self.generation += 1
            return self._ingest_grouped(by_time)

    def _ingest_grouped(self, by_time: Groups) -> tuple[Alert, ...]:
        for t in sorted(by_time):
            self._add(*by_time[t])
            if t > self._evaluated_until:
                self._now = t
                self._trim(t)
                if t - self._expired_at >= self.stale_s / 5:  # a sweep of every series: not on every poll
                    self._expire()
                    self._expired_at = t
                self._evaluate()
                self._evaluated_until = t
        return self.alerts

    def _add(self, tracks: list[Track], samples: list[Sample]) -> None:
        """File one poll time's samples: latest value, fine and coarse history, counter wraps and resets."""
        latest = self._latest
        coarse_step_s = self.coarse_step_s
        if samples and (self._newest is None or samples[0].time > self._newest):
            self._newest = samples[0].time  # a group is one poll time, and every series keeps its last point
        for track, sample in zip(tracks, samples, strict=True):
            t, value = sample.time, sample.value
            if sample.kind == "counter" and t > track.rate_t:  # RateTracker.update's bookkeeping, per Track
                previous = track.rate_v
                if previous is not None and value < previous and self.rates.record(
                        sample.metric, track.key[1], t, previous, value)[1] == "glitch":
                    # keep the previous value: neither the detectors nor Prometheus (which reads any decrease
                    # as a reset) may see a read glitch
                    value = previous
                    sample = replace(sample, value=previous)
                track.rate_t, track.rate_v = t, value
            key = track.key
            current = latest.get(key)
            if current is None or current.time <= t:
                latest[key] = sample
            points = track.points
            if points is None:
                points = self._tracks.attach(track)
            if not points or points[-1][0] < t:
                points.append((t, value))
            coarse = track.coarse
            if coarse is not None and (not coarse.times or t - coarse.times[-1] >= coarse_step_s):
                coarse.times.append(t)
                coarse.values.append(value)
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
        horizon = now - self.fine_s
        oldest_kept = (horizon,)  # sorts before every point at the horizon and after every older one
        for series in self._fine.values():
            for points in series.values():
                if len(points) > 2 and points[0][0] < horizon:
                    if points[1][0] >= horizon:  # the steady state: one poll in, one poll out
                        del points[0]
                    else:  # points are sorted by time; always keep the last two
                        del points[:min(bisect_left(points, oldest_kept), len(points) - 2)]
        horizon = now - self.long_s
        for downsampled in self._coarse.values():
            for coarse in downsampled.values():
                times = coarse.times
                if len(times) > 2 and times[0] < horizon:
                    cut = min(bisect_left(times, horizon), len(times) - 2)
                    del times[:cut]
                    del coarse.values[:cut]

    def evaluate(self) -> tuple[Alert, ...]:
        """Run every detector on the current history; alerts keep the time they were first seen."""
        with self.lock:
            self.generation += 1
            return self._evaluate()

    def _evaluate(self) -> tuple[Alert, ...]:
        short = Window.from_points(self._fine, end=0.0 if self._newest is None else self._newest)
        found: list[Alert] = []
        for detector in self.detectors:
            last_run = self._last_run.get(detector.name)
            if last_run is not None and (
                    (detector.long_metrics and not self._coarse_changed) or self._now - last_run < detector.every_s):
                found += self._long_alerts.get(detector.name, [])  # nothing new for it since its last run
                continue
            self._last_run[detector.name] = self._now
            window = short if not detector.long_metrics else Window.from_points(
                {m: {labels: c.points() for labels, c in self._coarse.get(m, {}).items()}
                 for m in detector.long_metrics})
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
            alerts.append(alert if since[key] == alert.since else Alert(
                alert.detector, alert.severity, alert.subject, since[key], alert.evidence, alert.recommendation))
        self._since = since
        self.alerts = tuple(alerts)
        return self.alerts

