"""Dell OS10, Onyx / MLNX-OS and the Junos ``set`` form: what each reader takes from a config in the platform's own
syntax, which lint rule fires on each deviating fixture, and how detection tells them from their look-alikes."""

from __future__ import annotations

import pytest

from tensorfabric.fabric.deployed import EcnProfile, Watchdog
from tensorfabric.fabric.lint import lint
from tensorfabric.fabric.parsers import detect, parse_deployed, parse_text

from .fabric_core_paths import FIXTURES

DIALECTS = FIXTURES / "dialects"


def _errors(name: str) -> set[str]:
    return {f.rule for f in lint(None, [parse_deployed(DIALECTS / name)]) if f.severity == "error"}


# Each deviating fixture and the error rules it must fire (and no other error).
FIRES = {
    "os10-s5248-roce.os10": set(),
    "os10-s4148-dot1p-routed.os10": {"trust.pcp-on-routed", "ecn.disabled"},
    "os10-z9432-roce-lossy-dscp.os10": {"roce.dscp-not-lossless", "cnp.weighted"},
    "os10-wred-undefined-no-cnp.os10": {"config.undefined-reference", "cnp.no-class", "ecn.disabled"},
    "onyx-sn2700-roce.onyx": set(),
    "onyx-roce-oneliner.onyx": set(),
    "onyx-trust-l2-routed.onyx": {"trust.pcp-on-routed", "ecn.disabled"},
    "onyx-roce-lossy-pool.onyx": {"roce.lossy-pool", "cnp.weighted"},
    "onyx-pfc-priority-4.onyx": {"roce.dscp-not-lossless"},
}


@pytest.mark.parametrize("name", sorted(FIRES))
def test_each_fixture_fires_exactly_its_rules(name: str) -> None:
    assert _errors(name) == FIRES[name]


def test_os10_reads_trust_maps_policies_and_wred() -> None:
    d = parse_deployed(DIALECTS / "os10-s5248-roce.os10")
    assert (d.device, d.format, d.complete) == ("os10-leaf07", "dell-os10", True)
    assert d.detection is not None and d.detection.runner_up == "nxos"
    port = d.port("Ethernet1/1/3")
    assert port.dscp_to_priority is not None and port.dscp_to_priority[26] == 3 and port.dscp_to_priority[48] == 6
    assert port.trust == "dscp" and port.routed and port.mtu == 9216 and port.pfc_priorities == frozenset({3})
    assert port.ecn == {3: EcnProfile(160, 1600, 10.0, True, unit="kbytes")}
    assert port.strict_queues == frozenset({6}) and port.queue_weights == {0: 40, 3: 60}
    assert d.priority_to_queue[3] == 3 and d.priority_to_queue[7] == 0
    assert [p.name for p in d.ports] == [f"Ethernet1/1/{n}" for n in (1, 2, 3, 4, 49)]  # mgmt1/1/1 is not a port


def test_os10_breakouts_and_dot1p_trust() -> None:
    d = parse_deployed(DIALECTS / "os10-z9432-roce-lossy-dscp.os10")
    assert [p.name for p in d.ports] == ["Ethernet1/1/1:1", "Ethernet1/1/2:1"]
    assert d.port("Ethernet1/1/1:1").dscp_to_priority == d.dscp_to_priority and d.dscp_to_priority[26] == 2
    pcp = parse_deployed(DIALECTS / "os10-s4148-dot1p-routed.os10").port("Ethernet1/1/10")
    assert pcp.trust == "pcp" and not pcp.dscp_to_priority and pcp.ecn == {} and pcp.queue_weights == {
        0: 48, 3: 50, 5: 2}


def test_os10_fragment_leaves_references_unknown() -> None:
    text = ("interface ethernet1/1/7\n no switchport\n priority-flow-control mode on\n"
            " service-policy input type network-qos PFC_IN\n service-policy output type queuing ETS_OUT\n")
    d = parse_text(text, source="leaf.os10")
    port = d.port("Ethernet1/1/7")
    assert port.pfc_priorities is None and port.ecn is None and not d.defects  # defined outside the excerpt
    assert d.read is not None and len(d.read.warnings) == 2
    assert not {f.rule for f in lint(None, [d]) if f.severity == "error"}


def test_os10_trust_map_default_is_the_builtin_table() -> None:
    d = parse_text("system qos\n trust-map dscp default\n!\n", source="x.os10")
    assert d.default_dscp_map and d.dscp_to_priority[26] == 3 and d.dscp_to_priority[48] == 6


def test_onyx_reads_one_liners_per_port() -> None:
    d = parse_deployed(DIALECTS / "onyx-sn2700-roce.onyx")
    assert (d.device, d.format, d.complete) == ("sn2700-rack4", "onyx", True)
    assert len(d.ports) == 18
    port = d.port("Ethernet1/31")
    assert port.trust == "dscp" and port.routed and port.mtu == 9216 and port.pfc_priorities == frozenset({3})
    assert port.ecn == {3: EcnProfile(150, 1500, 100.0, True, unit="kbytes")}
    assert port.strict_queues == frozenset({6}) and port.watchdog == Watchdog(True)
    assert port.dscp_to_priority is not None and port.dscp_to_priority[26] == 3


def test_onyx_split_ports_prompts_and_the_roce_preset() -> None:
    d = parse_deployed(DIALECTS / "onyx-roce-oneliner.onyx")
    assert [p.name for p in d.ports] == [f"Ethernet1/1/{n}" for n in range(1, 5)]
    port = d.port("Ethernet1/1/2")
    assert port.trust == "dscp" and port.pfc_priorities == frozenset({3}) and port.strict_queues == frozenset({6})
    assert any("roce" in note for note in d.notes)
    transcript = parse_deployed(DIALECTS / "onyx-pfc-priority-4.onyx")
    assert transcript.port("Ethernet1/2").pfc_priorities == frozenset({4})
    lossy = parse_deployed(DIALECTS / "onyx-roce-lossy-pool.onyx").port("Ethernet1/4")
    assert lossy.lossy_pgs == frozenset({3}) and lossy.queue_weights == {6: 10}


def test_onyx_fragment_is_not_judged_as_a_whole_config() -> None:
    d = parse_text("interface ethernet 1/1 qos trust L3\nhostname sw9\n", source="x.onyx")
    assert not d.complete and d.port("Ethernet1/1").ecn is None and d.port("Ethernet1/1").strict_queues is None


@pytest.mark.parametrize(("name", "fmt"), [("os10-s5248-roce.os10", "dell-os10"),
                                           ("onyx-sn2700-roce.onyx", "onyx")])
def test_detection_by_content(name: str, fmt: str) -> None:
    assert detect((DIALECTS / name).read_text(), source="pasted.txt").format == fmt
