"""Issue 27, the remaining reader items: SONiC references to entries a present table lacks are findings, a whole
Cumulus traffic.conf is judged as whole, and Arista AVD structured YAML is read."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings

from metamorphic import mutations
from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.lint import lint, lint_context, rule_status
from tensorfabric.fabric.lint.view import build_context
from tensorfabric.fabric.parsers import parse_deployed, parse_text

from .fabric_core_paths import FIXTURES

DIALECTS = FIXTURES / "dialects"
UNDEFINED = "config.undefined-reference"


def _rules(record: Deployed) -> set[str]:
    return {f.rule for f in lint(None, [record])}


# --- SONiC: an undefined reference is a finding only where the referenced table is in the text ----------------

def test_sonic_queue_naming_entries_its_tables_lack_is_a_defect_each() -> None:
    record = parse_deployed(DIALECTS / "sonic-wred-scheduler-undefined.json")
    messages = sorted(d.message for d in record.defects)
    assert len(messages) == 2
    assert any("WRED_PROFILE 'ROCE_LOSSLESS'" in m for m in messages)
    assert any("SCHEDULER 'scheduler.3'" in m for m in messages)
    assert all(d.line is not None for d in record.defects)
    assert _rules(record) == {UNDEFINED}


def test_sonic_reference_to_a_table_not_in_the_text_is_a_warning_not_a_finding() -> None:
    # The QUEUE table alone: the WRED profile and scheduler may be defined in the part not pasted.
    text = ('{"PORT_QOS_MAP": {"Ethernet0": {"pfc_enable": "3"}}, "QUEUE": {"Ethernet0|3": '
            '{"scheduler": "scheduler.1", "wred_profile": "ROCE"}}}')
    record = parse_text(text, source="queue.json")
    assert record.defects == ()
    assert record.read is not None and any("WRED_PROFILE 'ROCE'" in w for w in map(str, record.read.warnings))
    ctx = build_context(None, [record])
    status = {s.rule: s.status for s in rule_status(ctx, lint_context(ctx))}
    assert UNDEFINED not in _rules(record) and status["ecn.disabled"] == "undeterminable"


def test_sonic_port_qos_map_naming_a_missing_map_of_a_present_table() -> None:
    text = ('{"DSCP_TO_TC_MAP": {"AZURE": {"26": "3", "48": "6"}}, "TC_TO_PRIORITY_GROUP_MAP": {"AZURE": {"3": "3"}},'
            ' "PORT_QOS_MAP": {"Ethernet0": {"dscp_to_tc_map": "ROCE", "tc_to_pg_map": "ROCE", "pfc_enable": "3"}}}')
    record = parse_text(text, source="maps.json")
    targets = sorted(d.message.split(" names ")[1].split(" ")[0] for d in record.defects)
    assert targets == ["DSCP_TO_TC_MAP", "TC_TO_PRIORITY_GROUP_MAP"]
    assert UNDEFINED in _rules(record)


def test_sonic_hgetall_partial_view_never_turns_a_missing_entry_into_a_defect() -> None:
    # Keys asked one by one: WRED_PROFILE|ROCE was simply not asked for.
    text = ('admin@tor3:~$ redis-cli -n 4 hgetall "PORT_QOS_MAP|Ethernet16"\n 1) "pfc_enable"\n 2) "3"\n'
            'admin@tor3:~$ redis-cli -n 4 hgetall "QUEUE|Ethernet16|3"\n 1) "wred_profile"\n 2) "ROCE"\n'
            'admin@tor3:~$ redis-cli -n 4 hgetall "WRED_PROFILE|AZURE"\n 1) "ecn"\n 2) "ecn_all"\n'
            ' 3) "green_min_threshold"\n 4) "250000"\n 5) "green_max_threshold"\n 6) "2097152"\n')
    record = parse_text(text, source="dut.redis")
    assert record.defects == ()


# --- Cumulus traffic.conf / qos_features.conf: whole file or fragment ------------------------------------------

def _status(record: Deployed) -> dict[str, str]:
    ctx = build_context(None, [record])
    return {s.rule: s.status for s in rule_status(ctx, lint_context(ctx))}


def test_cumulus_whole_file_without_watchdog_reports_it_absent() -> None:
    record = parse_deployed(DIALECTS / "cumulus-4x-roce.traffic_conf")
    assert record.complete
    assert "pfcwd.absent" in _rules(record) and _status(record)["pfcwd.absent"] == "checked"


def test_cumulus_fragment_without_the_scheduling_section_leaves_the_watchdog_undeterminable() -> None:
    text = (DIALECTS / "cumulus-4x-roce.traffic_conf").read_text()
    cut = text.split("# scheduling algorithm")[0]  # head -n: the last section is not in the paste
    record = parse_text(cut, source="leaf.traffic_conf")
    assert not record.complete and record.port("swp1").pfc_priorities == frozenset({3})
    assert "pfcwd.absent" not in _rules(record)
    assert _status(record)["pfcwd.absent"] == "undeterminable"


def test_cumulus_watchdog_groups_are_read_per_port() -> None:
    record = parse_deployed(DIALECTS / "cumulus-5x-watchdog-some-ports.traffic_conf")
    assert record.complete
    on = record.port("swp16").watchdog
    assert on is not None and on.enabled and on.detection_ms is None
    assert record.port("swp17").watchdog is None
    findings = lint(None, [record])
    absent = sorted(f.subject.split(" port ")[1] for f in findings if f.rule == "pfcwd.absent")
    assert absent == [f"swp{n}" for n in sorted(range(17, 25), key=str)]
    info = [f for f in findings if f.rule == "pfcwd.no-timers"]
    assert info and all(f.severity == "info" and "switchd.conf" in f.message for f in info)


def test_cumulus_watchdog_group_naming_keys_of_another_name_is_a_defect() -> None:
    text = (DIALECTS / "cumulus-5x-roce-watchdog.traffic_conf").read_text().replace(
        "pfc_watchdog.port_group_list = [pfc_wd_port_group]", "pfc_watchdog.port_group_list = [pfcwd_ports]")
    record = parse_text(text, source="leaf.traffic_conf")
    assert any("pfc_watchdog.port_group_list names 'pfcwd_ports'" in d.message for d in record.defects)
    assert {UNDEFINED, "pfcwd.absent"} <= _rules(record)


# --- Arista AVD structured config ---------------------------------------------------------------------------

_AVD_PORTS = """\
ethernet_interfaces:
  - name: Ethernet7/1
    mtu: 9214
    type: routed
    service_profile: RDMA
"""


def test_avd_is_detected_by_its_keys_without_the_extension() -> None:
    record = parse_text((DIALECTS / "avd-7060x5-roce.avd.yml").read_text(), source="ai-leaf3.yml")
    assert record.format == "avd" and record.detection is not None and record.detection.format == "avd"
    assert record.complete and record.port("Ethernet1/1").pfc_priorities == frozenset({3})
    ecn = record.port("Ethernet1/1").ecn
    assert ecn is not None and ecn[3].kmin_bytes == 150_000
    wd = record.port("Ethernet2/1").watchdog
    assert wd is not None and wd.enabled and wd.detection_ms == 200 and wd.polling_ms == 100
    assert record.read is not None and not record.read.not_understood


def test_avd_fragment_naming_a_profile_it_lacks_is_undeterminable_not_an_error() -> None:
    record = parse_text(_AVD_PORTS, source="ports.yml", fmt="avd")
    assert record.defects == () and not record.complete
    assert record.read is not None and any("'RDMA' is not in this text" in str(w) for w in record.read.warnings)
    assert not [f for f in lint(None, [record]) if f.severity == "error"]


def test_avd_undefined_profile_is_a_finding_only_with_a_closed_qos_profiles_section() -> None:
    profiles = "qos_profiles:\n  - name: OTHER\n    trust: dscp\n"
    closed = parse_text(profiles + _AVD_PORTS + "router_bgp:\n  as: '65101'\n", source="x.yml", fmt="avd")
    assert UNDEFINED in _rules(closed)
    assert closed.defects[0].line == 8  # the service_profile line
    # The profiles list is the text's last key: it may continue past the cut.
    open_end = parse_text(_AVD_PORTS + profiles, source="x.yml", fmt="avd")
    assert open_end.defects == ()


def test_avd_lossless_queue_4_gets_no_false_error() -> None:
    text = (DIALECTS / "avd-7060x5-roce.avd.yml").read_text()
    for old, new in (('"26 to traffic-class 3"', '"26 to traffic-class 4"'), ("- id: 3", "- id: 4"),
                     ("- priority: 3", "- priority: 4")):
        assert old in text
        text = text.replace(old, new)
    record = parse_text(text, source="q4.avd.yml")
    assert record.port("Ethernet1/1").pfc_priorities == frozenset({4})
    assert not [f.rule for f in lint(None, [record]) if f.severity == "error"]


def test_avd_aliases_are_walked_once_and_a_cut_value_is_read_up_to_the_cut() -> None:
    bomb = "qos_profiles:\n  - &p {name: P, trust: dscp}\n" + "".join("  - *p\n" for _ in range(2000)) + _AVD_PORTS
    start = time.process_time()
    record = parse_text(bomb.replace("RDMA", "P"), source="b.yml", fmt="avd")
    assert time.process_time() - start < 2.0 and record.port("Ethernet7/1").trust == "dscp"
    cut = (DIALECTS / "avd-7060x5-roce.avd.yml").read_text().rsplit("ip_address", 1)[0] + 'ip_address: "10.'
    partial = parse_text(cut, source="cut.avd.yml")
    assert not partial.complete and partial.port("Ethernet1/1").pfc_priorities == frozenset({3})
    assert not [f for f in lint(None, [partial]) if f.severity == "error"]


_AVD_FIXTURES = sorted(p.name for p in DIALECTS.glob("avd-*.avd.yml"))


@pytest.mark.parametrize("name", _AVD_FIXTURES)
@settings(max_examples=25, deadline=None)
@given(mutate=mutations(protect=lambda line: True))
def test_avd_verdict_survives_envelopes_and_prose(name: str, mutate: Callable[[str], str]) -> None:
    # Every line protected: a YAML line deleted re-parents its children, which is another config, not a paste.
    text = (DIALECTS / name).read_text()
    whole = {(f.rule, f.severity, f.subject) for f in lint(None, [parse_text(text, source=name, device="dut")])}
    pasted = parse_text(mutate(text), source=name, device="dut")
    assert {(f.rule, f.severity, f.subject) for f in lint(None, [pasted])} == whole


def test_avd_fix_is_written_in_avd_keys() -> None:
    record = parse_deployed(DIALECTS / "avd-no-ecn-notify-only.avd.yml")
    fixes = {f.fix for f in lint(None, [record]) if f.rule == "ecn.disabled"}
    assert fixes and all(fix.startswith("qos_profiles: - uc_tx_queues: - id: 3, random_detect:") for fix in fixes)
