"""Dell OS10, Onyx / MLNX-OS and the Junos ``set`` form: what each reader takes from a config in the platform's own
syntax, which lint rule fires on each deviating fixture, and how detection tells them from their look-alikes."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metamorphic import mutations
from tensorfabric.errors import ParseError
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
    "junos-set-qfx5240-roce.junos": set(),
    "junos-set-lossy-no-ecn.junos": {"roce.dscp-not-lossless", "ecn.disabled"},
    "junos-set-edit-banner-cnp-weighted.junos": {"cnp.weighted"},
    "os10-dscp-twice-three-lossless.os10": {"dscp.conflict", "pfc.too-many-lossless", "ecn.thresholds",
                                            "cnp.not-strict"},
    "onyx-cnp-not-strict-ecn-inverted.onyx": {"cnp.not-strict", "ecn.thresholds", "pfc.too-many-lossless"},
    "junos-set-cnp-best-effort-ecn-inverted.junos": {"cnp.no-class", "ecn.thresholds"},
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


def test_os10_transcript_with_a_qos_policy() -> None:
    text = ("OS10# configure terminal\n"
            "OS10(config)# class-map type qos match-any ROCE\n"
            "OS10(config-cmap-qos)# match ip dscp 24-31\n"
            "OS10(config-cmap-qos)# exit\n"
            "OS10(config)# class-map type qos match-any CNP\n"
            "OS10(config-cmap-qos)# match ip dscp 48\n"
            "OS10(config)# policy-map type qos CLASSIFY\n"
            "OS10(config-pmap-qos)# class ROCE\n"
            "OS10(config-pmap-c-qos)# set qos-group 3\n"
            "OS10(config-pmap-c-qos)# exit\n"
            "OS10(config-pmap-qos)# class CNP\n"
            "OS10(config-pmap-c-qos)# set qos-group 6\n"
            "OS10(config)# interface ethernet 1/1/3\n"
            "OS10(conf-if-eth1/1/3)# service-policy input type qos CLASSIFY\n"
            "OS10(conf-if-eth1/1/3)# priority-flow-control mode on\n"
            "OS10(conf-if-eth1/1/3)# do commit\n")
    d = parse_text(text, source="pasted.txt")
    assert d.format == "dell-os10"
    port = d.port("Ethernet1/1/3")
    assert port.trust == "dscp" and port.dscp_to_priority == {**dict.fromkeys(range(24, 32), 3), 48: 6}
    assert port.pfc_priorities is None  # mode on, but the network-qos policy is not in the excerpt


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


def test_onyx_interface_mode_blocks_and_prompts() -> None:
    text = ("switch (config) # interface ethernet 1/5\n"
            "switch (config interface ethernet 1/5) # dcb priority-flow-control mode on force\n"
            "switch (config interface ethernet 1/5) # qos trust L3\n"
            "switch (config interface ethernet 1/5) # exit\n"
            "switch (config) # dcb priority-flow-control enable force\n"
            "switch (config) # dcb priority-flow-control priority 3 enable\n"
            "interface ethernet 1/7\n"
            "  traffic-class 3 congestion-control both minimum-absolute 150 maximum-absolute 1500\n"
            "  dcb priority-flow-control mode on force\n"
            "interface ethernet 1/9 no dcb priority-flow-control mode force\n")
    d = parse_text(text, source="pasted.txt")
    assert d.format == "onyx" and d.read is not None and not d.read.not_understood
    assert d.port("Ethernet1/5").trust == "dscp" and d.port("Ethernet1/5").pfc_priorities == frozenset({3})
    seven = d.port("Ethernet1/7")
    assert seven.trust is None and seven.pfc_priorities == frozenset({3})
    assert seven.ecn == {3: EcnProfile(150, 1500, 100.0, True, unit="kbytes")}  # 'both': marks ECN-capable packets
    assert d.port("Ethernet1/9").pfc_priorities == frozenset()


def test_onyx_fragment_is_not_judged_as_a_whole_config() -> None:
    d = parse_text("interface ethernet 1/1 qos trust L3\nhostname sw9\n", source="x.onyx")
    assert not d.complete and d.port("Ethernet1/1").ecn is None and d.port("Ethernet1/1").strict_queues is None


@pytest.mark.parametrize(("name", "fmt"), [("os10-s5248-roce.os10", "dell-os10"),
                                           ("onyx-sn2700-roce.onyx", "onyx")])
def test_detection_by_content(name: str, fmt: str) -> None:
    assert detect((DIALECTS / name).read_text(), source="pasted.txt").format == fmt


def test_junos_set_form_reads_as_the_brace_form_does() -> None:
    brace = parse_deployed(DIALECTS / "junos-qfx5240-roce.junos")
    flat = parse_deployed(DIALECTS / "junos-set-qfx5240-roce.junos")
    assert (flat.format, flat.device, flat.complete) == ("junos", "qfx-leaf9", True)
    for field in ("dscp_to_priority", "priority_to_queue", "pfc_priorities", "ecn", "strict_queues",
                  "queue_weights", "trust"):
        assert getattr(flat, field) == getattr(brace, field), field
    assert flat.watchdog == Watchdog(True, 200.0, 400.0, "drop", 100.0)
    port = flat.port("et-0/0/9")
    assert port.routed and port.mtu == 9216 and port.pfc_priorities == frozenset({3})


def test_junos_set_lines_that_split_one_statement_are_joined() -> None:
    d = parse_deployed(DIALECTS / "junos-set-edit-banner-cnp-weighted.junos")
    port = d.port("et-0/0/12")
    assert port.pfc_priorities == frozenset({3}) and d.priority_to_queue == {3: 3, 5: 5}  # no-loss on its own line
    assert port.ecn == {3: EcnProfile(30, 90, 100.0, True, unit="percent")}  # fill-level/drop-probability pairs
    assert port.queue_weights == {3: 60, 5: 5} and port.strict_queues == frozenset()
    assert d.read is not None and not d.read.not_understood


def test_junos_set_and_brace_lines_in_one_paste() -> None:
    whole = (DIALECTS / "junos-qfx5240-roce.junos").read_text()
    cut = whole[: whole.index("    scheduler-maps {")] + "}\n"
    extra = ("set class-of-service scheduler-maps roce-sm forwarding-class CNP scheduler cnp-sched\n"
             "set class-of-service scheduler-maps roce-sm forwarding-class NO-LOSS scheduler roce-sched\n"
             "set class-of-service schedulers roce-sched transmit-rate percent 50\n"
             "set class-of-service schedulers cnp-sched priority strict-high\n")
    d = parse_text(cut + extra, source="x.junos")
    assert d.strict_queues == frozenset({3}) and d.queue_weights == {4: 50}


def test_dell_sonic_flat_paste_is_detected_as_dell_sonic() -> None:
    text = (FIXTURES / "deployed" / "dell-sonic-cli-flat.dellsonic").read_text()
    d = parse_text(text, source="pasted.txt")
    assert d.format == "dell-sonic" and d.detection is not None and d.detection.how == "content"
    assert d.port("Eth1/9").pfc_priorities == frozenset({3})


def test_format_dell_sonic_on_an_os10_file_names_os10() -> None:
    text = (DIALECTS / "os10-s5248-roce.os10").read_text()
    with pytest.raises(ParseError, match="dell-os10"):
        parse_text(text, source="pasted.txt", fmt="dell-sonic")


_OURS = sorted(FIRES)


@settings(max_examples=25, deadline=None)
@given(index=st.integers(0, len(_OURS) - 1), mutate=mutations(protect=lambda line: True))
def test_the_verdict_survives_how_the_config_was_pasted(index: int, mutate: Callable[[str], str]) -> None:
    # Every line protected: the mutations wrap, fence and interleave prose, never delete a statement.
    name = _OURS[index]
    text = (DIALECTS / name).read_text()
    record = parse_text(mutate(text), source=name, device="dut")
    want = parse_text(text, source=name, device="dut")
    assert record.format == want.format
    assert {(f.rule, f.subject) for f in lint(None, [record])} == {(f.rule, f.subject) for f in lint(None, [want])}


@pytest.mark.parametrize(("name", "rule", "fix"), [
    ("onyx-trust-l2-routed.onyx", "ecn.disabled", "traffic-class 3 congestion-control ecn minimum-absolute"),
    ("onyx-cnp-not-strict-ecn-inverted.onyx", "cnp.not-strict", "traffic-class 6 dcb ets strict"),
    ("os10-s4148-dot1p-routed.os10", "ecn.disabled", "random-detect color green minimum-threshold"),
    ("os10-dscp-twice-three-lossless.os10", "cnp.not-strict", "priority (and no bandwidth percent)"),
])
def test_fixes_are_written_in_the_dialect(name: str, rule: str, fix: str) -> None:
    found = [f for f in lint(None, [parse_deployed(DIALECTS / name)]) if f.rule == rule]
    assert found and all(fix in f.fix for f in found), [f.fix for f in found]
