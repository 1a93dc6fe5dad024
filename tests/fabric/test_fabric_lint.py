"""Linter: reference and starter specs lint clean; for every rule a minimal mutation fires exactly that rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tensorfabric.fabric.lint import RULES, lint, lint_context
from tensorfabric.fabric.lint.view import build_context, deployed_from_spec
from tensorfabric.fabric.spec import load_spec, parse_spec
from tensorfabric.fabric.starter import starter_spec

from .fabric_core_paths import SPECS


def _reference() -> dict[str, Any]:
    data = yaml.safe_load((SPECS / "reference.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _apply(data: dict[str, Any], path: str, value: Any) -> None:
    node: Any = data
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    if last == "+":
        node.append(value)
    else:
        node[int(last) if last.isdigit() else last] = value


# rule id -> the minimal change(s) to the reference spec that trigger it and nothing else
MUTATIONS: list[tuple[str, list[tuple[str, Any]]]] = [
    ("roce.dscp-not-lossless", [("switches.0.qos", {"dscp_map": {26: 1}})]),
    ("pfc.priority-mismatch", [("hosts.0.nics.0.qos", {"pfc_priorities": [3, 4]})]),
    ("pfc.link-pause", [("hosts.0.nics.0.qos", {"link_pause": True})]),
    ("pfc.too-many-lossless", [("qos.lossless_priorities", [3, 4, 5])]),
    ("cnp.not-strict", [("switches.1.qos", {"strict_priorities": []})]),
    ("cnp.class-mismatch", [("hosts.0.nics.0.qos", {"cnp_priority": 7})]),
    ("cnp.class-mismatch", [("qos.cnp.priority", 3)]),  # CNPs share the lossless RoCE class
    ("trust.mismatch", [("hosts.2.nics.0.qos", {"trust": "pcp"})]),
    ("trust.mismatch", [("qos.trust", "pcp")]),  # PCP everywhere, but NCCL's SL 0 is priority 0
    ("ecn.disabled", [("switches.2.qos", {"ecn_enabled": False})]),
    ("ecn.disabled", [("hosts.1.nics.0.qos", {"ecn_enabled": False})]),  # DCQCN off on a NIC
    ("ecn.thresholds", [("switches.0.qos", {"ecn": {"kmin": "2MB", "kmax": "1MB"}})]),
    ("ecn.after-pfc", [("switches.0.asic", {"model": "spectrum4", "xoff_threshold": "1MB"})]),
    ("headroom.too-small", [("hosts.3.nics.0.cable_length", "1m")]),
    ("headroom.too-small", [("switches.0.ports",
                             ["Ethernet[4-28:4]", {"name": "Ethernet0", "headroom_xoff": "50KB"}])]),
    ("mtu.mismatch", [("switches.3.qos", {"mtu": 9100})]),
    ("mtu.mismatch", [("switches.0.ports", ["Ethernet[4-28:4]", {"name": "Ethernet0", "mtu": 4200}])]),
    ("mtu.roce-too-small", [("hosts.1.nics.0.mtu", 4000)]),
    ("nccl.tc-not-lossless", [("hosts.0.nccl", {"tc": 0})]),
    ("nccl.gid-index-pinned", [("qos.nccl", {"tc": 106, "gid_index": 3})]),
    ("nccl.hca-prefix-match", [("qos.nccl", {"tc": 106, "ib_hca": "mlx5"})]),
    ("pfcwd.off", [("switches.1.qos", {"watchdog": {"enabled": False}})]),
    ("pfcwd.settings", [("qos.watchdog", {"detection_ms": 50, "poll_ms": 100})]),
    ("pfcwd.nic-storm-prevention-off", [("hosts.0.nics.0.qos", {"storm_prevention_ms": 0})]),
    ("routing.not-up-down", [("links.+", {"a": "leaf1:Ethernet16", "b": "leaf2:swp5", "cable_length": "10m"})]),
    ("dcbx.ownership", [("hosts.0.nics.0.qos", {"dcbx": {"owner": "os", "willing": True}})]),
    ("speed.mismatch", [("hosts.0.nics.0.speed", "100G")]),
    ("speed.mismatch", [("links.0.speed", "200G")]),  # the link states a speed neither end runs
]


def test_reference_lints_clean() -> None:
    assert lint(load_spec(SPECS / "reference.yaml")) == []
    assert lint(load_spec(SPECS / "nxos_snippet.yaml")) == []


@pytest.mark.parametrize(("leaves", "spines", "hosts", "speed", "nos"), [
    (2, 2, 4, 400e9, "sonic"), (4, 2, 2, 100e9, "cumulus"), (2, 4, 1, 800e9, "eos"), (3, 1, 3, 200e9, "nxos"),
    (1, 0, 8, 400e9, "sonic"),
])
def test_starter_specs_lint_clean(leaves: int, spines: int, hosts: int, speed: float, nos: str) -> None:
    spec = starter_spec(leaves=leaves, spines=spines, hosts_per_leaf=hosts, speed_bps=speed, nos=nos)
    assert lint(spec) == []


def test_every_rule_has_a_mutation() -> None:
    from .test_fabric_dialects import EDITS as DIALECT_EDITS
    from .test_fabric_lint_deployed import EDITS as RENDERED_EDITS

    lint_context(build_context(None))  # load the registry
    # Rules about vendor syntax (a DSCP listed twice, a lossy buffer profile) have no spec field to mutate:
    # their one-edit test changes a deployed file instead.
    mutated = {rule for rule, _ in MUTATIONS} | {e[3] for e in RENDERED_EDITS} | {e[3] for e in DIALECT_EDITS}
    # The info rule on a non-3 lossless priority has its own test (test_fabric_dialects): moving the lossless
    # priority is a consistent multi-line change, not a one-line mutation.
    assert mutated == set(RULES) - {"pfc.non-default-priority"}


@pytest.mark.parametrize(("rule", "changes"), MUTATIONS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(MUTATIONS)])
def test_mutation_fires_exactly_one_rule(rule: str, changes: list[tuple[str, Any]]) -> None:
    data = copy.deepcopy(_reference())
    for path, value in changes:
        _apply(data, path, value)
    findings = lint(parse_spec(data))
    assert findings, f"{rule}: no finding"
    assert {f.rule for f in findings} == {rule}, [(f.rule, f.subject, f.message) for f in findings]
    for f in findings:
        assert f.subject and f.message and f.fix and f.evidence
        assert f.severity == RULES[rule].severity


def test_findings_are_specific() -> None:
    data = _reference()
    _apply(data, "switches.0.qos", {"dscp_map": {26: 1}})
    findings = lint(parse_spec(data))
    subjects = {f.subject for f in findings}
    # each leaf1 cabled port, plus the two ends mismatch on every leaf1 link
    assert "switch leaf1 port Ethernet0" in subjects
    assert "link leaf1:Ethernet0—h1:eth0" in subjects
    assert all("leaf1" in s for s in subjects)


def test_lateral_link_marked_lossy_is_fine() -> None:
    data = _reference()
    _apply(data, "links.+", {"a": "leaf1:Ethernet16", "b": "leaf2:swp5", "cable_length": "10m", "lossless": False})
    assert lint(parse_spec(data)) == []


def test_leaf_behind_leaf_detected() -> None:
    # leaf3 reaches the fabric only through leaf1: a lateral (tier 0 -> tier 0) hop on lossless paths.
    data = _reference()
    data["switches"].append({"name": "leaf3", "nos": "sonic", "role": "leaf", "speed": "400G",
                             "asic": {"model": "spectrum4", "shared_buffer": "64MiB"}, "ports": ["Ethernet[0-4:4]"]})
    data["hosts"].append({"name": "h5", "nics": [{"netdev": "eth0", "rdma_device": "mlx5_0", "speed": "400G"}]})
    _apply(data, "links.+", {"a": "leaf3:Ethernet0", "b": "h5:eth0", "cable_length": "3m"})
    _apply(data, "links.+", {"a": "leaf3:Ethernet4", "b": "leaf1:Ethernet20", "cable_length": "3m"})
    findings = lint(parse_spec(data))
    assert {f.rule for f in findings} == {"routing.not-up-down"}
    assert any(f.evidence["hops"][:2] in (["leaf3", "leaf1"], ["leaf1", "leaf3"]) for f in findings)


def test_valley_path_detected() -> None:
    # spine3 carries a host but hangs below leaf1 only: spine3 -> leaf1 -> spine1 goes down then up.
    data = _reference()
    data["switches"].append({"name": "spine3", "nos": "eos", "role": "spine", "speed": "400G",
                             "asic": {"model": "spectrum4", "shared_buffer": "64MiB"}, "ports": ["Ethernet[1-2]"]})
    data["hosts"].append({"name": "h5", "nics": [{"netdev": "eth0", "rdma_device": "mlx5_0", "speed": "400G"}]})
    _apply(data, "links.+", {"a": "spine3:Ethernet1", "b": "h5:eth0", "cable_length": "3m"})
    _apply(data, "links.+", {"a": "spine3:Ethernet2", "b": "leaf1:Ethernet20", "cable_length": "3m"})
    findings = lint(parse_spec(data))
    assert {f.rule for f in findings} == {"routing.not-up-down"}
    assert any(f.evidence["tiers"] == [1, 0, 1] for f in findings)


def test_ring_has_cyclic_dependency() -> None:
    # Three same-tier switches in a ring with hosts on each: lateral hops and a dependency cycle.
    spec = parse_spec({
        "switches": [{"name": n, "nos": "sonic", "speed": "100G", "ports": ["Ethernet[0-8:4]"]} for n in "abcd"],
        "hosts": [{"name": f"h{n}", "nics": [{"netdev": "eth0", "speed": "100G"}]} for n in "abcd"],
        "links": [{"a": f"{n}:Ethernet0", "b": f"h{n}:eth0"} for n in "abcd"] + [
            {"a": "a:Ethernet4", "b": "b:Ethernet8"}, {"a": "b:Ethernet4", "b": "c:Ethernet8"},
            {"a": "c:Ethernet4", "b": "d:Ethernet8"}, {"a": "d:Ethernet4", "b": "a:Ethernet8"}],
    })
    findings = lint(spec)
    assert {f.rule for f in findings} == {"routing.not-up-down"}
    assert any("cycle" in f.evidence for f in findings)


def test_pfc_trigger_from_buffer_model() -> None:
    from tensorfabric.fabric.spec import AsicSpec

    # alpha = 2**dynamic_th; one congested PG may take alpha/(1+alpha) of the shared pool
    assert AsicSpec(model="spectrum4", shared_buffer=64 * 2**20).pfc_trigger_bytes() == 32 * 2**20
    assert AsicSpec(model="spectrum4", shared_buffer=60 * 2**20, dynamic_th=1).pfc_trigger_bytes() == 40 * 2**20
    assert AsicSpec(model="spectrum4", shared_buffer=64 * 2**20, xoff_threshold=10**6).pfc_trigger_bytes() == 10**6
    assert AsicSpec().pfc_trigger_bytes() is None


def test_spec_view_matches_deployed_vocabulary() -> None:
    devices, extras = deployed_from_spec(load_spec(SPECS / "reference.yaml"))
    leaf1 = devices["leaf1"]
    port = leaf1.port("Ethernet0")
    assert leaf1.kind == "switch" and port.pfc_priorities == frozenset({3})
    assert port.headroom is not None and port.headroom[3].xoff_bytes > 0
    assert leaf1.strict_queues == frozenset({6})
    h1 = devices["h1"]
    assert h1.nccl_env["NCCL_IB_TC"] == "106"
    assert h1.port("eth0").cnp_dscp == 48
    assert extras["h1:eth0"].storm_prevention_ms == 100


def test_lint_view_and_render_plan_are_one_resolution() -> None:
    """What lint expects of a switch is what render writes: the same ports, PG sizes and ECN per port."""
    from tensorfabric.fabric.plan import switch_plans

    data = _reference()
    data["switches"][0]["asic"] = {"model": "spectrum4", "shared_buffer": "64MiB", "shared_headroom_pool": True}
    # A declared port without a cable is configured by render, so lint must see it too.
    data["switches"][0]["ports"] = [*data["switches"][0]["ports"], "Ethernet40"]
    spec = parse_spec(data)
    devices, _ = deployed_from_spec(spec)
    for plan in switch_plans(spec):
        record = devices[plan.name]
        assert [p.name for p in record.ports] == [p.name for p in plan.ports]
        for port in plan.ports:
            got = record.port(port.name)
            if port.headroom is not None:
                assert got.headroom == dict.fromkeys(plan.lossless, port.headroom)
            assert got.mtu == port.mtu and got.cable_length_m == port.cable_length_m
    leaf1 = next(p for p in switch_plans(spec) if p.name == "leaf1")
    room = leaf1.ports[0].headroom
    assert room is not None and room.size_bytes == room.xon_bytes  # SHP: the PG reserves only xon
    assert "Ethernet40" in [p.name for p in devices["leaf1"].ports]
