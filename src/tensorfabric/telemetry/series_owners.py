"""Which source owns each series: a series is owned by the first source that reported it.

Two sources reading the same counter (sysfs hw_counters and ``rdma statistic`` both do) would otherwise interleave
two readings of one series and turn their difference into a bogus rate, wrap or reset. What one source's reading
resolved to is kept as a :class:`Layout` and reused while its readings keep the same shape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

from tensorfabric.samples import Sample
from tensorfabric.telemetry.intake import MAX_ERRORS, bad_names
from tensorfabric.telemetry.metrics import GENERIC, METRICS
from tensorfabric.telemetry.tracks import Track, TrackIndex

__all__ = ["Groups", "Layout", "SeriesOwners"]

_METRIC, _LABELS, _TIME = attrgetter("metric"), attrgetter("labels"), attrgetter("time")

Groups = dict[float, tuple[list[Track], list[Sample]]]
"""Samples to ingest by poll time, each with its Track at the same index (parallel lists rather than one
(track, sample) tuple per sample: ~9000 fewer allocations per poll for the garbage collector to count)."""


@dataclass(frozen=True, slots=True)
class Layout:
    """What one source's reading resolved to: the Track of each sample (None: owned by another source)."""

    metrics: list[str]
    labels: list[Mapping[str, str]]
    tracks: list[Track | None]
    clashes: tuple[str, ...]
    all_ours: bool
    invalid: tuple[str, ...] = ()
    """Samples refused for a metric or label name Prometheus cannot carry (``__name__``, ``bad-label``)."""
    recognised: int = 0
    """Samples with a canonical (catalogue, non-generic) name."""


class SeriesOwners:
    """The owner of every series in ``tracks``, and each source's last :class:`Layout`."""

    def __init__(self, tracks: TrackIndex) -> None:
        self._tracks = tracks
        self.layouts: dict[str, Layout] = {}

    def claim(self, name: str, samples: Sequence[Sample], by_time: Groups) -> tuple[list[Sample], Layout]:
        """Keep the samples of series source ``name`` owns, each also filed into ``by_time`` with its Track,
        ready for ingestion."""
        # A source reports the same series in the same order on every poll; when the metric names and label
        # sets (compared in C, by identity first) match its last reading, so do the Tracks and the verdicts,
        # because a series never changes owner.
        metrics, labels = list(map(_METRIC, samples)), list(map(_LABELS, samples))
        layout = self.layouts.get(name)
        if layout is None or layout.metrics != metrics or layout.labels != labels:
            layout = self.layouts[name] = self._resolve(name, samples, metrics, labels)
        times = set(map(_TIME, samples))
        if len(times) == 1 and layout.all_ours:  # the common case: one reading, one time, all ours
            (t,) = times
            group = by_time.get(t)
            if group is None:
                group = by_time[t] = ([], [])
            group[0].extend(layout.tracks)  # type: ignore[arg-type]  # all_ours: no None in it
            group[1].extend(samples)
            return list(samples), layout
        kept: list[Sample] = []
        for track, sample in zip(layout.tracks, samples, strict=True):
            if track is not None:
                kept.append(sample)
                group = by_time.get(sample.time)
                if group is None:
                    group = by_time[sample.time] = ([], [])
                group[0].append(track)
                group[1].append(sample)
        return kept, layout

    def _resolve(self, name: str, samples: Sequence[Sample], metrics: list[str],
                 labels: list[Mapping[str, str]]) -> Layout:
        tracks: list[Track | None] = []
        clashes: dict[str, str] = {}
        invalid: list[str] = []
        recognised = 0
        for sample in samples:
            problem = bad_names(sample)
            if problem:
                tracks.append(None)
                if len(invalid) < MAX_ERRORS:
                    invalid.append(problem)
                continue
            if sample.metric != GENERIC and sample.metric in METRICS:
                recognised += 1
            track = self._tracks.track(sample)
            owner = track.owner
            if owner is None:
                owner = track.owner = name
            if owner == name:
                tracks.append(track)
            else:
                tracks.append(None)
                clashes.setdefault(owner, sample.metric)
        return Layout(metrics, labels, tracks, tuple(
            f"series already read by {owner} (e.g. {metric}) dropped from this source"
            for owner, metric in clashes.items()), not clashes and not invalid, tuple(invalid), recognised)
