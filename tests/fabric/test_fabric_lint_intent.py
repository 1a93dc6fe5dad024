"""Lint judged on the config's own lossless classes (issue 27 Build 4, Acceptance 3) and the rules added with it.

A config whose lossless queue is 4, or whose RoCE DSCP is 24 under a spec that says so, gets no false error: the
rules derive DSCP -> priority -> queue -> PFC from the config (``fabric.lint.intent``) instead of assuming the
plan's priority 3.
"""

from __future__ import annotations

import json

import pytest

from tensorfabric import roce
from tensorfabric.cli.main import main
from tensorfabric.fabric.lint import RULES, lint, rule_status
from tensorfabric.fabric.lint.view import build_context
from tensorfabric.fabric.parsers import parse_deployed, parse_text
from tensorfabric.fabric.spec import load_spec

from .fabric_core_paths import FIXTURES, SPECS

DIALECTS = FIXTURES / "dialects"

QUEUE_4 = ["sonic-ecn-on-queue-4-fragment.json", "eos-lossless-queue-4-fragment.eos", "nxos-n9k-qos-group-4.nxos"]


@pytest.mark.parametrize("name", QUEUE_4)
def test_lossless_queue_4_gets_no_false_error(name: str) -> None:
    record = parse_deployed(DIALECTS / name)
    findings = lint(None, [record])
    assert [f for f in findings if f.severity == "error"] == [], [(f.rule, f.message) for f in findings]
    ctx = build_context(None, [record])
    for ref in ctx.ports("switch"):
        classes = ctx.lossless_classes(ref)
        assert classes is not None and 4 in {c.queue for c in classes}
        assert 4 in {c.queue for c in ctx.roce_intent(ref).roce}


def test_ecn_off_on_the_real_lossless_queue_is_still_found() -> None:
    # The same fragment with the WRED profile moved to queue 3: RoCE's queue (3 or 4) marks nothing on queue 4.
    text = (DIALECTS / "sonic-ecn-on-queue-4-fragment.json").read_text().replace('"wred_profile": "RDMA_ECN"',
                                                                                '"wred_profile": "NONE_ECN"')
    text = text.replace('"RDMA_ECN": {\n            "ecn": "ecn_all"', '"NONE_ECN": {\n            "ecn": "ecn_none"')
    findings = lint(None, [parse_text(text, source="x.json")])
    assert {f.rule for f in findings if f.severity == "error"} == {"ecn.disabled"}
    assert all("one of the lossless queues [3, 4]" in f.message for f in findings if f.rule == "ecn.disabled")


def test_roce_intent_follows_the_map_and_stands_in_when_it_is_unknown() -> None:
    nxos = build_context(None, [parse_deployed(DIALECTS / "nxos-n9k-qos-group-4.nxos")])
    ref = next(nxos.ports("switch"))
    intent = nxos.roce_intent(ref)
    assert intent.determined and intent.priority == 4 and [c.priority for c in intent.roce] == [4]
    assert intent.roce[0].dscps == frozenset({26})
    sonic = build_context(None, [parse_deployed(DIALECTS / "sonic-ecn-on-queue-4-fragment.json")])
    ref = next(sonic.ports("switch"))
    intent = sonic.roce_intent(ref)
    assert not intent.determined and intent.priority is None and [c.queue for c in intent.roce] == [3, 4]
    assert all(c.dscps is None and c.used is None for c in intent.roce)


def test_roce_dscp_in_a_lossy_class_is_one_finding_not_two() -> None:
    # DSCP 26 -> TC 3 without PFC, PFC and ECN on 4: R1 reports it; ECN is judged on the class the config uses.
    text = (DIALECTS / "nxos-n9k-qos-group-4.nxos").read_text().replace("class RDMA\n    set qos-group 4",
                                                                      "class RDMA\n    set qos-group 3")
    rules = {f.rule for f in lint(None, [parse_text(text, source="x.nxos")]) if f.severity == "error"}
    assert rules == {"roce.dscp-not-lossless"}


def test_roce_dscp_24_under_a_spec_that_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    path = DIALECTS / "dell-roce-dscp-24.dellsonic"
    spec = load_spec(SPECS / "roce-dscp-24.yaml")
    assert spec.qos.roce.dscp == (24,) or list(spec.qos.roce.dscp) == [24]
    assert [f for f in lint(spec, [parse_deployed(path)]) if f.severity != "info"] == []
    code = main(["fabric", "lint", "--fabric", str(SPECS / "roce-dscp-24.yaml"), "--deployed", str(path), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and [f for f in out["findings"] if f["severity"] == "error"] == []
    # Against the default plan (DSCP 26) the same config really sends RoCE to a lossy class.
    assert {f.rule for f in lint(None, [parse_deployed(path)])} == {"roce.dscp-not-lossless"}


def test_one_watchdog_advice_everywhere() -> None:
    want = f"{roce.PFCWD_DETECTION_MS} ms detection / {roce.PFCWD_RESTORATION_MS} ms restoration"
    dell = parse_deployed(DIALECTS / "dell-watchdog-no-timers.dellsonic")
    sonic = parse_deployed(DIALECTS / "sonic-pfcwd-absent.json")
    fixes = {f.rule: f.fix for f in lint(None, [dell]) + lint(None, [sonic]) if f.rule.startswith("pfcwd.")}
    assert fixes and all(str(roce.PFCWD_DETECTION_MS) in fix for fix in fixes.values()), fixes
    assert "400" not in "".join(fixes.values())
    from tensorfabric.fabric.lint.rules_watchdog import ADVICE
    assert want in ADVICE


def test_every_rule_declares_the_facts_it_needs() -> None:
    ctx = build_context(None, [parse_deployed(DIALECTS / "sonic-ecn-on-queue-4-fragment.json")])
    statuses = {s.rule: s for s in rule_status(ctx)}
    assert set(statuses) == set(RULES)


def test_eos_drop_precedence_map_line_is_read() -> None:
    text = (DIALECTS / "eos-7060x5-segments.eos").read_text().replace(
        "qos map dscp 26 to traffic-class 3", "qos map dscp 24 25 26 to traffic-class 3 drop-precedence 1")
    record = parse_text(text, source="x.eos")
    assert record.dscp_to_priority[24] == record.dscp_to_priority[26] == 3
    assert record.read is not None and record.read.not_understood == ()
    assert lint(None, [record]) == []
    bad = parse_text(text.replace("drop-precedence 1", "drop-precedence 9"), source="x.eos")
    assert bad.read is not None and any("drop-precedence" in w for w in map(str, bad.read.warnings))


def test_eos_all_off_and_an_unused_profile_are_modelled() -> None:
    off = parse_deployed(DIALECTS / "eos-pfc-all-off.eos")
    assert all(p.pfc_priorities == frozenset() for p in off.ports) and off.notes
    unused = parse_deployed(DIALECTS / "eos-pfc-profile-unused.eos")
    assert [d.message for d in unused.defects] == [
        "qos profile 'ROCE' enables PFC on priority [3] but no interface applies it: that PFC is not in force"]
    # An excerpt without interfaces is not a whole config: an unapplied profile there is only unseen.
    head = (DIALECTS / "eos-pfc-profile-unused.eos").read_text().split("interface ")[0]
    assert parse_text(head, source="x.eos").defects == ()


def test_nxos_priority_level_1_is_strict() -> None:
    text = (DIALECTS / "nxos-n3k-named-classes.nxos").read_text().replace(
        "  class type queuing CLUSTER\n    priority\n", "  class type queuing CLUSTER\n    priority level 1\n")
    record = parse_text(text, source="x.nxos")
    assert record.strict_queues == frozenset({7}) and lint(None, [record]) == []


def test_sonic_start_default_names_its_timers_as_info() -> None:
    findings = lint(None, [parse_deployed(DIALECTS / "sonic-pfcwd-start-default.json")])
    info = [f for f in findings if f.rule == "pfcwd.no-timers"]
    assert info and all(f.severity == "info" and "200 ms" in f.message for f in info)


@pytest.mark.parametrize(("name", "rule", "syntax"), [
    ("nxos-n3k-cnp-not-strict.nxos", "cnp.not-strict", "priority level 1"),
    ("nxos-n3k-no-cnp-class.nxos", "cnp.no-class", "match dscp 48"),
    ("eos-cnp-queue-not-strict.eos", "cnp.not-strict", "priority strict"),
    ("eos-watchdog-action-no-drop.eos", "pfcwd.no-drop-action", "priority-flow-control pause watchdog action drop"),
    ("eos-roce-remarked-egress.eos", "dscp.egress-rewrite", "no qos map traffic-class 3 to dscp 24"),
    ("nxos-n9k-class-mtu-1500.nxos", "mtu.lossless-class-too-small", "class type network-qos"),
    ("nxos-n9k-no-watchdog.nxos", "pfcwd.absent", "priority-flow-control watch-dog-interval on"),
    ("dell-cnp-queue-dwrr.dellsonic", "cnp.weighted", "type strict"),
    ("host-pfc-priority-unused.sh", "pfc.priority-unused", "mlnx_qos -i <netdev> --dscp2prio set,26,4"),
])
def test_fixes_are_written_in_the_dialect(name: str, rule: str, syntax: str) -> None:
    fixes = [f.fix for f in lint(None, [parse_deployed(DIALECTS / name)]) if f.rule == rule]
    assert fixes and all(syntax in fix for fix in fixes), fixes


def test_new_rules_are_undeterminable_on_fragments_not_silent() -> None:
    # The queue-4 SONiC fragment has no MTU, no DSCP map and no watchdog table.
    ctx = build_context(None, [parse_deployed(DIALECTS / "sonic-ecn-on-queue-4-fragment.json")])
    statuses = {s.rule: s for s in rule_status(ctx)}
    assert statuses["mtu.lossless-class-too-small"].status == "undeterminable"
    assert statuses["dscp.egress-rewrite"].status == "undeterminable"
    assert statuses["pfcwd.no-drop-action"].status == "undeterminable"
    assert statuses["pfc.priority-unused"].status == "not applicable"  # no host given
    assert statuses["ecn.disabled"].status == "checked"


def test_a_lossless_pg_without_a_profile_is_found_and_dynamic_null_is_not() -> None:
    unbound = lint(None, [parse_deployed(DIALECTS / "sonic-lossless-pg-unbound.json")])
    assert {(f.rule, f.evidence["pg"]) for f in unbound} == {("buffer.lossless-pg-unbound", 4)}
    # SONiC's dynamic buffer model binds lossless PGs to "NULL" and lets buffermgrd size them: bound, not missing.
    stock = lint(None, [parse_deployed(FIXTURES / "deployed" / "stock-leaf.json")])
    assert "buffer.lossless-pg-unbound" not in {f.rule for f in stock}


def test_eos_profile_watchdog_port_lines_override_the_defaults() -> None:
    # AVD renders per-profile watchdog lines: "port action" and "port timer ... polling-interval auto ... forced".
    text = (DIALECTS / "eos-7060x5-segments.eos").read_text().replace(
        "   priority-flow-control pause watchdog\n",
        "   priority-flow-control pause watchdog\n   priority-flow-control pause watchdog port action no-drop\n"
        "   priority-flow-control pause watchdog port timer timeout 0.05 polling-interval auto recovery-time 1.11 "
        "forced\n")
    record = parse_text(text, source="x.eos")
    wd = record.port("Ethernet1/1").watchdog
    assert wd is not None and (wd.action, wd.detection_ms, wd.restoration_ms, wd.polling_ms) == (
        "no-drop", 50.0, 1110.0, 25.0)
    assert record.read is not None and record.read.not_understood == ()
    assert {f.rule for f in lint(None, [record])} == {"pfcwd.no-drop-action"}


def test_unbound_pg_is_undeterminable_under_the_dynamic_buffer_model() -> None:
    ctx = build_context(None, [parse_deployed(FIXTURES / "deployed" / "stock-leaf.json")])
    status = {s.rule: s for s in rule_status(ctx)}["buffer.lossless-pg-unbound"]
    assert status.status == "undeterminable" and status.missing == ("explicit lossless buffer profiles",)


def test_spec_defaults_and_renderers_take_the_watchdog_and_ecn_facts_from_roce() -> None:
    from tensorfabric.fabric.spec.qos import EcnProfile, WatchdogPlan

    wd = WatchdogPlan()
    assert (wd.detection_ms, wd.restoration_ms, wd.poll_ms, wd.action) == (
        roce.PFCWD_DETECTION_MS, roce.PFCWD_RESTORATION_MS, roce.PFCWD_POLL_MS, roce.PFCWD_ACTION)
    ecn = EcnProfile()
    assert (ecn.kmin, ecn.kmax, ecn.pmax) == (roce.ECN_KMIN_BYTES, roce.ECN_KMAX_BYTES, roce.ECN_PMAX_PERCENT)
