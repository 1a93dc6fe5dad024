"""The SONiC COUNTERS_DB source against a real redis-server loaded with a snapshot."""

from __future__ import annotations

import pytest

from tensorfabric.errors import DiscoveryError
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.exporter import render
from tensorfabric.telemetry.sources import open_source

from .conftest import free_port, load_snapshot
from .telemetry_support import FIXTURES, ctx, find


def test_reads_ports_queues_pgs_and_watchdog(redis_server: tuple[str, int]) -> None:
    host, port = redis_server
    load_snapshot(host, port)
    reading = open_source(f"sonic-redis:{host}:{port}", ctx()).read()
    assert reading.errors == ()
    s = reading.samples
    assert {x.labels["host"] for x in s} == {"leaf0"}  # name from CONFIG_DB DEVICE_METADATA
    rx = find(s, "roce_pfc_paused_seconds_total", port="Ethernet4", priority="3", direction="rx")
    assert rx[0].value == pytest.approx(0.5)  # 500000 us
    # Ethernet12 reports quanta only: 781250 quanta x 512 bit times at 100 Gb/s = 4 ms
    quanta = find(s, "roce_pfc_paused_seconds_total", port="Ethernet12", priority="3", direction="rx")
    assert quanta[0].value == pytest.approx(0.004)
    assert find(s, "roce_pfc_pause_transitions_total", port="Ethernet0", priority="4")[0].value == 1100
    assert find(s, "roce_pfcwd_stormed", port="Ethernet4", queue="3")[0].value == 1.0
    assert find(s, "roce_pfcwd_stormed", port="Ethernet0", queue="3")[0].value == 0.0
    assert find(s, "roce_discards_total", port="Ethernet4", queue="3", reason="pfcwd", direction="tx")[0].value == 1337
    assert find(s, "roce_queue_occupancy_bytes", port="Ethernet4", queue="3")[0].value == 183296
    assert find(s, "roce_queue_paused", port="Ethernet4", queue="3")[0].value == 1.0
    assert find(s, "roce_queue_watermark_bytes", port="Ethernet0", queue="5")[0].value == 10240
    assert find(s, "roce_pg_shared_watermark_bytes", port="Ethernet8", priority="4")[0].value == 65536 + 2048


def test_watchdog_state_reaches_the_detector(redis_server: tuple[str, int]) -> None:
    host, port = redis_server
    load_snapshot(host, port)
    monitor = Monitor([open_source(f"sonic-redis:{host}:{port}", ctx())])
    result = monitor.poll()
    assert [(a.detector, a.subject) for a in result.alerts] == [("pfc-watchdog", "leaf0 Ethernet4 queue 3")]


def test_non_numeric_counter_is_an_error_and_the_rest_is_kept(redis_server: tuple[str, int]) -> None:
    import redis

    host, port = redis_server
    load_snapshot(host, port)
    oid = redis.Redis(host=host, port=port, db=2, decode_responses=True).hget("COUNTERS_PORT_NAME_MAP", "Ethernet0")
    redis.Redis(host=host, port=port, db=2).hset(f"COUNTERS:{oid}", "SAI_PORT_STAT_PFC_3_RX_PKTS", "0x??")
    reading = open_source(f"sonic-redis:{host}:{port}@sw1", ctx()).read()
    assert len(reading.errors) == 1 and "SAI_PORT_STAT_PFC_3_RX_PKTS" in reading.errors[0]
    assert find(reading.samples, "roce_pfc_pause_frames_total", port="Ethernet4", priority="3", direction="rx")
    assert {x.labels["host"] for x in reading.samples} == {"sw1"}


def test_redis_down_is_reported_and_the_exporter_keeps_serving_the_rest() -> None:
    down = open_source(f"sonic-redis:127.0.0.1:{free_port()}", ctx())
    with pytest.raises(DiscoveryError, match="redis"):
        down.read()
    good = open_source(f"ethtool-file:{FIXTURES / 'ethtool_mlx5.txt'}@eth2", ctx())
    monitor = Monitor([down, good])
    result = monitor.poll()
    assert down.name in result.errors and good.name not in result.errors
    text = render(monitor).decode()
    assert f'tensorfabric_source_up{{source="{down.name}"}} 0.0' in text
    assert f'tensorfabric_source_errors_total{{source="{down.name}"}} 1.0' in text
    assert 'roce_pfc_pause_frames_total{device="eth2",direction="tx",host="h0",port="1",priority="3"}' in text
