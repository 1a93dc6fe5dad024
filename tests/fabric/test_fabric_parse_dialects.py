"""What each dialect parser reads from configs in the platform's own syntax, and how it refuses guesses."""

from __future__ import annotations

import pytest

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import EcnProfile, Headroom, Watchdog
from tensorfabric.fabric.parsers import parse_deployed, parse_text

from .fabric_core_paths import FIXTURES

DIALECTS = FIXTURES / "dialects"


def test_junos_lossless_priority_rides_another_queue() -> None:
    d = parse_deployed(DIALECTS / "junos-qfx5240-roce.junos")
    assert (d.device, d.format, d.complete) == ("qfx-leaf1", "junos", True)
    assert d.dscp_to_priority[26] == 3 and d.priority_to_queue[3] == 4  # PFC priority 3 on queue 4
    assert d.pfc_priorities == frozenset({3}) and d.strict_queues == frozenset({3}) and d.queue_weights == {4: 50}
    cnp = d.dscp_to_priority[48]
    assert d.queue_of(cnp) == 3 and cnp not in d.pfc_priorities
    assert d.ecn == {4: EcnProfile(10, 80, 100.0, True, unit="percent")}
    assert d.watchdog == Watchdog(True)
    port = d.port("et-0/0/0")
    assert port.routed and port.mtu == 9216 and port.pfc_priorities == frozenset({3})


def test_junos_watchdog_timers() -> None:
    d = parse_deployed(DIALECTS / "junos-qfx5230-watchdog-timers.junos")
    assert d.watchdog == Watchdog(True, 200.0, 400.0, "drop", 100.0)  # detection 2 polls of 100 ms


def test_junos_reads_past_cut_braces_and_warns_on_unknown_code_points() -> None:
    # Only a wrapper left open: nothing to read, so nothing recognised.
    with pytest.raises(ParseError, match="found nothing a lint rule can check"):
        parse_text("class-of-service {\n    forwarding-classes {\n", source="x.junos")
    whole = (DIALECTS / "junos-qfx5240-roce.junos").read_text()
    bad = whole.replace("code-points 011010", "code-points roce")
    d = parse_text(bad, source="x.junos")
    assert d.read is not None and any("six bits" in w for w in d.read.warnings)
    # The classifier with the bad code point is left out: its DSCP map is unknown, not "26 unclassified".
    assert d.dscp_to_priority == {} and d.pfc_priorities == frozenset({3})
    cut = parse_text(whole[: whole.index("scheduler-maps {")], source="x.junos")  # braces left open at the end
    assert cut.read is not None and any("without its closing brace" in w for w in cut.read.warnings)
    assert cut.dscp_to_priority[26] == 3 and cut.pfc_priorities == frozenset({3})


def test_junos_class_of_service_children_without_the_wrapper() -> None:
    for fmt in (None, "junos"):
        d = parse_deployed(FIXTURES / "deployed" / "junos-cos-children-only.junos", fmt=fmt)
        port = d.port("et-0/0/12")
        assert d.format == "junos" and port.pfc_priorities == frozenset({3}) and port.strict_queues == frozenset({3})
        assert port.dscp_to_priority == {26: 3, 48: 11} and d.priority_to_queue[3] == 4
        assert port.watchdog == Watchdog(True, 200.0, 400.0, None, 100.0)


def test_dell_sonic_cli() -> None:
    d = parse_deployed(DIALECTS / "dell-z9664-roce.dellsonic")
    port = d.port("Eth1/1")
    assert (d.device, d.format) == ("dell-leaf1", "dell-sonic")
    assert port.dscp_to_priority is not None and port.dscp_to_priority[26] == 3 and port.dscp_to_priority[48] == 6
    assert port.pfc_priorities == frozenset({3}) and port.speed_bps == 400e9 and port.routed
    # KB as the CLI prints it: converted by 1000 or 1024 depending on the release, so never turned into bytes
    assert port.ecn == {3: EcnProfile(2048, 12480, 15.0, True, unit="kbytes")}
    assert port.strict_queues == frozenset({6}) and port.queue_weights == {0: 50, 3: 50}
    assert port.watchdog == Watchdog(True, 200.0, 400.0, "drop", 100.0)
    assert d.priority_to_pg == {3: 3, 0: 7, 1: 7, 2: 7, 4: 7, 5: 7, 6: 7, 7: 7}


def test_cumulus_traffic_conf_breakouts_and_hysteresis() -> None:
    d = parse_deployed(DIALECTS / "cumulus-4x-roce.traffic_conf")
    assert [p.name for p in d.ports] == ["swp1", "swp2", "swp3", "swp4", "swp49s0", "swp49s1", "swp49s2", "swp49s3"]
    port = d.port("swp49s2")
    assert port.pfc_priorities == frozenset({3}) and port.cable_length_m == 5.0
    assert port.headroom == {3: Headroom(18000, 16000, 70000, hysteresis_bytes=2000)}
    assert d.trust == "dscp" and d.dscp_to_priority[26] == 3 and d.dscp_to_priority[48] == 6
    assert d.strict_queues == frozenset({6}) and d.queue_weights[3] == 32
    assert d.port("swp7").pfc_priorities is None  # not in any group: not in the file either


def test_cumulus_group_list_naming_groups_without_keys_is_a_defect_not_an_abort() -> None:
    # switchd reads pfc.<name>.* by the listed name; the keys of another group configure nothing.
    text = ("pfc.port_group_list = [ROCE_PFC]\npfc.pfc_port_group.cos_list = [3]\npfc.pfc_port_group.port_set = swp1\n"
            "traffic.packet_priority_source_set = [dscp]\n")
    d = parse_text(text, source="traffic.conf", fmt="cumulus-datapath")
    [defect] = d.defects
    assert defect.line == 1 and "names 'ROCE_PFC' but no pfc.ROCE_PFC" in defect.message
    assert "pfc_port_group" in defect.fix and d.port("swp1").pfc_priorities is None  # not configured: unknown
    from tensorfabric.fabric.lint import lint

    assert [(f.rule, f.severity) for f in lint(None, [d])] == [("config.undefined-reference", "error")]
    # NVIDIA's RoCE page printed such a file after a "sudo cat" prompt, cut with "...": read, with the finding.
    nclu = parse_deployed(FIXTURES / "deployed" / "cumulus-nclu-undefined-group.traffic_conf")
    assert nclu.defects and nclu.read is not None and len(nclu.read.elided) == 5
    assert nclu.dscp_to_priority[26] == 3 and nclu.port("swp7").ecn is not None


def test_nv_show_qos_roce() -> None:
    d = parse_deployed(DIALECTS / "cl5-leaf2-roce.nvshow")
    assert (d.format, d.trust, d.pfc_priorities, d.cable_length_m) == ("nvue-show", "pcp,dscp", frozenset({3}), 50.0)
    assert d.ecn is not None and set(d.ecn) == {0, 3}
    # 146.48 KB / 1.43 MB as printed: within NVUE's display rounding of 150000 / 1500000 B
    assert abs(d.ecn[3].kmin_bytes - 150000) < 10 and abs(d.ecn[3].kmax_bytes - 1500000) < 6000
    assert d.dscp_to_priority[26] == 3 and d.priority_to_queue[6] == 6 and d.strict_queues == frozenset({6})
    lossy = parse_deployed(DIALECTS / "cl5-leaf3-lossy-mode.nvshow")
    assert lossy.pfc_priorities == frozenset()


def test_nvue_transcript_with_prompts_and_output() -> None:
    d = parse_deployed(DIALECTS / "cumulus-5x-nvue-transcript.nvue")
    # nv set qos roce: the platform's DSCP table (d -> d / 8), so 26 -> 3 and CNPs on 48 -> 6
    assert d.device == "cl5-leaf1" and d.dscp_to_priority == {d: d // 8 for d in range(64)}
    assert d.port("swp1").routed and d.port("swp7").mtu == 9216 and d.port("swp32").watchdog is not None


def test_sonic_multi_asic_namespaces_and_chassis_keys() -> None:
    d = parse_deployed(DIALECTS / "sonic-multiasic-namespaces.json")
    assert [p.name for p in d.ports] == ["asic0/Ethernet0", "asic0/Ethernet4", "asic1/Ethernet0", "asic1/Ethernet4"]
    assert d.port("asic1/Ethernet4").pfc_priorities == frozenset({3})
    chassis = parse_deployed(DIALECTS / "sonic-chassis-asic-keys.json")
    port = chassis.port("asic0/Ethernet4")
    assert port.headroom == {3: Headroom(108544, 19456, 128000)} and port.strict_queues == frozenset({6})
    assert port.ecn is not None and port.ecn[3].kmin_bytes == 150000 and port.lossy_pgs == frozenset({0})
    with pytest.raises(ParseError, match="must be 'Ethernet0'"):
        parse_text('{"PORT_QOS_MAP": {"a|b|c": {"pfc_enable": "3"}}}', source="x.json")


def test_sonic_fragments_are_unknown_not_off() -> None:
    d = parse_deployed(DIALECTS / "sonic-fragment-queues-no-wred.json")
    port = d.port("Ethernet0")
    assert port.ecn is None and port.strict_queues == frozenset({6}) and port.watchdog is None
    assert not d.complete


def test_sonic_pfcwd_with_and_without_a_pfc_wd_table() -> None:
    started = parse_deployed(DIALECTS / "sonic-pfcwd-start-default.json").port("Ethernet0")
    assert started.watchdog == Watchdog(True, action="drop")  # pfcwd start_default: on, timers not in the file
    absent = parse_deployed(DIALECTS / "sonic-pfcwd-absent.json")
    assert absent.complete and absent.port("Ethernet0").watchdog is None
    full = parse_deployed(DIALECTS / "sonic-sn4600-recipe.json").port("Ethernet4")
    assert full.watchdog == Watchdog(True, 200.0, 400.0, "drop", 100.0) and full.routed


def test_sonic_repeated_dscp_key_is_a_conflict() -> None:
    d = parse_deployed(DIALECTS / "sonic-dscp-listed-twice.json")
    assert d.dscp_conflicts == {26: frozenset({1, 3})} and d.dscp_to_priority[26] == 1  # json keeps the last


def test_nxos_n3k_named_classes() -> None:
    d = parse_deployed(DIALECTS / "nxos-n3k-named-classes.nxos")
    assert d.pfc_priorities == frozenset({3}) and d.mtu == 9216
    # buffer-size 101920, pause 46800, resume 34320: xoff 55120 above the pause point, 12480 of hysteresis
    assert d.headroom == {3: Headroom(55120, 46800, 101920, hysteresis_bytes=12480)}
    assert d.strict_queues == frozenset({7}) and d.queue_weights == {0: 50, 3: 50}
    assert d.dscp_to_priority == {26: 3, 48: 7}
    assert d.notes and "hardware profile pfc mmu" in d.notes[0]
    port = d.port("Ethernet1/2")
    assert port.routed and port.trust == "dscp"


def test_nxos_first_matching_class_wins() -> None:
    d = parse_deployed(DIALECTS / "nxos-n9k-dscp-in-two-classes.nxos")
    port = d.port("Ethernet1/1")
    assert port.dscp_to_priority is not None and port.dscp_to_priority[26] == 3
    assert d.dscp_conflicts == {26: frozenset({3, 7})}


def test_eos_segments_speeds_and_rewrite() -> None:
    d = parse_deployed(DIALECTS / "eos-7060x5-segments.eos")
    port = d.port("Ethernet1/1")
    assert port.ecn == {3: EcnProfile(2000, 10000, 20.0, True, unit="segments")}
    assert port.speed_bps == 400e9 and d.port("Ethernet2/1").speed_bps == 200e9
    assert port.queue_weights == {3: 50} and port.routed
    spine = parse_deployed(DIALECTS / "eos-default-map-rewrite.eos")
    assert spine.default_dscp_map and spine.priority_to_dscp == {3: 26, 6: 48}
    assert spine.dscp_to_priority[26] == 3 and spine.dscp_to_priority[48] == 6 and spine.dscp_to_priority[0] == 1
    assert spine.port("Ethernet3/1/1").trust == "dscp"  # routed ports trust DSCP by default
    with pytest.raises(ParseError, match="400g-8"):
        parse_text("interface Ethernet1\n   speed 400\n", source="x.eos")


def test_mlnx_qos_ets_lines_keep_their_priorities() -> None:
    # 'tsa: ets, bw: 50%' headers used to be skipped, so their priorities fell to the previous class.
    d = parse_deployed(FIXTURES / "deployed" / "h5.ets.mlnx_qos")
    nic = d.port("ens1f0np0")
    assert d.priority_to_queue == {0: 0, 1: 0, 2: 0, 4: 0, 5: 0, 7: 0, 3: 3, 6: 6}
    assert nic.queue_weights == {0: 50, 3: 50} and nic.strict_queues == frozenset({6})
    assert nic.pfc_priorities == frozenset({3}) and nic.dcbx == "os" and nic.dscp_to_priority is not None


def test_nccl_hca_advice_keeps_an_exclude_list() -> None:
    from tensorfabric.fabric.lint import lint

    env = parse_text("NCCL_IB_HCA=^mlx5_1\n", source="h7.env")
    fixes = [f.fix for f in lint(None, [env]) if f.rule == "nccl.hca-prefix-match"]
    # not '==mlx5_1', which would select the one it meant to drop
    assert fixes == ["write the exact form: NCCL_IB_HCA=^=mlx5_1"]
    exact = parse_text("NCCL_IB_HCA=^=mlx5_1\n", source="h7.env")
    assert not [f for f in lint(None, [exact]) if f.rule == "nccl.hca-prefix-match"]


def test_nccl_conf_is_read_by_the_host_reader_and_keeps_quotes_as_nccl_does() -> None:
    d = parse_text("# doRoCE\nNCCL_IB_TC=106\nNCCL_IB_HCA==mlx5_0:1\n", source="nccl.conf")
    assert dict(d.nccl_env) == {"NCCL_IB_TC": "106", "NCCL_IB_HCA": "=mlx5_0:1"}
    quoted = parse_text('NCCL_IB_HCA="=mlx5_0"\n', source="nccl.conf")  # NCCL's setEnvFile keeps the quotes
    assert dict(quoted.nccl_env) == {"NCCL_IB_HCA": '"=mlx5_0"'}
    assert quoted.read is not None and any("quotes are part of NCCL_IB_HCA" in w for w in quoted.read.warnings)


def test_cumulus_5x_allports_and_inline_comments() -> None:
    text = ("pfc.port_group_list = [default-global]\npfc.default-global.port_set = allports\n"
            "pfc.default-global.cos_list = [3]\npfc.default-global.xoff_size = 10000\n"
            "pfc.default-global.xon_delta = 2000\ningress_service_pool.0.percent = 50.0  # all priority groups\n")
    d = parse_text(text, source="qos_features.conf")  # .conf names NCCL files too: the content decides
    assert d.format == "cumulus-datapath" and d.pfc_priorities == frozenset({3})
    assert d.headroom == {3: Headroom(10000, 8000, 0, hysteresis_bytes=2000)}
    assert d.read is not None and d.read.not_understood == (6,)  # a buffer pool: read past, listed
