"""The poll's fast paths give what the plain ones give: samples, tracks and layouts, window shortcuts, BER ends."""

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.samples import Alert, Sample, new_sample
from tensorfabric.telemetry.detectors import Detector, Thresholds
from tensorfabric.telemetry.detectors.capacity import buckets, seasonal_slope
from tensorfabric.telemetry.detectors.link_health import _ber_ends
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.rates import counter_delta
from tensorfabric.telemetry.sources import Reading
from tensorfabric.telemetry.window import Labels, Point, Window, label_of, subject_of


def test_new_sample_is_the_same_frozen_sample() -> None:
    labels = {"host": "h0", "device": "eth0"}
    fast = new_sample(15.0, "roce_bytes_total", "counter", 3.0, labels, "s")
    assert fast == Sample(15.0, "roce_bytes_total", "counter", 3.0, labels, "s")
    assert fast.series == ("roce_bytes_total", (("device", "eth0"), ("host", "h0")))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.value = 4.0  # type: ignore[misc]


class _Scripted:
    """A source that returns a scripted list of samples per poll."""

    def __init__(self, name: str, polls: list[list[Sample]]) -> None:
        self.name = name
        self._polls = iter(polls)

    def read(self) -> Reading:
        return Reading(tuple(next(self._polls)))


def _sample(t: float, value: float, labels: dict[str, str], metric: str = "roce_discards_total") -> Sample:
    return Sample(t, metric, "counter", value, labels, "test")


def test_layout_reuse_keeps_clashes_new_series_and_fresh_label_dicts() -> None:
    a_labels = {"host": "h0", "device": "eth0", "port": "1"}
    b_labels = {"host": "h0", "device": "eth1", "port": "1"}
    first = _Scripted("first", [[_sample(15.0 * i, i, a_labels)] for i in range(1, 5)])
    # the second source reads the first one's series too (dropped, with a clash) plus one of its own; from the
    # third poll on it hands out equal but new label dicts, and on the fourth it adds a series
    second = _Scripted("second", [
        [_sample(15.0, 1, a_labels), _sample(15.0, 10, b_labels)],
        [_sample(30.0, 2, a_labels), _sample(30.0, 20, b_labels)],
        [_sample(45.0, 3, dict(a_labels)), _sample(45.0, 30, dict(b_labels))],
        [_sample(60.0, 4, dict(a_labels)), _sample(60.0, 40, dict(b_labels)),
         _sample(60.0, 1, {**b_labels, "priority": "3"})],
    ])
    monitor = Monitor([first, second])
    for poll in range(4):
        result = monitor.poll()
        assert [s.source for s in result.samples].count("test") == len(result.samples)
        assert len(result.samples) == (2 if poll < 3 else 3)
        assert result.errors["second"] == ("series already read by first (e.g. roce_discards_total) dropped "
                                           "from this source",)
    window = monitor.window()
    assert [p[1] for p in window.points("roce_discards_total", tuple(sorted(a_labels.items())))] == [1, 2, 3, 4]
    assert [p[1] for p in window.points("roce_discards_total", tuple(sorted(b_labels.items())))] == [10, 20, 30, 40]
    assert monitor.status["second"].errors_total == 4


def test_a_reading_with_several_times_is_evaluated_per_time() -> None:
    labels = {"host": "h0", "device": "eth0", "port": "1"}
    other = {"host": "h1", "device": "eth0", "port": "1"}
    source = _Scripted("s", [[_sample(15.0, 0, labels), _sample(16.0, 0, other)],
                             [_sample(30.0, 5, labels), _sample(31.0, 0, other)]])
    monitor = Monitor([source])
    monitor.poll()
    result = monitor.poll()
    assert result.time == 31.0
    assert [a.subject for a in result.alerts] == ["h0 eth0 1"]
    assert monitor.window().end == 31.0


def test_counter_resets_are_recorded_once_per_drop() -> None:
    labels = {"host": "h0", "device": "eth0", "port": "1"}
    monitor = Monitor()
    for t, value in ((15.0, 100.0), (30.0, 5.0), (30.0, 1.0), (45.0, 7.0), (60.0, 2.0)):
        monitor.ingest([_sample(t, value, labels)])
    assert [(e.time, e.kind, e.previous, e.current) for e in monitor.counter_events] == [
        (30.0, "reset", 100.0, 5.0), (60.0, "reset", 7.0, 2.0)]
    assert monitor.rates.event_counts == {("roce_discards_total", "reset"): 2}


points_st = st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 2.0**33)), max_size=8).map(
    lambda pts: [(float(i * 15), v) for i, (_, v) in enumerate(pts)])


def _window(series: dict[Labels, list[Point]]) -> Window:
    return Window.from_points({"roce_pfc_pause_frames_total": series})


@given(st.lists(points_st, min_size=1, max_size=4))
def test_last_and_recent_increases_match_the_per_series_queries(point_lists: list[list[Point]]) -> None:
    metric = "roce_pfc_pause_frames_total"
    series: dict[Labels, list[Point]] = {(("direction", "rx" if i % 2 else "tx"), ("host", f"h{i}")): pts
                                         for i, pts in enumerate(point_lists)}
    window = _window(series)
    fresh = [labels for labels in series if labels not in window.stale(metric)]  # stopped series are not evidence
    want = [(labels, *got) for labels in fresh if (got := window.increase(metric, labels)) is not None]
    assert window.last_increases(metric) == want
    assert window.last_increases(metric, direction="rx") == [w for w in want if ("direction", "rx") in w[0]]
    assert window.recent_increases(metric, 3) == [(labels, window.increases(metric, labels, 3)) for labels in fresh]


def test_window_end_given_by_the_engine_is_the_newest_point() -> None:
    window = _window({(("host", "a"),): [(0.0, 1.0), (15.0, 2.0)], (("host", "b"),): [(30.0, 1.0)]})
    assert window.end == 30.0
    assert Window.from_points({}, end=12.0).end == 12.0


def test_label_helpers_match_dict_lookups() -> None:
    labels = (("device", "eth0"), ("host", "h0"), ("priority", "3"))
    assert label_of(labels, "host") == "h0" and label_of(labels, "queue") is None
    assert subject_of(labels, "priority") == subject_of(dict(labels), "priority") == "h0 eth0 prio 3"


def _all_bers(corrected: list[Point], received: list[Point]) -> list[float]:
    """The corrected BER of every interval, the way link-health computed it before it looked only at the ends."""
    def step(pts: list[Point]) -> list[float]:
        return [counter_delta(v0, v1)[0] for (_, v0), (_, v1) in pairwise(pts)]

    return [c / r for c, r in zip(step(corrected), step(received), strict=False) if r > 0]


@given(points_st, points_st)
def test_ber_ends_match_the_full_list(corrected: list[Point], received: list[Point]) -> None:
    bers = _all_bers(corrected, received)
    assert _ber_ends(corrected, received) == ((bers[0], bers[-1], len(bers) >= 3) if bers else None)


def _all_pairs_slope(values: dict[int, float], period: int) -> tuple[float, float]:
    """seasonal_slope as it was first written: every pair of buckets, kept when a whole number of periods apart."""
    slopes = [(values[j] - values[i]) / (j - i) for i in values for j in values if j > i and (j - i) % period == 0]
    if not slopes:
        return 0.0, 0.0
    return statistics.median(slopes), sum(s > 0 for s in slopes) / len(slopes)


@given(st.dictionaries(st.integers(-50, 400), st.floats(0, 1), max_size=60), st.integers(1, 30))
def test_seasonal_slope_matches_all_pairs(values: dict[int, float], period: int) -> None:
    assert seasonal_slope(values, period) == _all_pairs_slope(values, period)


def test_only_the_series_capacity_reads_are_kept_downsampled() -> None:
    monitor = Monitor(limits=Thresholds(lossless_priorities=("3",)))
    for t in (0.0, 300.0, 600.0):
        monitor.ingest([Sample(t, "roce_pfc_paused_seconds_total", "counter", t / 10,
                               {"host": "h0", "direction": d, "priority": p}, "test")
                        for d in ("rx", "tx") for p in ("3", "4")])
    coarse = monitor._coarse["roce_pfc_paused_seconds_total"]
    assert list(coarse) == [(("direction", "rx"), ("host", "h0"), ("priority", "3"))]
    assert len(next(iter(coarse.values()))) == 3
    fine = list(monitor.window().series("roce_pfc_paused_seconds_total"))
    assert len(fine) == 4 and all(len(points) == 3 for _, points in fine)  # the short window keeps every series


@given(points_st)
def test_total_increase_is_the_sum_of_the_steps(points: list[Point]) -> None:
    window = _window({(("host", "a"),): points})
    steps = window.increases("roce_pfc_pause_frames_total", (("host", "a"),))
    assert window.total_increase("roce_pfc_pause_frames_total", (("host", "a"),)) == sum(s[2] for s in steps)


def _buckets_per_interval(window: Window, labels: Labels, step_s: float) -> dict[int, float]:
    """capacity.buckets as first written: one dict update per interval."""
    paused: dict[int, float] = defaultdict(float)
    elapsed: dict[int, float] = defaultdict(float)
    for t0, t1, inc in window.increases("roce_pfc_paused_seconds_total", labels):
        paused[int(t1 // step_s)] += inc
        elapsed[int(t1 // step_s)] += t1 - t0
    return {i: min(paused[i] / elapsed[i], 1.0) for i in paused if elapsed[i] > 0}


@given(st.lists(st.tuples(st.floats(0, 5000), st.floats(0, 100)), max_size=40), st.sampled_from([60.0, 600.0]))
def test_capacity_buckets_match_one_update_per_interval(raw: list[Point], step_s: float) -> None:
    labels: Labels = (("direction", "rx"), ("priority", "3"))
    window = Window.from_points({"roce_pfc_paused_seconds_total": {labels: sorted(raw)}})
    assert buckets(window, labels, step_s) == _buckets_per_interval(window, labels, step_s)


def test_trim_keeps_the_lookback_and_at_least_two_points() -> None:
    monitor = Monitor()
    labels = {"host": "h0", "device": "eth0", "port": "1"}
    for k in range(200):
        monitor.ingest([_sample(15.0 * k, k, labels)])
    times = [t for t, _ in monitor.window().points("roce_discards_total", tuple(sorted(labels.items())))]
    assert times[0] == 15.0 * 199 - monitor.fine_s and times[-1] == 15.0 * 199
    sparse = Monitor()
    for t in (0.0, 5000.0, 10000.0):  # polls further apart than the lookback: the last two stay
        sparse.ingest([_sample(t, t, labels)])
    assert [t for t, _ in sparse.window().points("roce_discards_total", tuple(sorted(labels.items())))] == [
        5000.0, 10000.0]


def test_coarse_history_is_downsampled_and_trimmed_to_the_long_lookback() -> None:
    seen: list[list[Point]] = []

    def long_reader(window: Window, limits: Thresholds) -> list[Alert]:
        seen.append(list(window.points("roce_discards_total", (("host", "h0"),))))
        return []

    monitor = Monitor(detectors=[Detector("long", 1000.0, long_reader, long_metrics=("roce_discards_total",))],
                      coarse_step_s=100.0)
    for k in range(60):
        monitor.ingest([Sample(60.0 * k, "roce_discards_total", "counter", float(k), {"host": "h0"}, "test")])
    # 60 s polls, a point kept every 120 s (>= 100 s apart); the detector last ran when the last one (3480 s)
    # was kept, and saw the points of the 1000 s before it
    assert seen[-1] == [(t, t / 60) for t in range(2520, 3481, 120)]
