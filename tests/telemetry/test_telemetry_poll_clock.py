"""One poll, one time: live sources stamped by a PollClock make the detectors run once per poll."""

from __future__ import annotations

import itertools
from pathlib import Path

from tensorfabric.samples import Alert
from tensorfabric.telemetry.clock import PollClock
from tensorfabric.telemetry.detectors import Detector, Thresholds
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.sources import SourceContext, open_source
from tensorfabric.telemetry.window import Window

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "telemetry" / "ethtool_mlx5.txt"


def _monitor(clock: object, nics: int) -> tuple[Monitor, list[float]]:
    runs: list[float] = []

    def detect(window: Window, limits: Thresholds) -> list[Alert]:
        runs.append(window.end)
        return []

    ctx = SourceContext(host="h0", clock=clock)  # type: ignore[arg-type]
    sources = [open_source(f"ethtool-file:{FIXTURE}@eth{i}", ctx) for i in range(nics)]
    monitor = Monitor(sources, detectors=[Detector("count", 60.0, detect)], clock=clock)  # type: ignore[arg-type]
    return monitor, runs


def test_every_source_of_a_poll_shares_the_poll_start_and_detectors_run_once() -> None:
    ticks = itertools.count(1000.0, 0.01)  # real time moves on while the sources are read
    clock = PollClock(lambda: next(ticks))
    monitor, runs = _monitor(clock, nics=8)
    for _ in range(3):
        result = monitor.poll()
        assert len({s.time for s in result.samples}) == 1
        assert result.time == result.samples[0].time
    assert len(runs) == 3
    assert runs == sorted(set(runs))


def test_outside_a_poll_the_clock_is_live_and_freezing_nests() -> None:
    ticks = itertools.count(0.0, 1.0)
    clock = PollClock(lambda: next(ticks))
    assert clock() < clock()
    with clock.frozen() as outer:
        with clock.frozen() as inner:
            assert inner == outer == clock()
    assert clock() > outer


def test_a_plain_advancing_clock_costs_one_detector_run_per_source() -> None:
    # Why the CLI hands a PollClock to the sources: without it each source is its own poll time.
    ticks = itertools.count(1000.0, 0.01)
    monitor, runs = _monitor(lambda: next(ticks), nics=8)
    monitor.poll()
    assert len(runs) == 8
