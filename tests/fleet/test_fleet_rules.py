"""Cross-host rules and the data-path attribution, on small fleets built from the fixture report."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tensorfabric.fleet.check import check_fleet
from tensorfabric.fleet.facts import HostReport, host_facts
from tensorfabric.fleet.npd import NPD_NONOK, NPD_OK, NPD_UNKNOWN, npd_all, npd_condition
from tensorfabric.fleet.pairs import PairResult, Thresholds, host_figures, reference
from tensorfabric.fleet.rules import RULES, vote
from tensorfabric.fleet.rules.config import parse_ib_hca

TEMPLATE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "fleet" / "daemonset"
                       / "gpu-a01.json").read_text())
Doc = dict[str, Any]


def fleet(n: int = 6, **mutate: Callable[[Doc], None]) -> list[HostReport]:
    out = []
    for i in range(n):
        doc = json.loads(json.dumps(TEMPLATE))
        name = f"n{i}"
        doc["host"]["hostname"] = {"name": name, "addresses": [f"10.0.0.{i + 1}"], "error": None}
        if name in mutate:
            mutate[name](doc)
        out.append(host_facts(doc, source=f"{name}.json"))
    return out


def named(hosts: list[HostReport], **kwargs: Any) -> set[tuple[str, str, str]]:
    return {(h, f.rule, f.severity) for f in check_fleet(hosts, **kwargs).findings for h in f.evidence["hosts"]}


def env(**values: str) -> Callable[[Doc], None]:
    return lambda doc: doc["environment"].update(values)


def port(name: str, **values: Any) -> Callable[[Doc], None]:
    def apply(doc: Doc) -> None:
        entry = next(p for p in doc["host"]["rdma_ports"] if p["port"] == name)
        entry.update(values)
        if "mtu" in values:
            doc["data_netdevs"][entry["netdev"]]["mtu"] = values["mtu"]
    return apply


def test_vote_names_the_minority_and_trusts_no_side_in_a_tie() -> None:
    assert vote({"a": 1, "b": 1, "c": 2}) == (1, {"c": 2})
    assert vote({"a": 3, "b": 3, "c": 3, "d": 3, "e": 3, "f": 5, "g": 5, "h": 4}) == (3, {"f": 5, "g": 5, "h": 4})
    assert vote({"a": 1, "b": 2}) == (None, {"a": 1, "b": 2})
    assert vote({"a": 1}) == (1, {}) and vote({}) == (None, {})


def test_a_uniform_fleet_has_no_finding() -> None:
    assert check_fleet(fleet()).findings == ()
    assert [r.name for r in RULES.values()][:3] == ["fleet.mtu", "fleet.link-speed", "fleet.gid-index"]


@pytest.mark.parametrize(("mutation", "rule", "severity"), [
    (port("mlx5_1:1", mtu=4200), "fleet.mtu", "error"),
    (port("mlx5_0:1", speed_mbps=100000), "fleet.link-speed", "error"),
    (env(NCCL_IB_GID_INDEX="5"), "fleet.gid-index", "error"),
    (port("mlx5_0:1", gid_index=5), "fleet.gid-index", "error"),
    (env(NCCL_IB_TC="0"), "fleet.traffic-class", "error"),
    (env(UCX_IB_TRAFFIC_CLASS="106"), "fleet.traffic-class", "error"),
    (port("mlx5_0:1", traffic_class=96), "fleet.traffic-class", "error"),
    (env(NCCL_PROTO="LL128"), "fleet.nccl-env", "error"),
    (env(NCCL_IB_HCA="=mlx5_0:1,mlx5_3:1"), "fleet.ib-hca", "error"),
    (port("mlx5_1:1", state="1: DOWN"), "fleet.rdma-ports", "error"),
    (lambda d: d["software"].update(nccl="2.23.4"), "fleet.versions", "error"),
    (port("mlx5_0:1", fw_ver="28.36.1010"), "fleet.driver-firmware", "error"),
    (lambda d: d["software"].update(kernel="6.8.0-45-generic"), "fleet.driver-firmware", "warning"),
    (lambda d: d["host"]["hostname"].update(addresses=["127.0.1.1"]), "fleet.hostname", "error"),
    (lambda d: d["findings"].append({"rule": "roce.pfc-off", "severity": "error", "subject": "ens1f0np0",
                                     "message": "PFC off", "evidence": {}, "fix": "mlnx_qos"}),
     "fleet.doctor", "error"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_each_difference_names_the_odd_host_only(mutation: Callable[[Doc], None], rule: str, severity: str) -> None:
    assert named(fleet(n2=mutation)) == {("n2", rule, severity)}


def test_what_most_hosts_share_is_not_a_fleet_finding() -> None:
    pfc = {"rule": "roce.pfc-off", "severity": "error", "subject": "x", "message": "m", "evidence": {}, "fix": ""}
    add = {f"n{i}": (lambda d: d["findings"].append(dict(pfc))) for i in range(4)}
    report = check_fleet(fleet(6, **add))
    assert report.findings == () and report.shared_doctor_rules == {"roce.pfc-off": 4}


def test_two_hosts_sharing_an_address_are_both_named() -> None:
    same = lambda d: d["host"]["hostname"].update(addresses=["10.0.0.9"])  # noqa: E731
    assert named(fleet(n1=same, n4=same)) == {("n1", "fleet.hostname", "error"), ("n4", "fleet.hostname", "error")}


@pytest.mark.parametrize(("value", "parsed"), [
    ("mlx5_0:1,mlx5_1:1", (False, False, [("mlx5_0", 1), ("mlx5_1", 1)])),
    ("=mlx5_0", (False, True, [("mlx5_0", None)])),
    ("^=mlx5_3:1", (True, True, [("mlx5_3", 1)])),
    ("mlx5", (False, False, [("mlx5", None)])),
])
def test_nccl_ib_hca_syntax(value: str, parsed: tuple[bool, bool, list[tuple[str, int | None]]]) -> None:
    assert parse_ib_hca(value) == parsed


def test_ib_hca_prefix_matches_and_exclusions_are_not_missing() -> None:
    assert named(fleet(n1=env(NCCL_IB_HCA="mlx5"), n2=env(NCCL_IB_HCA="^mlx5_7"))) == set()


# -- data path ------------------------------------------------------------------------------------------------
def pairs(hosts: int, rate: Callable[[int, int], float], latency: Callable[[int, int], float] | None = None
          ) -> list[PairResult]:
    return [PairResult(f"n{a}", f"n{b}", (latency or (lambda a, b: 20e-6))(a, b), rate(a, b), rate(a, b))
            for a in range(hosts) for b in range(a + 1, hosts)]


def test_a_slow_host_is_named_as_a_host_not_its_links() -> None:
    slow = pairs(6, lambda a, b: 0.94e9 if 3 not in (a, b) else 0.094e9)
    report = check_fleet(fleet(), pairs=slow)
    assert {(f.subject, f.severity) for f in report.findings} == {("host n3", "error")}
    assert "every pair of this host is slow (5 pairs)" in report.findings[0].message
    assert report.cells("n3")["pairs"] == "FAIL" and report.cells("n0")["pairs"] == "ok"


def test_one_slow_pair_is_a_link() -> None:
    slow = pairs(6, lambda a, b: 0.3e9 if (a, b) == (1, 4) else 0.94e9)
    report = check_fleet(fleet(), pairs=slow)
    assert [(f.subject, f.evidence["kind"]) for f in report.findings] == [("link n1—n4", "link")]
    assert report.cells("n1")["pairs"] == "link"


def test_in_a_three_host_fleet_the_slow_host_still_stands_out() -> None:
    # Two of the three pairs touch the slow host: a median over pairs would call the slow rate normal.
    slow = pairs(3, lambda a, b: 0.1e9 if 2 in (a, b) else 1e9)
    assert {f.subject for f in check_fleet(fleet(3), pairs=slow).findings} == {"host n2"}
    assert reference(host_figures(slow))[0] == 1e9


def test_late_is_a_warning_and_line_rate_judges_every_pair() -> None:
    late = pairs(5, lambda a, b: 0.9e9, lambda a, b: 2e-3 if 0 in (a, b) else 20e-6)
    assert named(fleet(5), pairs=late) == {("n0", "fleet.datapath", "warning")}
    everywhere = check_fleet(fleet(5), pairs=pairs(5, lambda a, b: 0.9e9), line_rate_bps=400e9)
    assert [f.subject for f in everywhere.findings] == ["fleet"] and everywhere.exit_code == 1
    assert check_fleet(fleet(2), pairs=pairs(2, lambda a, b: 1e6)).findings == ()  # one pair: nothing to compare


def test_a_failed_pair_is_an_error_on_its_link() -> None:
    broken = [*pairs(4, lambda a, b: 1e9)[1:], PairResult("n0", "n1", error="connection reset")]
    assert named(fleet(4), pairs=broken) == {("n0", "fleet.datapath", "error"), ("n1", "fleet.datapath", "error")}


def test_thresholds_are_documented_numbers() -> None:
    assert Thresholds().to_dict() == {"bandwidth_fraction": 0.5, "line_fraction": 0.5, "latency_factor": 5.0,
                                      "latency_floor_s": 1e-3}


# -- outputs ---------------------------------------------------------------------------------------------------
def test_npd_condition_per_host() -> None:
    report = check_fleet(fleet(n2=port("mlx5_1:1", mtu=1500), n3=env(NCCL_IB_GID_INDEX="5")))
    code, message = npd_condition(report, "n2")
    assert code == NPD_NONOK and message.startswith("fleet.mtu: MTU: ens1f1np1 1500") and len(message) <= 80
    assert npd_condition(report, "n0") == (NPD_OK, "n0 agrees with 5 other hosts on 13 checks")
    assert npd_condition(report, "n0.cluster.local")[0] == NPD_OK  # a node's FQDN finds its short name
    assert npd_condition(report, "n9")[0] == NPD_UNKNOWN
    assert npd_condition(report, "n3", max_length=30)[1] == "fleet.gid-index: NCCL_IB_GI..."
    code, lines = npd_all(report)
    assert code == NPD_NONOK and len(lines) == 6 and lines[0].startswith("n0: ")


def test_json_lists_hosts_with_their_failed_checks() -> None:
    report = check_fleet(fleet(n2=port("mlx5_1:1", mtu=1500)), pairs=pairs(6, lambda a, b: 1e9))
    doc = report.to_dict()
    n2 = next(h for h in doc["hosts"] if h["host"] == "n2")
    assert n2["state"] == "error" and n2["failed"] == {"mtu": "FAIL"}
    assert doc["per_host"]["n0"]["pairs"] == 5 and len(doc["pairs"]) == 15
    assert doc["findings"][0]["fix"].startswith("ip link set dev ens1f1np1 mtu 9000")
