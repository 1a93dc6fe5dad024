"""Verdicts on a single dump (a ticket has no time series), from `monitor --once`, and on two dumps of the same
sources (graded moving / stopped); fabric verdicts and devices that are not RoCE on real-shaped pastes, the same
whatever the paste is wrapped in."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from metamorphic import mutations
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


# --- fabric verdicts and devices that are not RoCE, on real-shaped pastes ---------------------------------------------

VERDICTS = FIXTURES / "verdicts"
TABLE: dict[str, dict[str, Any]] = yaml.safe_load((VERDICTS / "expected.yaml").read_text())
NAMES = sorted(TABLE)


def _samples(name: str, text: str | None = None) -> list[Sample]:
    if text is None:
        return list(open_source(f"file:{VERDICTS / name}", ctx()).read().samples)
    from tensorfabric.telemetry.sources.generic import GenericBudget
    from tensorfabric.telemetry.sources.paste import read_counters

    context = ctx()
    return read_counters(text, name=f"file:{name}", ctx=context, budget=GenericBudget(context.counters, name),
                         stem=Path(name).stem)[0]


def _verdicts(name: str, text: str | None = None) -> list[Any]:
    earlier = TABLE[name].get("earlier")
    return snapshot_findings(_samples(name, text), earlier=_samples(earlier) if earlier else None)


def _dig(evidence: Any, key: str) -> Any:
    for part in key.split("."):
        evidence = evidence[part]
    return evidence


def test_every_verdict_fixture_is_in_the_table() -> None:
    assert {p.name for p in VERDICTS.glob("*.txt")} == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_verdict_fixture_gives_exactly_the_findings_of_the_table(name: str) -> None:
    found = _verdicts(name)
    got = sorted(f"{f.rule} | {f.subject} | {f.evidence.get('grade', '-')}" for f in found)
    assert got == sorted(TABLE[name]["findings"])
    assert all(f.fix and f.message for f in found)
    for row in TABLE[name].get("evidence", []):
        rule, fact = (part.strip() for part in row.split("|", 1))
        key, value = (part.strip() for part in fact.split(" = ", 1))
        values = [str(_dig(f.evidence, key)) for f in found if f.rule == rule]
        assert any(v in (value, f"{value}.0") for v in values), f"{row}: {values}"


def test_a_grade_sets_the_severity() -> None:
    graded = {f.evidence["grade"]: f.severity for name in ("sonic_lossless_drops.txt", "sonic_lossless_drops_later.txt")
              for f in _verdicts(name)}
    assert graded == {"counted": "warning", "moving": "error"}
    # the same dump twice: the drops did not move between the dumps -- it happened, it is not happening now
    same = _samples("sonic_lossless_drops.txt")
    (finding,) = snapshot_findings(same, earlier=same)
    assert (finding.evidence["grade"], finding.severity) == ("stopped", "info") and "not happening now" in \
        finding.message


def _gist(findings: Iterable[Any]) -> Counter[tuple[str, str, str, str]]:
    """Findings without the names an envelope may change (a prompt or collector names the host)."""
    return Counter((f.rule, f.severity, str(f.evidence.get("grade", "-")), str(f.evidence.get("class", "")))
                   for f in findings)


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not set(stripped) <= set("=- ")


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutate=mutations(protect=_content))
def test_wrapped_pastes_give_the_same_verdicts(name: str, mutate: Any) -> None:
    assert _gist(_verdicts(name, mutate((VERDICTS / name).read_text()))) == _gist(_verdicts(name))


def test_the_same_counter_read_on_two_paths_is_compared_not_merged() -> None:
    """pfcstat (through SONiC) and the SDK, each as its own source, give the same series different values."""
    labels = {"host": "sn4600-leaf5", "device": "sn4600-leaf5", "port": "Ethernet12", "priority": "3",
              "direction": "rx"}
    pfcstat = Sample(1.0, "roce_pfc_pause_frames_total", "counter", 0.0, labels, "file:pfcstat.txt")
    sdk = Sample(1.0, "roce_pfc_pause_frames_total", "counter", 15437.0, labels, "file:sdk.txt")
    (finding,) = snapshot_findings([pfcstat, sdk])
    assert finding.rule == "telemetry.counter-path-disagreement" and finding.subject == "sn4600-leaf5 Ethernet12 prio 3"
    assert finding.evidence["values"] == {"file:pfcstat.txt": 0.0, "file:sdk.txt": 15437.0}


def test_an_infiniband_port_and_a_slow_link_are_named_not_judged() -> None:
    ib = {"host": "h0", "device": "mlx5_4", "port": "1"}
    slow = {"host": "h0", "device": "eno2", "port": "1"}
    rows = [Sample(1.0, "roce_port_info", "gauge", 1.0, {**ib, "link_layer": "InfiniBand"}),
            Sample(1.0, "roce_pfc_pause_frames_total", "counter", 400.0, {**ib, "priority": "global",
                                                                            "direction": "rx"}),
            Sample(1.0, "roce_link_speed_bytes_per_second", "gauge", 125e6, slow),
            Sample(1.0, "roce_pfc_pause_frames_total", "counter", 90.0, {**slow, "priority": "global",
                                                                           "direction": "rx"})]
    found = {(f.rule, f.subject, f.evidence["class"]) for f in snapshot_findings(rows)}
    assert found == {("telemetry.not-roce", "h0 mlx5_4", "an InfiniBand port"),
                     ("telemetry.not-roce", "h0 eno2", "a 1 Gb/s NIC")}  # and no global-pause verdict for either


def test_link_pause_counted_as_mac_control_frames_without_pfc_is_global_pause() -> None:
    port = {"host": "leaf3", "device": "leaf3", "port": "Ethernet7"}
    rows = [Sample(1.0, "roce_pause_ctrl_frames_total", "counter", 5120.0, {**port, "direction": "rx"}),
            Sample(1.0, "roce_pfc_pause_frames_total", "counter", 0.0, {**port, "priority": "3", "direction": "rx"}),
            Sample(1.0, "roce_pause_ctrl_frames_total", "counter", 77.0, {**port, "port": "Ethernet8",
                                                                          "direction": "rx"}),
            Sample(1.0, "roce_pfc_pause_frames_total", "counter", 77.0, {**port, "port": "Ethernet8", "priority": "3",
                                                                         "direction": "rx"})]
    (finding,) = snapshot_findings(rows)
    assert finding.rule == "telemetry.global-pause" and finding.evidence["ports"] == ["Ethernet7"]


def test_once_names_a_device_that_is_not_roce(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", "--once", "--json", "--host", "h0", "--source",
                 f"file:{VERDICTS / 'igb_ethtool.txt'}"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(f["rule"], f["severity"]) for f in out["findings"]] == [("telemetry.not-roce", "info")]
