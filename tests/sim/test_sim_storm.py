"""Acceptance 4 (simulator side): a stuck NIC pauses its ToR port for good and the pause spreads upstream;
the counter stream it writes is made of canonical Sample records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tensorfabric.samples import Sample
from tensorfabric.sim import Overrides, counter_samples, simulate


@pytest.fixture(scope="module")
def storm():  # type: ignore[no-untyped-def]
    return simulate("storm", Overrides(duration_s=1.5e-3, counter_interval_s=100e-6))


def test_stuck_nic_pauses_its_tor_continuously_and_spreads(storm) -> None:  # type: ignore[no-untyped-def]
    s = storm.pause["storm"]
    assert s["origin"] == "h0:eth0"  # the stuck NIC, as the monitor's storm-origin detector names it
    assert s["paused_port"] == "leaf0:Ethernet0"  # the ToR port it holds
    assert s["origin_paused_fraction"] > 0.99
    spread = set(s["spread_to"])
    assert any(p.startswith("spine") for p in spread), spread  # a spine's downlink to leaf0
    assert any(p.startswith("h") for p in spread), spread  # and sending NICs
    assert s["victim_flows"], "flows that never touch h0 are held up too"
    assert all(storm.flows[i].dst != "h0" for i in s["victim_flows"])


def test_counter_stream_is_canonical(storm) -> None:  # type: ignore[no-untyped-def]
    from tensorfabric.telemetry.metrics import METRICS

    samples = list(counter_samples(storm.network, storm.trace, priority=3, mtu=4096, lossless=True))
    assert samples
    times = sorted({s.time for s in samples})
    assert len(times) == 15
    for s in samples:
        spec = METRICS[s.metric]
        assert s.kind == spec.kind
        assert set(s.labels) <= set(spec.labels), (s.metric, s.labels)
        assert Sample.from_json(s.to_json()) == s
    tx = [s for s in samples if s.metric == "roce_pfc_pause_frames_total" and s.labels.get("host") == "h0"
          and s.labels.get("direction") == "tx" and s.time == times[-1]]
    assert tx and tx[0].value >= 4  # XOFF plus a refresh every half pause time (168 us at 100G)
    paused = [s for s in samples if s.metric == "roce_pfc_paused_seconds_total" and s.labels["host"] == "leaf0"
              and s.labels["port"] == "Ethernet0" and s.labels["direction"] == "rx" and s.time == times[-1]]
    assert paused[0].value == pytest.approx(times[-1], rel=0.01)


def test_cli_writes_counters_plot_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main

    counters, plot = tmp_path / "c.jsonl", tmp_path / "p.png"
    rc = main(["simulate", "storm", "--duration", "500us", "--json", "--counters", str(counters),
               "--plot", str(plot)])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["scenario", "params", "sim_time_s", "wall_s", "flows", "drops", "pause", "queues",
                         "reference_error"]
    assert doc["reference_error"] is None  # long-lived flows: no completion to put an error on
    assert set(doc["flows"][0]) == {"id", "bytes", "fct_s", "mean_rate_bps"}
    lines = counters.read_text().splitlines()
    assert lines and all(Sample.from_json(line).source == "sim" for line in lines)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
