"""SONiC and NVUE configurations in the other shapes operators paste them (issue 27, part B).

SONiC: ``sonic-db-dump``/``redis-dump`` dumps with flat ``"TABLE|key"`` keys, ``redis-cli``/``sonic-db-cli hgetall``
transcripts, one config_db per namespace pasted after ``cat`` prompts, VOQ linecard keys. NVUE: ``startup.yaml``,
``nv config show -o json`` and the per-interface ``nv show ... qos roce status``. Each form must give the facts the
canonical form gives (config_db.json, ``nv set`` commands), whatever the paste is wrapped in.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metamorphic import ENVELOPES, apply_all
from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import Deployed, EcnProfile, Watchdog
from tensorfabric.fabric.lint import lint
from tensorfabric.fabric.parsers import _json_tables, nvue_yaml, parse_deployed, parse_text, sonic, sonic_redis
from tensorfabric.intake import MAX_LINE_CHARS

from .fabric_core_paths import FIXTURES

DIALECTS = FIXTURES / "dialects"


def _facts(d: Deployed) -> Deployed:
    """The record without where it came from: what two forms of one config must share."""
    return replace(d, source="", format="", read=None, detection=None, notes=(), complete=False)


def _verdict(d: Deployed) -> set[tuple[str, str]]:
    return {(f.rule, f.severity) for f in lint(None, [d])}


# --- SONiC Redis dumps -------------------------------------------------------------------------------------------


def test_sonic_db_dump_reads_as_the_config_db_it_dumps() -> None:
    dump = parse_deployed(DIALECTS / "sonic-db-dump-roce.json")
    recipe = parse_deployed(DIALECTS / "sonic-sn4600-recipe.json")
    assert dump.format == "sonic" and dump.device == "sn4600-leaf7" and dump.complete
    names = {"Ethernet8": "Ethernet0", "Ethernet12": "Ethernet4"}
    for port in dump.resolved_ports():
        assert replace(port, name=names[port.name]) == recipe.port(names[port.name])
    assert _verdict(dump) == _verdict(recipe) == set()
    # Keys of tables no rule reads (BGP_NEIGHBOR) are skipped, not errors.
    assert dump.read is not None and not dump.read.warnings


def test_flat_keys_with_plain_fields_and_value_wrappers_read_alike() -> None:
    plain = {"PORT_QOS_MAP|Ethernet0": {"dscp_to_tc_map": "[DSCP_TO_TC_MAP|ROCE]", "pfc_enable": "3"},
             "DSCP_TO_TC_MAP|ROCE": {"26": "3", "48": "6"}}
    wrapped = {k: {"value": v} for k, v in plain.items()}  # as design documents print the dump
    typed = {k: {"expireat": 1.5, "ttl": -0.001, "type": "hash", "value": v} for k, v in plain.items()}
    records = [parse_text(json.dumps(form, indent=2), source="dump.json") for form in (plain, wrapped, typed)]
    assert all(r.format == "sonic" for r in records)
    ports = [r.port("Ethernet0") for r in records]
    assert ports[0] == ports[1] == ports[2]
    assert ports[0].pfc_priorities == frozenset({3}) and ports[0].dscp_to_priority == {26: 3, 48: 6}


def test_a_cut_flat_dump_uses_the_whole_entries_only() -> None:
    text = (DIALECTS / "sonic-redis-dump-flat-ecn-none.json").read_text()
    cut = text[: text.index('"WRED_PROFILE|AZURE_LOSSLESS"') + 60]  # the WRED entry loses its thresholds
    d = parse_text(cut, source="dump.json")
    assert d.read is not None and any("cut off" in w for w in d.read.warnings)
    assert d.port("Ethernet16").pfc_priorities == frozenset({3, 4}) and d.port("Ethernet16").ecn is None


def test_flat_dump_deviation_is_found() -> None:
    d = parse_deployed(DIALECTS / "sonic-redis-dump-flat-ecn-none.json")
    # "[SCHEDULER|scheduler.1]" references resolve like bare names; the back-plane port is a port like any other
    assert d.port("Ethernet-BP8").queue_weights == {3: 15, 4: 15}
    assert {(f.rule, f.subject) for f in lint(None, [d])} == {
        ("ecn.disabled", "switch t1-lc4 port Ethernet16"), ("ecn.disabled", "switch t1-lc4 port Ethernet-BP8")}


# --- redis-cli / sonic-db-cli hgetall --------------------------------------------------------------------------


def test_hgetall_transcript_reads_every_reply_form() -> None:
    d = parse_deployed(DIALECTS / "sonic-hgetall-roce.redis")
    port = d.port("Ethernet64")
    assert (d.format, d.device) == ("sonic-redis", "sn4600-leaf9")
    assert port.pfc_priorities == frozenset({3}) and port.mtu == 9100  # numbered reply, hget
    assert port.dscp_to_priority == {0: 0, 24: 3, 26: 3, 46: 5, 48: 6}
    assert port.ecn == {3: EcnProfile(150000, 1500000, 5.0, True)}  # sonic-db-cli's Python dict
    # Keys asked one by one: ECN stands because the lossless queue's entry was read; which queues are strict is
    # unknown (a queue not asked for may be strict or not), so no CNP verdict is drawn from a partial view.
    assert port.strict_queues is None
    assert port.watchdog == Watchdog(True, 200.0, 400.0, "drop", 100.0)  # "| paste - -" pairs
    assert d.read is not None
    listed = set(d.read.not_understood)
    assert 39 in listed  # the keys "PFC_WD*" listing: skipped and listed, not read as an entry
    assert _verdict(d) == set()


def test_hgetall_forms_agree() -> None:
    end = "admin@leaf1:~$\n"  # the prompt after the reply: it is whole
    numbered = '$ redis-cli -n 4 hgetall "PORT_QOS_MAP|Ethernet0"\n1) "pfc_enable"\n2) "3,4"\n' + end
    raw = '$ redis-cli -n 4 --raw hgetall "PORT_QOS_MAP|Ethernet0"\npfc_enable\n3,4\n' + end
    pasted = '$ redis-cli -n 4 hgetall "PORT_QOS_MAP|Ethernet0" | paste - -\npfc_enable\t3,4\n' + end
    python = "$ sonic-db-cli CONFIG_DB hgetall PORT_QOS_MAP|Ethernet0\n{'pfc_enable': '3,4'}\n"
    got = [parse_text(t, source="paste.txt").port("Ethernet0").pfc_priorities for t in (numbered, raw, pasted, python)]
    assert got == [frozenset({3, 4})] * 4


def test_hgetall_namespaces_other_databases_and_cut_replies() -> None:
    text = ('$ sonic-db-cli -n asic1 CONFIG_DB hgetall "PORT_QOS_MAP|Ethernet-BP0"\n{\'pfc_enable\': \'3\'}\n'
            '$ redis-cli -n 4 hgetall "PORT_QOS_MAP|Ethernet0"\n1) "pfc_enable"\n2) "3"\n'
            '$ redis-cli -n 0 hgetall "PORT_QOS_MAP_TABLE:Ethernet0"\n1) "pfc_enable"\n2) "4"\n'
            '$ redis-cli -n 4 hgetall "DSCP_TO_TC_MAP|AZURE"\n1) "26"\n2) "3"\n3) "48"\n')
    d = parse_text(text, source="paste.txt")
    assert d.port("asic1/Ethernet-BP0").pfc_priorities == frozenset({3})  # -n asic1: that namespace
    assert d.port("Ethernet0").pfc_priorities == frozenset({3})  # APPL_DB (-n 0) is not config: listed
    assert d.read is not None and 6 in d.read.not_understood
    # The last reply runs to the end with no prompt after it: cut, so its map is not used (no "48 in no class").
    assert any("runs to the end of the paste" in w for w in d.read.warnings)
    assert d.port("Ethernet0").dscp_to_priority in (None, {})
    # "(empty array)": the key does not exist; nothing is placed for it.
    empty = parse_text('$ redis-cli -n 4 hgetall "PFC_WD|Ethernet0"\n(empty array)\n'
                       '$ redis-cli -n 4 hget "PORT_QOS_MAP|Ethernet0" pfc_enable\n"3"\nadmin@leaf1:~$\n',
                       source="paste.txt")
    assert empty.port("Ethernet0").watchdog is None and empty.port("Ethernet0").pfc_priorities == frozenset({3})


def test_partial_views_leave_absent_entries_unknown() -> None:
    # Only the RoCE queue asked for: the CNP queue's scheduler is not "not strict", the watchdog is not "off".
    text = ('$ redis-cli -n 4 hgetall "PORT_QOS_MAP|Ethernet0"\n1) "pfc_enable"\n2) "3"\n'
            '$ sonic-db-cli CONFIG_DB hgetall "QUEUE|Ethernet0|3"\n{\'scheduler\': \'s1\', \'wred_profile\': \'W\'}\n'
            "$ sonic-db-cli CONFIG_DB hgetall WRED_PROFILE|W\n{'ecn': 'ecn_all', 'green_min_threshold': '150000', "
            "'green_max_threshold': '1500000'}\n$ sonic-db-cli CONFIG_DB hgetall SCHEDULER|s1\n{'type': 'DWRR', "
            "'weight': '50'}\n$ sonic-db-cli CONFIG_DB hgetall PFC_WD|GLOBAL\n{'POLL_INTERVAL': '100'}\n")
    d = parse_text(text, source="paste.txt")
    port = d.port("Ethernet0")
    assert port.ecn is not None and port.ecn[3].ecn and port.strict_queues is None and port.watchdog is None
    assert not [f for f in lint(None, [d]) if f.severity == "error"]
    # A flat dump cut inside its QUEUE entries: the same, where the whole dump would say "not strict" or "off".
    lines = (DIALECTS / "sonic-redis-dump-flat-ecn-none.json").read_text().splitlines()
    cut = parse_text("\n".join(lines[48:113]) + "\n", source="dump.json")
    assert {f.rule for f in lint(None, [cut]) if f.severity == "error"} <= {"ecn.disabled"}


def test_hgetall_deviation_and_a_keys_listing_alone() -> None:
    d = parse_deployed(DIALECTS / "sonic-hgetall-pfc-on-4.redis")
    assert d.device == "dc2-t0-07"  # from the prompt: no DEVICE_METADATA was asked for
    assert "roce.dscp-not-lossless" in {f.rule for f in lint(None, [d])}
    with pytest.raises(ParseError, match="found nothing a lint rule can check"):
        parse_text('$ redis-cli -n 4 keys "QUEUE*"\n1) "QUEUE|Ethernet0|3"\n', source="paste.redis")


# --- multi-ASIC and VOQ ----------------------------------------------------------------------------------------


def test_config_db_per_namespace_after_cat_prompts() -> None:
    d = parse_deployed(DIALECTS / "sonic-multiasic-cat-config-dbs.json")
    assert [p.name for p in d.ports] == ["asic0/Ethernet0", "asic0/Ethernet4", "asic1/Ethernet-BP0",
                                         "asic1/Ethernet-BP4"]
    assert d.read is not None and not d.read.warnings  # not "table X appears twice"
    assert d.port("asic1/Ethernet-BP4").routed is None and d.port("asic0/Ethernet4").routed
    bad = parse_deployed(DIALECTS / "sonic-multiasic-backend-pfc-off.json")
    assert {f.subject for f in lint(None, [bad]) if f.severity == "error"} == {
        "switch msn-multi2 port asic1/Ethernet-BP0", "switch msn-multi2 port asic1/Ethernet-BP4"}


def test_config_db_per_namespace_after_head_style_headings() -> None:
    lines = (DIALECTS / "sonic-multiasic-cat-config-dbs.json").read_text().splitlines()
    text = "\n".join(f"==> /etc/sonic/{ln.rsplit('/', 1)[1]} <==" if ln.startswith("admin@") else ln for ln in lines)
    d = parse_text(text + "\n", source="paste.txt")
    assert [p.name for p in d.ports][-1] == "asic1/Ethernet-BP4" and d.read is not None and not d.read.warnings


def test_voq_keys_are_never_split_as_port_and_queue() -> None:
    d = parse_deployed(DIALECTS / "sonic-voq-linecard-keys.json")
    assert [p.name for p in d.ports] == ["Ethernet0", "Ethernet8"]  # own linecard's keys join the local port
    port = d.port("Ethernet8")
    assert port.ecn is not None and set(port.ecn) == {3} and port.pfc_priorities == frozenset({3})
    assert port.lossy_queues == frozenset({0, 1, 2, 4, 5, 6}) and port.strict_queues == frozenset({6})
    assert d.notes == ("SYSTEM_PORT (VOQ chassis system ports) is not read",)
    assert d.read is not None and d.read.not_understood  # SYSTEM_PORT's header is listed
    # Another linecard's keys keep their ASIC; the queue is the last field, whatever the host name holds.
    other = parse_text(json.dumps({"QUEUE": {"lc9-3|asic2|Ethernet12|3": {"wred_profile": "W"}},
                                   "WRED_PROFILE": {"W": {"ecn": "ecn_all", "green_min_threshold": "1",
                                                          "green_max_threshold": "2"}}}), source="x.json")
    assert other.port("asic2/Ethernet12").ecn is not None and set(other.port("asic2/Ethernet12").ecn or {}) == {3}


# --- NVUE trees ------------------------------------------------------------------------------------------------

_NV_SET = """nv set system hostname sn5600-leaf4
nv set interface lo ip address 10.10.10.7/32
nv set interface swp1,5 ip address 10.40.1.0/31
nv set interface swp1-8 link mtu 9216
nv set interface swp1-8 qos pfc-watchdog
nv set qos pfc-watchdog polling-interval 100
nv set qos pfc-watchdog robustness 3
nv set qos roce enable on
nv set qos roce mode lossless
"""


def test_startup_yaml_gives_the_facts_of_its_nv_set_commands() -> None:
    tree = parse_deployed(DIALECTS / "nvue-startup-roce.yaml")
    commands = parse_text(_NV_SET, source="leaf4.nvue")
    assert tree.format == "nvue-yaml" and commands.format == "nvue"
    assert _facts(tree) == _facts(commands)
    assert tree.read is not None and tree.read.version == "Cumulus Linux 5.11.0"
    assert [p.name for p in tree.ports] == ["swp1", "swp5", "swp2", "swp3", "swp4", "swp6", "swp7", "swp8"]
    assert tree.pfc_priorities == frozenset({3}) and tree.port("swp7").watchdog is not None


def test_nv_config_show_json_list_bare_and_one_line_forms_agree() -> None:
    listed = parse_deployed(DIALECTS / "nvue-config-show-roce.json")
    doc = json.loads((DIALECTS / "nvue-config-show-roce.json").read_text().split("\n", 1)[1])
    bare = parse_text(json.dumps(doc[1]["set"], indent=2), source="config.json")
    one_line = parse_text(json.dumps(doc), source="config.json")
    assert listed.format == bare.format == one_line.format == "nvue-yaml"
    assert _facts(listed) == _facts(bare) == _facts(one_line)
    assert listed.ecn == {3: EcnProfile(150000, 1500000, 100.0, True)}


@pytest.mark.parametrize(("lines", "pfc"), [
    (["nv set qos roce"], {3}),
    (["nv set qos roce mode lossless-single-ipool"], {3}),
    (["nv set qos roce mode lossy"], set()),
    (["nv set qos roce mode lossy-multi-tc"], set()),
    (["nv set qos pfc default-global switch-priority 2", "nv set qos roce"], {2}),  # NVIDIA's own example
])
def test_roce_mode_decides_pfc_whatever_the_order(lines: list[str], pfc: set[int]) -> None:
    for text in ("\n".join(lines), "\n".join(reversed(lines))):
        d = parse_text(text + "\n", source="x.nvue")
        assert d.pfc_priorities == frozenset(pfc)
        assert d.dscp_to_priority[26] == 3 and d.dscp_to_priority[48] == 6 and len(d.dscp_to_priority) == 64


def test_explicit_lines_win_over_the_roce_macro_in_any_order() -> None:
    lines = ["nv set qos roce", "nv set qos mapping default-global dscp 26 switch-priority 4",
             "nv set qos egress-scheduler default-global traffic-class 6 mode dwrr",
             "nv set qos congestion-control default-global traffic-class 3 min-threshold 200000"]
    for text in ("\n".join(lines), "\n".join(reversed(lines))):
        d = parse_text(text + "\n", source="x.nvue")
        assert d.dscp_to_priority[26] == 4 and 6 not in (d.strict_queues or set())
        assert d.ecn is not None and d.ecn[3].kmin_bytes == 200000


def test_traffic_pools_mark_their_switch_priorities_lossy() -> None:
    d = parse_deployed(DIALECTS / "cumulus-5x-roce-pool-lossy.nvue")
    assert d.port("swp9").lossy_pgs == frozenset({3}) and d.port("swp9").pfc_priorities == frozenset({3})
    assert {f.rule for f in lint(None, [d])} == {"roce.lossy-pool"}
    # A later line moves the priority to another pool: one pool per priority, the last line wins.
    moved = parse_text("nv set qos roce\nnv set qos traffic-pool roce-lossy switch-priority 3\n"
                       "nv set qos traffic-pool roce-lossless switch-priority 3\nnv set interface swp1 link mtu 9216\n",
                       source="x.nvue")
    assert moved.port("swp1").lossy_pgs == frozenset()


def test_no_false_cnp_no_class_on_explicit_nvue_dscp_lines() -> None:
    # Only RoCE's DSCP mapped: CNPs on 48 keep the platform's class (6), they are not "in no class".
    d = parse_text("nv set qos mapping default-global dscp 26 switch-priority 3\n"
                   "nv set qos pfc default-global switch-priority 3\n", source="x.nvue")
    assert "cnp.no-class" not in {f.rule for f in lint(None, [d])}
    # The interface status names only the RoCE and CNP rows: the rest of the table is the platform's.
    status = parse_deployed(DIALECTS / "cl5-swp9-roce-status.nvshow")
    assert len(status.dscp_to_priority) == 64 and status.dscp_to_priority[48] == 6
    assert status.strict_queues == frozenset({6}) and status.queue_weights == {3: 50}
    assert _verdict(status) == set()


def test_a_subtree_whose_parents_were_cut_is_not_read_as_global() -> None:
    # An excerpt starting inside "interface: swp1:" -- its "qos: pfc-watchdog" is the port's, not the switch's.
    text = ("        qos:\n          pfc-watchdog: {}\n        type: swp\n"
            "      swp2:\n        link:\n          mtu: 9216\n")
    with pytest.raises(ParseError, match="found nothing a lint rule can check"):
        parse_text(text, source="startup.yaml")


@pytest.mark.parametrize(("name", "source", "fmt"), [
    ("sonic-hgetall-roce.redis", "paste.txt", "sonic-redis"),
    ("nvue-startup-roce.yaml", "paste.txt", "nvue-yaml"),
    ("nvue-config-show-roce.json", "config.json", "nvue-yaml"),
    ("sonic-db-dump-roce.json", "paste.txt", "sonic"),
])
def test_detected_without_their_extension(name: str, source: str, fmt: str) -> None:
    d = parse_text((DIALECTS / name).read_text(), source=source)
    assert d.format == fmt and d.detection is not None and d.detection.how == "content"


_FORMS = ["sonic-db-dump-roce.json", "sonic-hgetall-roce.redis", "sonic-hgetall-pfc-on-4.redis",
          "sonic-multiasic-backend-pfc-off.json", "sonic-voq-linecard-keys.json", "nvue-startup-roce.yaml",
          "nvue-startup-dscp-moved.yaml", "nvue-config-show-lossy-mode.json", "cl5-swp21-cnp-dwrr-status.nvshow"]


@settings(max_examples=25, deadline=None)
@given(index=st.integers(0, len(_FORMS) - 1),
       envelopes=st.lists(st.sampled_from(sorted(ENVELOPES)), min_size=1, max_size=2, unique=True))
def test_wrapped_forms_lint_as_the_file_does(index: int, envelopes: list[str]) -> None:
    path = DIALECTS / _FORMS[index]
    text = path.read_text()
    assert _verdict(parse_text(apply_all(text, envelopes), source=path.name)) == \
        _verdict(parse_text(text, source=path.name))


_HOSTILE = {
    "flat-keys": '"PORT_QOS_MAP|' * (MAX_LINE_CHARS // 14), "yaml-key": "a" * (MAX_LINE_CHARS - 10) + ":",
    "dashes": "- " * (MAX_LINE_CHARS // 2), "colons": "a:" * (MAX_LINE_CHARS // 2), "quotes": '"' * MAX_LINE_CHARS,
    "numbered": '1) "' * (MAX_LINE_CHARS // 4), "command": "redis-cli -n 4 hgetall " + "x" * (MAX_LINE_CHARS - 40),
    "options": "redis-cli " + "-n 4 " * (MAX_LINE_CHARS // 6),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("line", list(_HOSTILE.values()), ids=list(_HOSTILE))
def test_hostile_lines_end_for_each_pattern(line: str) -> None:
    # The patterns these readers add (tree lines, redis commands and replies, flat keys, markers), on the longest
    # line the intake keeps: bounded classes, no nested quantifiers. A backtracking pattern would run for hours on
    # these lines, so the timeout is a hang bound, not a speed claim (the per-MB figure is benchmarks/intake_linear.py).
    patterns = [nvue_yaml._LINE, sonic_redis._COMMAND, sonic_redis._NUMBERED, sonic_redis._QUOTED,
                *(p for _, p in (*nvue_yaml.MARKERS, *sonic_redis.MARKERS, *sonic.MARKERS))]
    for pattern in patterns:
        match = pattern.search(line)
        assert match is None or match.end() <= len(line)
    assert all(m.end() <= len(line) for m in _json_tables._HEADER.finditer(line))


def test_fixtures_exist() -> None:
    assert all((DIALECTS / name).is_file() for name in _FORMS)
    assert Path(__file__).name.startswith("test_fabric_dialects_sonic_nvue")
