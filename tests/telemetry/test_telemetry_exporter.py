"""The Prometheus exporter: exposition (golden), HTTP on loopback, faults that must not stop serving."""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.errors import InputError
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.exporter import exported_names, parse_listen, render, serve
from tensorfabric.telemetry.metrics import METRICS
from tensorfabric.telemetry.sources import open_source
from tensorfabric.telemetry.synth import trace

from .conftest import free_port
from .telemetry_support import FIXTURES, GOLDEN, ctx


def _fixture_monitor() -> Monitor:
    return Monitor([open_source(f"ethtool-file:{FIXTURES / 'ethtool_mlx5.txt'}@eth2", ctx()),
                    open_source(f"rdma-json:{FIXTURES / 'rdma_statistic.json'}", ctx())])


def test_exposition_matches_golden() -> None:
    monitor = _fixture_monitor()
    monitor.poll()
    # Source labels carry the fixture path; the golden file holds it as <FIXTURES> so any checkout compares.
    text = render(monitor).decode().replace(str(FIXTURES), "<FIXTURES>")
    golden = GOLDEN / "exposition.txt"
    assert text == golden.read_text(), "exposition changed; review and update tests/golden/telemetry/exposition.txt"


def test_counters_are_typed_and_named_with_total() -> None:
    monitor = _fixture_monitor()
    monitor.poll()
    text = render(monitor).decode()
    assert "# TYPE roce_pfc_paused_seconds_total counter" in text
    assert "# TYPE roce_pci_stalled_ratio gauge" in text
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    assert names <= exported_names() | {n.removesuffix("_total") + "_created" for n in METRICS}
    assert all(name in exported_names() for name in names if not name.endswith("_created"))


def test_alerts_are_exported() -> None:
    monitor = Monitor()
    for samples in trace("loss", polls=14, onset=9 * 15.0 + 1):
        monitor.ingest(samples)
    text = render(monitor).decode()
    assert ('tensorfabric_alert{detector="lossless-loss",severity="critical",'
            'subject="h2 mlx5_0 1 prio 3 reason host_buffer"} 1.0') in text


def test_http_exporter_on_loopback_keeps_serving_when_a_source_breaks(tmp_path: Path) -> None:
    broken = tmp_path / "eth9.txt"
    broken.write_text((FIXTURES / "ethtool_mlx5.txt").read_text())
    monitor = Monitor([open_source(f"ethtool-file:{broken}", ctx()),
                       open_source(f"rdma-json:{FIXTURES / 'rdma_statistic.json'}", ctx())])
    lock = threading.Lock()
    port = free_port()
    server, _ = serve(monitor, "127.0.0.1", port, lock)
    try:
        with lock:
            monitor.poll()
        first = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert 'tensorfabric_source_up{source="ethtool-file:' in first and "roce_cnp_sent_total" in first
        broken.write_text("ethtool: bad command line argument(s)\n")  # the file turns to garbage
        with lock:
            monitor.poll()
        second = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert f'tensorfabric_source_up{{source="ethtool-file:{broken}"}} 0.0' in second
        assert f'tensorfabric_source_errors_total{{source="ethtool-file:{broken}"}} 1.0' in second
        assert 'roce_cnp_sent_total{device="mlx5_1",host="h0",port="1"} 20050.0' in second
    finally:
        server.shutdown()
        server.server_close()


def test_poll_on_scrape_reads_fresh_values(tmp_path: Path) -> None:
    path = tmp_path / "eth0.txt"
    path.write_text("NIC statistics:\n     tx_prio3_pause: 5\n")
    monitor = Monitor([open_source(f"ethtool-file:{path}", ctx())])
    assert 'priority="3"} 5.0' in render(monitor, poll=True).decode()
    path.write_text("NIC statistics:\n     tx_prio3_pause: 9\n")
    assert 'priority="3"} 9.0' in render(monitor, poll=True).decode()


@pytest.mark.parametrize("text", ["0.0.0.0:9108", "10.0.0.1:9108", "9108", "127.0.0.1:0", "127.0.0.1:http"])
def test_listen_address_is_loopback_and_valid(text: str) -> None:
    with pytest.raises(InputError):
        parse_listen(text)


def test_listen_remote_needs_consent() -> None:
    assert parse_listen("127.0.0.1:9108") == ("127.0.0.1", 9108)
    assert parse_listen("[::1]:9108") == ("::1", 9108)
    assert parse_listen("0.0.0.0:9108", allow_remote=True) == ("0.0.0.0", 9108)


def _parsed(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_fast_renderer_exposes_what_prometheus_client_exposes() -> None:
    from tensorfabric.telemetry.exporter import render_fast
    from tensorfabric.telemetry.exposition import TextRenderer

    monitor = Monitor()
    for samples in trace("storm", polls=12, onset=8 * 15.0 + 1):
        monitor.ingest(samples)
    monitor.ingest([s for s in next(iter(trace("loss", polls=1))) if s.metric == "roce_discards_total"])
    renderer = TextRenderer()
    fast = render_fast(monitor, renderer).decode()
    assert _parsed(fast) == _parsed(render(monitor).decode())
    assert render_fast(monitor, renderer).decode() == fast  # cached prefixes give the same text again


def test_series_a_source_stops_reporting_expire() -> None:
    from tensorfabric.samples import Sample

    monitor = Monitor(stale_s=60.0)
    gone = Sample(0.0, "roce_pfc_pause_frames_total", "counter", 5.0, {"host": "h0", "priority": "4"}, "s")
    kept = [Sample(t, "roce_pfc_pause_frames_total", "counter", t, {"host": "h0", "priority": "3"}, "s")
            for t in (0.0, 30.0, 90.0)]
    monitor.ingest([gone, *kept])
    text = render(monitor).decode()
    assert 'priority="3"} 90.0' in text and 'priority="4"' not in text


@given(st.text(max_size=20), st.floats(allow_nan=False, allow_infinity=False, width=32))
def test_fast_renderer_escapes_any_label_value(value: str, number: float) -> None:
    from tensorfabric.samples import Sample
    from tensorfabric.telemetry.exporter import render_fast
    from tensorfabric.telemetry.exposition import TextRenderer

    monitor = Monitor(detectors=[])
    monitor.ingest([Sample(1.0, "roce_queue_occupancy_bytes", "gauge", abs(number), {"host": value, "queue": "3"})])
    parsed = _parsed(render_fast(monitor, TextRenderer()).decode())
    assert parsed[("roce_queue_occupancy_bytes", (("host", value), ("queue", "3")))] == abs(number)
