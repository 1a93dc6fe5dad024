"""``lab:NAME`` against a real network-namespace lab (root only)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.sources import SourceContext, open_source

from .telemetry_support import find


def test_lab_source_polls_every_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the lab builds network namespaces")
    from tensorfabric.lab.lab import Lab
    from tensorfabric.lab.state import ENV_STATE_DIR

    monkeypatch.setenv(ENV_STATE_DIR, str(tmp_path))
    lab = Lab(hosts=2, rate="100mbit", name=f"tft{os.getpid() % 10000}", state_dir=tmp_path)
    with lab:
        source = open_source(f"lab:{lab.name}", SourceContext(host="ignored"))
        monitor = Monitor([source])
        first = monitor.poll()
        target = lab.address(lab.hosts[1])
        send = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                f"for _ in range(20): s.sendto(b'x' * 1000, ({target!r}, 9))")
        done = lab.exec(lab.hosts[0], [sys.executable, "-c", send], timeout_s=30)
        assert done.returncode == 0, done.stderr
        second = monitor.poll()
    assert first.errors == {} and second.errors == {}
    assert {s.labels["host"] for s in second.samples} == set(lab.hosts)
    sent = {s.series: s.value for s in find(second.samples, "netdev_packets_total", host=lab.hosts[0], direction="tx")}
    before = {s.series: s.value for s in find(first.samples, "netdev_packets_total", host=lab.hosts[0], direction="tx")}
    assert any(sent[k] - before.get(k, 0.0) >= 20 for k in sent), "the datagrams must show in the host's counters"
