"""Acceptance 4: the simulator's counter streams, replayed through the telemetry detectors, name the storm's
origin and its victims, and the ring's deadlock cycle (tests may import both; the sim package does not)."""

from __future__ import annotations

from pathlib import Path

from tensorfabric.samples import Sample
from tensorfabric.sim import Overrides, counter_samples, simulate
from tensorfabric.telemetry.detectors import Thresholds, load
from tensorfabric.telemetry.window import Window


def _alerts(result, limits: Thresholds, names: tuple[str, ...]):  # type: ignore[no-untyped-def]
    samples = list(counter_samples(result.network, result.trace, priority=3, mtu=4096, lossless=True))
    window = Window(samples)
    return [a for d in load(names) for a in d.detect(window, limits)]


def test_storm_stream_names_origin_and_victims(tmp_path: Path) -> None:
    from tensorfabric.cli.main import main

    path = tmp_path / "storm.jsonl"
    assert main(["simulate", "storm", "--duration", "1500us", "--json", "--counters", str(path)]) == 0
    samples = [Sample.from_json(line) for line in path.read_text().splitlines()]
    alerts = [a for d in load(("storm-origin", "pause-storm")) for a in d.detect(Window(samples), Thresholds())]
    origin = [a for a in alerts if a.detector == "storm-origin"]
    assert [a.subject for a in origin] == ["h0 mlx5_0 eth0 prio 3"]  # the stuck NIC, and only it
    victims = set(origin[0].evidence["victims"])
    assert "leaf0 Ethernet0" in victims  # its ToR port, held continuously
    assert any(v.startswith("spine") for v in victims)  # and upstream of the ToR
    assert "h0 mlx5_0 eth0 prio 3" in {a.subject for a in alerts if a.detector == "pause-storm"}


def test_deadlock_stream_finds_the_cycle_and_acyclic_does_not() -> None:
    stuck = simulate("deadlock", Overrides(duration_s=1e-3, counter_interval_s=100e-6))
    cabling = tuple((link.a, link.b) for link in stuck.network.fabric.links)
    alerts = _alerts(stuck, Thresholds(links=cabling), ("deadlock",))
    assert any(a.severity == "critical" for a in alerts), alerts
    evidence = " ".join(str(a.evidence) + a.subject for a in alerts)
    assert all(s in evidence for s in ("s0", "s1", "s2", "s3"))
    fine = simulate("deadlock", Overrides(duration_s=1e-3, counter_interval_s=100e-6, acyclic=True))
    cabling = tuple((link.a, link.b) for link in fine.network.fabric.links)
    assert not [a for a in _alerts(fine, Thresholds(links=cabling), ("deadlock",)) if a.severity == "critical"]
