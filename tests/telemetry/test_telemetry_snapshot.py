"""Verdicts on a single dump (a ticket has no time series), from `monitor --once`."""

from __future__ import annotations

import json

import pytest

from tensorfabric.cli.main import main
from tensorfabric.samples import Sample
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.snapshot import snapshot_findings
from tensorfabric.telemetry.sources import open_source

from .telemetry_support import FIXTURES, ctx

DRIVERS, RDMA = FIXTURES / "drivers", FIXTURES / "rdma"


def _findings(*specs: str) -> dict[tuple[str, str], object]:
    monitor = Monitor([open_source(spec, ctx()) for spec in specs])
    return {(f.rule, f.subject): f for f in snapshot_findings(monitor.poll().samples)}


def test_the_ticket_dump_shows_global_pause_priority_0_and_buffers() -> None:
    found = _findings(f"ethtool-file:{DRIVERS / 'ethtool_mlx5_ticket.txt'}")
    assert set(found) == {("telemetry.global-pause", "h0 ens1f0np0"), ("telemetry.all-on-priority-0", "h0 ens1f0np0"),
                          ("telemetry.receiver-out-of-buffers", "h0 ens1f0np0")}
    assert all(f.fix for f in found.values())  # type: ignore[attr-defined]


def test_cqe_errors_and_out_of_buffer_from_rdma_statistic() -> None:
    found = _findings(f"rdma-file:{RDMA / 'rdma_statistic_oneline.txt'}")
    cqe = found[("telemetry.completion-errors", "h0 mlx5_0")]
    assert cqe.evidence["look_first_at"] == ["resp_cqe_error", "req_cqe_error"]  # type: ignore[attr-defined]
    assert ("telemetry.receiver-out-of-buffers", "h0 mlx5_0") in found
    assert not [k for k in found if k[1] == "h0 mlx5_1"]  # retransmissions alone are no snapshot verdict


def test_a_healthy_pfc_port_gives_no_findings() -> None:
    assert _findings(f"ethtool-file:{DRIVERS / 'ethtool_bnxt_en.txt'}") == {}


def test_heavy_ecn_marking_is_judged_against_received_packets() -> None:
    labels = {"host": "h0", "device": "eth0", "port": "1"}
    rows = [Sample(1.0, "roce_rdma_packets_total", "counter", 1e6, {**labels, "direction": "rx"}),
            Sample(1.0, "roce_ecn_marked_packets_total", "counter", 5e4, {**labels, "priority": "3"}),
            Sample(1.0, "roce_cnp_sent_total", "counter", 10.0, labels)]
    (finding,) = snapshot_findings(rows)
    assert finding.rule == "telemetry.heavy-ecn" and "5.0%" in finding.message


def test_once_json_carries_the_findings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", "--once", "--json", "--host", "h0", "--source",
                 f"ethtool-file:{DRIVERS / 'ethtool_mlx5_ticket.txt'}"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {f["rule"] for f in out["findings"]} == {"telemetry.global-pause", "telemetry.all-on-priority-0",
                                                    "telemetry.receiver-out-of-buffers"}
