"""Per-series bookkeeping of the engine: one Track per series, found from a Sample with one dict lookup.

A poll of 64 NICs hands the engine ~9000 samples. Each used to be looked up in five tables (series key,
owner, rate tracker, fine history, coarse history); a Track holds all of that for its series, so ingesting a
sample is one lookup plus appends. Sources hand out the same label dict for a series on every poll, so the
lookup is keyed by that dict's identity and the labels are only sorted the first time a dict is seen.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Callable, Mapping

from tensorfabric.samples import Sample

__all__ = ["Coarse", "History", "Point", "Series", "Track", "TrackIndex"]

Labels = tuple[tuple[str, str], ...]
Point = tuple[float, float]
Series = tuple[str, Labels]
History = dict[str, dict[Labels, list[Point]]]


class Coarse:
    """The downsampled history of one series, as two arrays of doubles rather than a list of (time, value).

    Two weeks at one point per 5 minutes is ~4000 points per series; as tuples in lists the garbage collector
    walks every one of them on each full collection (every few polls), as arrays it walks none. The
    long-horizon detectors run hourly and get the points as a list then (:meth:`points`).
    """

    __slots__ = ("times", "values")

    def __init__(self) -> None:
        self.times = array("d")
        self.values = array("d")

    def __len__(self) -> int:
        return len(self.times)

    def points(self) -> list[Point]:
        return list(zip(self.times, self.values, strict=True))


_CACHE_LIMIT = 500_000
"""Entries kept per lookup cache; label churn (fresh labels on every poll) must not grow them without bound."""


class Track:
    """One series: its key, the source that owns it, its history lists and its last counter reading.

    ``points`` and ``coarse`` are the very objects the engine's fine and coarse histories hold, so appending
    here is appending there. They are attached when the first sample is filed (``TrackIndex.attach``), not when the
    Track is made, so a history lists its series in the order their first samples were filed, as it always has
    (detectors report in that order).
    """

    __slots__ = ("coarse", "key", "owner", "points", "rate_t", "rate_v")

    def __init__(self, key: Series) -> None:
        self.key = key
        self.owner: str | None = None
        """The first source that reported the series (None while only ``Monitor.ingest`` has fed it)."""
        self.points: list[Point] | None = None
        self.coarse: Coarse | None = None
        """Only for metrics a long-horizon detector reads."""
        self.rate_t = float("-inf")
        """Time of the last counter reading (what RateTracker keeps per series, without a tuple per poll)."""
        self.rate_v: float | None = None


class TrackIndex:
    """Finds (or creates) the Track of a sample and attaches its history lists.

    ``keep_coarse(metric, labels)`` says whether a series also keeps a downsampled history.
    """

    def __init__(self, keep_coarse: Callable[[str, Labels], bool]) -> None:
        self.fine: History = defaultdict(dict)
        self.coarse: dict[str, dict[Labels, Coarse]] = defaultdict(dict)
        self._keep_coarse = keep_coarse
        self._tracks: dict[Series, Track] = {}
        self._keys: dict[tuple[str, Labels], Series] = {}
        self.by_id: dict[tuple[str, int], tuple[Track, Mapping[str, str]]] = {}
        """(metric, id(labels dict)) -> (track, that dict); the entry keeps the dict alive, so its id cannot be
        reused by another dict while the entry exists."""

    def track(self, sample: Sample) -> Track:
        labels = sample.labels
        hit = self.by_id.get((sample.metric, id(labels)))
        if hit is not None and hit[1] is labels:
            return hit[0]
        raw = (sample.metric, tuple(labels.items()))
        key = self._keys.get(raw)
        if key is None:
            if len(self._keys) > _CACHE_LIMIT:
                self._keys.clear()
                self.by_id.clear()
            key = self._keys[raw] = sample.series
        found = self._tracks.get(key)
        if found is None:
            found = self._tracks[key] = Track(key)
        if len(self.by_id) < _CACHE_LIMIT:
            self.by_id[(sample.metric, id(labels))] = (found, labels)
        return found

    def attach(self, track: Track) -> list[Point]:
        """Give ``track`` its history lists (on its first filed sample) and return the fine one."""
        metric, series = track.key
        if self._keep_coarse(metric, series):
            track.coarse = self.coarse[metric].setdefault(series, Coarse())
        points = track.points = self.fine[metric].setdefault(series, [])
        return points
