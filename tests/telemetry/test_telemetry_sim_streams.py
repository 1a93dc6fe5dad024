"""The simulator's counter streams through the whole monitor (engine, history, all detectors), poll by poll."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tensorfabric.samples import Alert, Sample
from tensorfabric.telemetry.detectors import Thresholds
from tensorfabric.telemetry.engine import Monitor

sim = pytest.importorskip("tensorfabric.sim")


def _replay(samples: list[Sample], limits: Thresholds) -> tuple[dict[str, int], list[Alert], int]:
    """First poll index at which each detector fired, the final alerts, and the number of polls."""
    monitor = Monitor(limits=limits)
    times = sorted({s.time for s in samples})
    by_time: dict[float, list[Sample]] = {t: [] for t in times}
    for s in samples:
        by_time[s.time].append(s)
    first: dict[str, int] = {}
    for index, t in enumerate(times):
        for alert in monitor.ingest(by_time[t]):
            first.setdefault(alert.detector, index)
    return first, list(monitor.alerts), len(times)


def test_simulated_storm_is_caught_with_its_origin() -> None:
    result = sim.simulate("storm", sim.Overrides(duration_s=1.5e-3, counter_interval_s=100e-6))
    samples = list(sim.counter_samples(result.network, result.trace, priority=3, mtu=4096, lossless=True))
    first, alerts, polls = _replay(samples, Thresholds())
    assert {"pause-storm", "storm-origin"} <= set(first), first
    origin = [a for a in alerts if a.detector == "storm-origin"]
    assert origin and origin[0].subject.startswith("h0 ")


def test_simulated_deadlock_cycle_is_confirmed_with_the_cabling() -> None:
    result = sim.simulate("deadlock", sim.Overrides(duration_s=1e-3, counter_interval_s=100e-6))
    samples = list(sim.counter_samples(result.network, result.trace, priority=3, mtu=4096, lossless=True))
    cabling = tuple((link.a, link.b) for link in result.network.fabric.links)
    first, alerts, _ = _replay(samples, Thresholds(links=cabling))
    assert "deadlock" in first
    assert any(a.detector == "deadlock" and a.severity == "critical" for a in alerts)


def test_wall_clock_stream_keeps_the_paused_fractions_the_simulator_computed() -> None:
    from tensorfabric.telemetry.detectors.base import paused_fractions
    from tensorfabric.telemetry.sim_stream import stretch
    from tensorfabric.telemetry.window import Window

    result = sim.simulate("storm", sim.Overrides(duration_s=1.5e-3, counter_interval_s=100e-6))
    samples = list(sim.counter_samples(result.network, result.trace, priority=3, mtu=4096, lossless=True))
    streamed = [s for _, snapshot in stretch(samples, pace_s=15.0, start=1000.0) for s in snapshot]
    times = sorted({s.time for s in streamed})
    assert times[0] == 1000.0 and {b - a for a, b in zip(times, times[1:], strict=False)} == {15.0}
    before = dict(paused_fractions(Window(samples), "tx"))
    after = dict(paused_fractions(Window(streamed), "tx"))
    assert before.keys() == after.keys() and all(abs(before[k] - after[k]) < 1e-9 for k in before)
    first, alerts, _ = _replay(streamed, Thresholds())
    assert "storm-origin" in first  # the same verdict at Prometheus' pace


def test_stream_to_file_paces_snapshots_and_never_writes_through_an_existing_file(tmp_path: Path) -> None:
    from tensorfabric.errors import InputError
    from tensorfabric.telemetry.sim_stream import stream_to_file

    samples = [Sample(t * 1e-4, "roce_pfc_pause_frames_total", "counter", t, {"host": "h0"}, "sim")
               for t in range(3)]
    now = [100.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    out = tmp_path / "stream.jsonl"
    stream_to_file(samples, str(out), pace_s=15.0, clock=lambda: now[0], sleep=sleep)
    assert [json.loads(line)["time"] for line in out.read_text().splitlines()] == [100.0, 115.0, 130.0]
    assert slept == [0.0, 15.0, 15.0]
    with pytest.raises(InputError, match="exists"):
        stream_to_file(samples, str(out), pace_s=15.0, clock=lambda: now[0], sleep=sleep)
    target = tmp_path / "someone-elses.jsonl"
    target.write_text("theirs\n")
    link = tmp_path / "link.jsonl"
    os.symlink(target, link)
    stream_to_file(samples, str(link), pace_s=15.0, replace=True, clock=lambda: now[0], sleep=sleep)
    assert target.read_text() == "theirs\n" and not link.is_symlink() and len(link.read_text().splitlines()) == 3
