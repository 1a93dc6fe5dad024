"""``fabric lint --deployed`` on configs written in each platform's own syntax (tests/fixtures/fabric/dialects).

One table says, per fixture, which rules must fire (and nothing else): recipe-following configs fire no error,
each deviation of the lossless checklist fires on the fixture that has it, and no valid config exits 2. A second
table applies one minimal edit to a recipe fixture and expects exactly the rule the edit breaks.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.errors import ParseError
from tensorfabric.fabric.lint import RULES, lint, lint_context
from tensorfabric.fabric.lint.view import build_context
from tensorfabric.fabric.parsers import parse_deployed, parse_text

from .fabric_core_paths import FIXTURES

DIALECTS = FIXTURES / "dialects"
DEPLOYED = FIXTURES / "deployed"

# fixture -> (format it must be read as, every rule it must fire). An empty set is a recipe-following config.
EXPECTED: dict[str, tuple[str, set[str]]] = {
    # SONiC config_db.json
    "sonic-sn4600-recipe.json": ("sonic", set()),
    "sonic-multiasic-namespaces.json": ("sonic", set()),
    "sonic-chassis-asic-keys.json": ("sonic", set()),
    "sonic-fragment-dscp-pfc.json": ("sonic", set()),
    "sonic-fragment-queues-no-wred.json": ("sonic", set()),
    "sonic-ecn-step-profile.json": ("sonic", set()),
    "sonic-ecn-on-queue-4-fragment.json": ("sonic", set()),  # PFC on 3 and 4, ECN on 4: RoCE's queue is 4
    "sonic-lossless-pg-unbound.json": ("sonic", {"buffer.lossless-pg-unbound"}),  # PFC on 4, PG 4 in no BUFFER_PG
    "sonic-pfcwd-start-default.json": ("sonic", {"pfcwd.no-timers"}),
    "sonic-pfcwd-absent.json": ("sonic", {"pfcwd.absent"}),
    "sonic-dscp-listed-twice.json": ("sonic", {"dscp.conflict"}),
    "sonic-roce-pg-lossy-profile.json": ("sonic", {"roce.lossy-pool"}),
    "sonic-cnp-queue-dwrr.json": ("sonic", {"cnp.weighted"}),
    "sonic-dot1p-on-routed-ports.json": ("sonic", {"trust.pcp-on-routed"}),
    # SONiC's stock AZURE template: DSCP 26 is lossy, CNPs share DWRR, the watchdog is off on Ethernet4
    "stock-leaf.json": ("sonic", {"roce.dscp-not-lossless", "cnp.weighted", "pfcwd.off"}),
    # SONiC Redis dumps (flat "TABLE|key"), hgetall transcripts, config_db per namespace, VOQ linecard keys
    "sonic-db-dump-roce.json": ("sonic", set()),
    "sonic-redis-dump-flat-ecn-none.json": ("sonic", {"ecn.disabled"}),
    "sonic-hgetall-roce.redis": ("sonic-redis", set()),
    "sonic-hgetall-pfc-on-4.redis": ("sonic-redis", {"roce.dscp-not-lossless", "pfc.non-default-priority"}),
    "sonic-multiasic-cat-config-dbs.json": ("sonic", set()),
    "sonic-multiasic-backend-pfc-off.json": ("sonic", {"roce.dscp-not-lossless"}),
    "sonic-voq-linecard-keys.json": ("sonic", set()),
    # a QUEUE naming a WRED profile and a scheduler the whole config_db's tables do not define
    "sonic-wred-scheduler-undefined.json": ("sonic", {"config.undefined-reference"}),
    # Arista AVD structured config (YAML that eos_cli_config_gen renders into EOS)
    "avd-7060x5-roce.avd.yml": ("avd", set()),
    "avd-dscp-lossy-profile-typo.avd.yml": ("avd", {"roce.dscp-not-lossless", "config.undefined-reference"}),
    "avd-no-ecn-notify-only.avd.yml": ("avd", {"ecn.disabled", "pfcwd.settings"}),
    # Cisco NX-OS, Nexus 9000 and Nexus 3000 styles
    "nxos-n9k-recipe.nxos": ("nxos", set()),
    "nxos-n3k-named-classes.nxos": ("nxos", set()),
    "nxos-fragment-interface.nxos": ("nxos", set()),
    "nxos-n9k-qos-group-4.nxos": ("nxos", {"pfc.non-default-priority"}),
    "nxos-n9k-cos-only-routed.nxos": ("nxos", {"trust.pcp-on-routed"}),
    "nxos-n9k-dscp-in-two-classes.nxos": ("nxos", {"dscp.conflict"}),
    "nxos-n3k-no-hysteresis.nxos": ("nxos", {"pfc.no-hysteresis"}),
    "nxos-n3k-cnp-bandwidth-percent.nxos": ("nxos", {"cnp.weighted"}),
    "nxos-n3k-no-cnp-class.nxos": ("nxos", {"cnp.no-class"}),
    "nxos-n3k-cnp-not-strict.nxos": ("nxos", {"cnp.not-strict"}),
    "nxos-n9k-no-watchdog.nxos": ("nxos", {"pfcwd.absent", "pfc.non-default-priority"}),
    "nxos-n9k-class-mtu-1500.nxos": ("nxos", {"mtu.lossless-class-too-small", "pfc.non-default-priority"}),
    "nxos-n9k-queuing-policy-undefined.nxos": ("nxos", {"config.undefined-reference", "pfc.non-default-priority"}),
    # Arista EOS
    "eos-7060x5-segments.eos": ("eos", set()),
    "eos-default-map-rewrite.eos": ("eos", set()),
    "eos-lossless-queue-4-fragment.eos": ("eos", set()),
    "eos-lossless-priority-4.eos": ("eos", {"pfc.non-default-priority"}),
    "eos-cnp-queue-not-strict.eos": ("eos", {"cnp.not-strict"}),
    "eos-watchdog-no-timers.eos": ("eos", {"pfcwd.no-timers"}),
    "eos-trust-cos-routed.eos": ("eos", {"trust.pcp-on-routed"}),
    "eos-watchdog-action-no-drop.eos": ("eos", {"pfcwd.no-drop-action"}),
    "eos-pfc-all-off.eos": ("eos", {"roce.dscp-not-lossless"}),
    # the ports apply a profile without queues: no ECN and no strict CNP queue follow from the unused one
    "eos-pfc-profile-unused.eos": ("eos", {"config.undefined-reference", "ecn.disabled", "cnp.not-strict"}),
    "eos-roce-remarked-egress.eos": ("eos", {"dscp.egress-rewrite"}),
    "eos-no-watchdog.eos": ("eos", {"pfcwd.absent"}),
    # Cumulus Linux: traffic.conf / qos_features.conf, NVUE transcripts, nv show qos roce
    # whole files (classification through scheduling) without a pfc_watchdog group: no watchdog on their ports
    "cumulus-4x-roce.traffic_conf": ("cumulus-datapath", {"pfcwd.absent"}),
    "cumulus-5x-qos_features.traffic_conf": ("cumulus-datapath", {"pfcwd.absent"}),
    "cumulus-4x-xon-delta-zero.traffic_conf": ("cumulus-datapath", {"pfc.no-hysteresis", "pfcwd.absent"}),
    "cumulus-4x-dscp-two-cos.traffic_conf": ("cumulus-datapath", {"dscp.conflict", "pfcwd.absent"}),
    "cumulus-5x-roce-watchdog.traffic_conf": ("cumulus-datapath", {"pfcwd.no-timers"}),  # switchd.conf timers: info
    "cumulus-5x-watchdog-some-ports.traffic_conf": ("cumulus-datapath", {"pfcwd.absent", "pfcwd.no-timers"}),
    "cumulus-5x-nvue-transcript.nvue": ("nvue", set()),
    "cl5-leaf2-roce.nvshow": ("nvue-show", set()),
    "cl5-leaf3-lossy-mode.nvshow": ("nvue-show", {"roce.dscp-not-lossless"}),
    "cl5-leaf4-cnp-dwrr.nvshow": ("nvue-show", {"cnp.weighted"}),
    # nv show interface IF qos roce status: only the RoCE and CNP rows, the platform's table for the rest
    "cl5-swp9-roce-status.nvshow": ("nvue-show", set()),
    "cl5-swp21-cnp-dwrr-status.nvshow": ("nvue-show", {"cnp.weighted"}),
    # NVUE trees: /etc/nvue.d/startup.yaml and nv config show -o json, read into the nv set model
    "nvue-startup-roce.yaml": ("nvue-yaml", set()),
    "nvue-startup-dscp-moved.yaml": ("nvue-yaml", {"roce.dscp-not-lossless"}),
    "nvue-config-show-roce.json": ("nvue-yaml", set()),
    "nvue-config-show-lossy-mode.json": ("nvue-yaml", {"roce.dscp-not-lossless"}),
    # nv set qos traffic-pool roce-lossy switch-priority 3: RoCE's PFC priority in a lossy buffer pool
    "cumulus-5x-roce-pool-lossy.nvue": ("nvue", {"roce.lossy-pool"}),
    # Dell Enterprise SONiC CLI
    "dell-z9664-roce.dellsonic": ("dell-sonic", set()),
    "dell-fragment-maps.dellsonic": ("dell-sonic", set()),
    # RoCE marked DSCP 24: lossy under the default plan (DSCP 26); clean under specs/roce-dscp-24.yaml
    "dell-roce-dscp-24.dellsonic": ("dell-sonic", {"roce.dscp-not-lossless"}),
    "dell-cnp-queue-dwrr.dellsonic": ("dell-sonic", {"cnp.weighted"}),
    "dell-watchdog-no-timers.dellsonic": ("dell-sonic", {"pfcwd.no-timers"}),
    "dell-wred-policy-undefined.dellsonic": ("dell-sonic", {"config.undefined-reference"}),
    "dell-scheduler-policy-undefined.dellsonic": ("dell-sonic", {"config.undefined-reference"}),
    # host set-up scripts: doRoCE steps with an explicit DSCP map, and PFC moved off the priority DSCP 26 uses
    "host-doroce-dscp-map.sh": ("host-script", set()),
    "host-pfc-priority-unused.sh": ("host-script", {"pfc.priority-unused", "roce.dscp-not-lossless", "ecn.disabled",
                                                    "pfc.non-default-priority"}),
    # Junos class-of-service: PFC priority 3 on queue 4 is legal
    "junos-qfx5240-roce.junos": ("junos", {"pfcwd.no-timers"}),
    "junos-qfx5230-watchdog-timers.junos": ("junos", set()),
    "junos-no-cnp-code-point.junos": ("junos", {"cnp.no-class", "pfcwd.no-timers"}),
    "junos-pcp-on-routed.junos": ("junos", {"trust.pcp-on-routed", "pfcwd.no-timers"}),
    "junos-cnp-transmit-rate.junos": ("junos", {"cnp.weighted", "pfcwd.no-timers"}),
    # Junos set form (display set, commands at a prompt after an [edit class-of-service] banner)
    "junos-set-qfx5240-roce.junos": ("junos", set()),
    "junos-set-lossy-no-ecn.junos": ("junos", {"ecn.disabled", "roce.dscp-not-lossless"}),
    "junos-set-edit-banner-cnp-weighted.junos": ("junos", {"cnp.weighted", "pfcwd.no-timers"}),
    "junos-set-cnp-best-effort-ecn-inverted.junos": ("junos", {"cnp.no-class", "ecn.thresholds"}),
    # Dell OS10 (no OS10 watchdog is modelled: a whole config gets pfcwd.absent)
    "os10-s5248-roce.os10": ("dell-os10", {"pfcwd.absent"}),
    "os10-s4148-dot1p-routed.os10": ("dell-os10", {"ecn.disabled", "pfcwd.absent", "trust.pcp-on-routed"}),
    "os10-z9432-roce-lossy-dscp.os10": ("dell-os10", {"cnp.weighted", "pfcwd.absent", "roce.dscp-not-lossless"}),
    "os10-wred-undefined-no-cnp.os10": ("dell-os10", {"cnp.no-class", "config.undefined-reference", "ecn.disabled",
                                                      "pfcwd.absent"}),
    "os10-dscp-twice-three-lossless.os10": ("dell-os10", {"cnp.not-strict", "dscp.conflict", "ecn.thresholds",
                                                          "pfc.too-many-lossless", "pfcwd.absent"}),
    # Onyx / MLNX-OS one-liners
    "onyx-sn2700-roce.onyx": ("onyx", {"pfcwd.no-timers"}),
    "onyx-roce-oneliner.onyx": ("onyx", set()),
    "onyx-trust-l2-routed.onyx": ("onyx", {"ecn.disabled", "pfcwd.absent", "trust.pcp-on-routed"}),
    "onyx-roce-lossy-pool.onyx": ("onyx", {"cnp.weighted", "pfcwd.no-timers", "roce.lossy-pool"}),
    "onyx-pfc-priority-4.onyx": ("onyx", {"pfc.non-default-priority", "roce.dscp-not-lossless"}),
    "onyx-cnp-not-strict-ecn-inverted.onyx": ("onyx", {"cnp.not-strict", "ecn.thresholds", "pfc.too-many-lossless",
                                                       "pfcwd.no-timers"}),
}
# The deviations of issue 13 item 2 (ECN step profiles are the one that must *not* fire, see sonic-ecn-step).
DEVIATIONS = {"trust.pcp-on-routed", "cnp.no-class", "cnp.not-strict", "cnp.weighted", "dscp.conflict",
              "roce.dscp-not-lossless", "roce.lossy-pool", "pfc.non-default-priority", "pfcwd.no-timers",
              "pfcwd.absent", "pfc.no-hysteresis", "pfcwd.no-drop-action", "dscp.egress-rewrite",
              "mtu.lossless-class-too-small", "pfc.priority-unused", "config.undefined-reference",
              "buffer.lossless-pg-unbound"}


def _path(name: str) -> Path:
    return DIALECTS / name if (DIALECTS / name).exists() else DEPLOYED / name


def test_every_dialect_fixture_is_in_the_table() -> None:
    assert {p.name for p in DIALECTS.iterdir()} <= set(EXPECTED)
    assert len(EXPECTED) >= 30


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_lint_deployed_on_real_dialects(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    fmt, rules = EXPECTED[name]
    assert parse_deployed(_path(name)).format == fmt
    code = main(["fabric", "lint", "--deployed", str(_path(name)), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 1), err  # a valid config never exits 2
    findings = json.loads(out)["findings"]
    assert {f["rule"] for f in findings} == rules, [(f["rule"], f["subject"], f["message"]) for f in findings]
    errors = [f for f in findings if f["severity"] == "error"]
    assert code == (1 if errors else 0)
    if not rules:
        assert not errors


def test_every_deviation_is_found_on_a_fixture() -> None:
    found = set().union(*(rules for _, rules in EXPECTED.values()))
    assert found >= DEVIATIONS


def test_explicit_format_reads_what_sniffing_reads(capsys: pytest.CaptureFixture[str]) -> None:
    path = DIALECTS / "junos-qfx5240-roce.junos"
    assert main(["fabric", "lint", "--deployed", str(path), "--format", "junos", "--json"]) == 0
    capsys.readouterr()
    assert main(["fabric", "lint", "--deployed", str(path), "--format", "eos"]) == 2
    assert main(["fabric", "lint", "--deployed", str(path), "--format", "vyos"]) == 2
    _, err = capsys.readouterr()
    assert "'vyos' is not one of" in err and "junos" in err and "Traceback" not in err


def test_sniffing_refuses_a_record_it_understood_nothing_of() -> None:
    # NX-OS markers, but nothing it can check: refused, not an empty record that lints clean.
    with pytest.raises(ParseError, match="no NX-OS QoS"):
        parse_text("! system qos is configured elsewhere\nhostname x\n", source="x.cfg")
    with pytest.raises(ParseError, match="found nothing a lint rule can check"):
        parse_text("nv set system hostname leaf1\n", source="leaf1.cfg")


# (fixture, text to replace, replacement, the one rule the edit must fire); each starts from a recipe fixture.
EDITS: list[tuple[str, str, str, str]] = [
    ("sonic-sn4600-recipe.json", '"Ethernet0,Ethernet4|3": {"profile": "pg_lossless_100000_5m_profile"}',
     '"Ethernet0,Ethernet4|3": {"profile": "ingress_lossy_profile"}', "roce.lossy-pool"),
    ("sonic-sn4600-recipe.json", '"Ethernet0,Ethernet4|6": {"scheduler": "scheduler.strict"}',
     '"Ethernet0,Ethernet4|6": {"scheduler": "scheduler.0"}', "cnp.weighted"),
    ("sonic-sn4600-recipe.json", '"46": "5", "48": "6"', '"46": "5"', "cnp.no-class"),
    ("sonic-sn4600-recipe.json", '"26": "3", "34": "0"', '"26": "3", "34": "0", "26": "3", "26": "6"',
     "dscp.conflict"),
    ("sonic-sn4600-recipe.json", '"detection_time": "200", ', "", "pfcwd.no-timers"),
    ("sonic-sn4600-recipe.json", '"green_min_threshold": "150000", "green_max_threshold": "1500000"',
     '"green_min_threshold": "1500000", "green_max_threshold": "150000"', "ecn.thresholds"),
    ("nxos-n9k-recipe.nxos", "  match dscp 26\nclass-map type qos match-all CNP\n  match dscp 48\n",
     "  match cos 3\nclass-map type qos match-all CNP\n  match cos 7\n", "trust.pcp-on-routed"),
    ("nxos-n3k-named-classes.nxos", "resume-threshold 34320", "resume-threshold 46800", "pfc.no-hysteresis"),
    ("nxos-n3k-named-classes.nxos", "    priority\n", "    bandwidth percent 5\n", "cnp.weighted"),
    ("dell-z9664-roce.dellsonic", " priority-flow-control watchdog on detect-time 200\n", "", "pfcwd.absent"),
    ("eos-7060x5-segments.eos", "qos map dscp 26 to traffic-class 3", "qos map dscp 26 to traffic-class 1",
     "roce.dscp-not-lossless"),
    ("cumulus-4x-roce.traffic_conf", "pfc.roce_pfc.xon_delta = 2000", "pfc.roce_pfc.xon_delta = 0",
     "pfc.no-hysteresis"),
    ("cumulus-4x-roce.traffic_conf", "priority_group.control.weight = 0", "priority_group.control.weight = 8",
     "cnp.weighted"),
    ("cumulus-4x-roce.traffic_conf", "ecn_red.port_group_list = [roce_ecn]", "ecn_red.port_group_list = [ROCE_ECN]",
     "config.undefined-reference"),
    ("dell-z9664-roce.dellsonic", " dscp 48 traffic-class 6\n", "", "cnp.no-class"),
    ("junos-qfx5240-roce.junos", "priority strict-high;", "transmit-rate percent 5;", "cnp.weighted"),
    ("eos-7060x5-segments.eos", "watchdog action drop", "watchdog action no-drop", "pfcwd.no-drop-action"),
    ("sonic-sn4600-recipe.json", '"3": "3", "4": "0", "5": "0"', '"3": "2", "4": "0", "5": "0"',
     "buffer.lossless-pg-unbound"),
    ("sonic-sn4600-recipe.json", '"wred_profile": "ROCE_LOSSLESS"', '"wred_profile": "ROCE_LOSSLES"',
     "config.undefined-reference"),
    ("sonic-sn4600-recipe.json", '"Ethernet0,Ethernet4|0": {"profile": "ingress_lossy_profile"}',
     '"Ethernet0,Ethernet4|0": {"profile": "ingress_lossy"}', "config.undefined-reference"),
    ("eos-default-map-rewrite.eos", "traffic-class 3 to dscp 26", "traffic-class 3 to dscp 24", "dscp.egress-rewrite"),
    ("dell-z9664-roce.dellsonic", " mtu 9100\n", " mtu 1500\n", "mtu.lossless-class-too-small"),
    ("host-doroce-dscp-map.sh", "--pfc 0,0,0,1,0,0,0,0", "--pfc 0,0,0,1,1,0,0,0", "pfc.priority-unused"),
    ("cl5-leaf2-roce.nvshow", "    3  3    24,25,26,27,28,29,30,31  3",
     "    3  3    24,25,26,27,28,29,30,31  3\n    9  -    26                       5", "dscp.conflict"),
]


@pytest.mark.parametrize(("name", "old", "new", "rule"), EDITS, ids=[f"{e[3]}-{i}" for i, e in enumerate(EDITS)])
def test_one_edit_fires_exactly_one_rule(name: str, old: str, new: str, rule: str) -> None:
    text = (DIALECTS / name).read_text()
    assert old in text
    base = {f.rule for f in lint(None, [parse_text(text, source=name)])}
    edited = lint(None, [parse_text(text.replace(old, new, 1), source=name)])
    assert {f.rule for f in edited} - base == {rule}, [(f.rule, f.subject, f.message) for f in edited]
    assert {f.rule for f in edited} == base | {rule}
    assert all(f.severity == RULES[rule].severity for f in edited if f.rule == rule)


def test_ecn_step_profile_is_legal() -> None:
    d = parse_deployed(DIALECTS / "sonic-ecn-step-profile.json")
    profile = d.port("Ethernet0").ecn
    assert profile is not None and profile[3].kmin_bytes == profile[3].kmax_bytes == 500000
    assert lint(None, [d]) == []


def test_non_default_priority_is_info_and_checked_against_hosts() -> None:
    eos = parse_deployed(DIALECTS / "eos-lossless-priority-4.eos")
    alone = lint(None, [eos])
    assert {(f.rule, f.severity) for f in alone} == {("pfc.non-default-priority", "info")}
    # A host still on priority 3 disagrees with the switch: that is an error.
    host = parse_deployed(DEPLOYED / "h1.eth0.mlnx_qos")
    with_host = {f.rule for f in lint(None, [eos, host]) if f.severity == "error"}
    assert "pfc.priority-mismatch" in with_host


def test_all_rules_known() -> None:
    lint_context(build_context(None))
    assert {rule for _, _, _, rule in EDITS} <= set(RULES)


def test_recipe_configs_of_every_dialect_lint_clean_together() -> None:
    # Without cabling every switch is compared with every other and with the hosts: the dialects must agree.
    recipes = [_path(n) for n, (_, rules) in EXPECTED.items() if not rules and "fragment" not in n]
    records = [parse_deployed(p) for p in recipes]
    records += [parse_deployed(DEPLOYED / "h1.eth0.mlnx_qos"), parse_deployed(DEPLOYED / "nccl.conf")]
    assert len({r.format for r in records}) >= 12  # ten switch dialects or more, mlnx_qos and nccl.conf
    errors = [(f.rule, f.subject) for f in lint(None, records) if f.severity == "error"]
    assert errors == []
