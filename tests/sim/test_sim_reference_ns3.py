"""The HPCC ns-3 simulator's formats (config, topology and flow files out; FCT, PFC, queue-length files and the
path-logging build's PATH lines back), on its own syntax; no ns-3 needed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.errors import InputError, ParseError
from tensorfabric.sim import Flow, fat_tree
from tensorfabric.sim.dcqcn import FirmwareDcqcn, PaperDcqcn
from tensorfabric.sim.ecn import EcnConfig
from tensorfabric.sim.reference_ns3 import (
    config_text,
    flow_text,
    from_firmware,
    from_paper,
    matched_firmware,
    node_of_ip,
    parse_fct,
    parse_paths,
    parse_pfc,
    parse_qlen,
    topology,
)

TOPO = topology(fat_tree(4, 100e9, cable_m=200.0, fabric_m=200.0))
FLOWS = [Flow("h1", "h4", 4e6), Flow("h2", "h0", 4e6), Flow("h1", "h4", 1e6, start_s=5e-6)]
EXPORTED = flow_text(FLOWS, TOPO)

# What third writes, in its printf formats (scratch/third.cc qp_finish and get_pfc, monitor_buffer), and the
# PATH lines of scripts/build-ns3-hpcc.sh's print: h1 -> h4 over edge0_0 (22), agg0_1 (21), core2 (18),
# agg1_1 (25), edge1_0 (26); h2 -> h0 within pod 0: edge0_1 (23), agg0_0 (20), edge0_0.
FCT = """\
0b000201 0b000001 10000 100 4000000 0 1004731 331920
0b000101 0b000401 10000 100 4000000 0 1210377 335920
0b000101 0b000401 10001 100 1000000 5000 84211 88480
"""
STDOUT = """\
ENABLE_QCN\t\t\tYes
CC_MODE\t\t1
maxRtt=13520 maxBdp=169000
Running Simulation.
PATH 0b000101 0b000401 10000 100 22 4
PATH 0b000201 0b000001 10000 100 23 3
PATH 0b000201 0b000001 10000 100 20 1
PATH 0b000201 0b000001 10000 100 22 1
PATH 0b000101 0b000401 10000 100 21 3
PATH 0b000101 0b000401 10000 100 18 2
PATH 0b000101 0b000401 10001 100 22 3
PATH 0b000101 0b000401 10000 100 25 1
PATH 0b000101 0b000401 10000 100 26 1
PATH 0b000101 0b000401 10001 100 20 3
PATH 0b000101 0b000401 10001 100 16 2
PATH 0b000101 0b000401 10001 100 24 1
PATH 0b000101 0b000401 10001 100 26 1
PATH 0b000101 0b000401 10000 100 22 4
3.52
"""
PFC = """\
2004100 22 1 3 1
2009300 22 1 3 0
2011000 21 1 1 1
2012500 22 1 3 1
"""
QLEN = """\
time: 0
22 1 1
time: 100000000
22 1 900 40 22 0 5
22 2 1000
26 3 999
"""


def _config(text: str) -> dict[str, str]:
    pairs = [line.split(" ", 1) for line in text.splitlines()]
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), "a key written twice"
    return dict(pairs)


def test_config_carries_dcqcn_ecn_and_files_in_the_reference_units() -> None:
    ecn = EcnConfig(kmin_bytes=50_000, kmax_bytes=200_000, pmax=0.2)
    cfg = _config(config_text(dcqcn=from_firmware(FirmwareDcqcn()), ecn=ecn, rates=TOPO.rates, stop_s=0.05))
    assert cfg["CC_MODE"] == "1" and cfg["ENABLE_QCN"] == "1" and cfg["USE_DYNAMIC_PFC_THRESHOLD"] == "1"
    # The firmware defaults: alpha every 1 us, g 5/1024, cut checked every 4 us, 300 us timer, AI 5 / HAI 50 Mb/s,
    # RPG_THRESHOLD 1 = fast recovery on no expiry (its F counts expiries before the first additive one).
    assert (cfg["ALPHA_RESUME_INTERVAL"], cfg["RATE_DECREASE_INTERVAL"], cfg["RP_TIMER"]) == ("1", "4", "300")
    assert float(cfg["EWMA_GAIN"]) == 5 / 1024 and cfg["FAST_RECOVERY_TIMES"] == "0"
    assert (cfg["RATE_AI"], cfg["RATE_HAI"], cfg["MIN_RATE"]) == ("5Mb/s", "50Mb/s", "1Mb/s")
    # ECN per link speed, thresholds in KB as SwitchMmu::ConfigEcn multiplies them by 1000.
    assert cfg["KMIN_MAP"] == "1 100000000000 50" and cfg["KMAX_MAP"] == "1 100000000000 200"
    assert cfg["PMAX_MAP"] == "1 100000000000 0.2"
    assert cfg["ERROR_RATE_PER_LINK"] == "0.0000" and cfg["L2_BACK_TO_ZERO"] == "0" and cfg["HAS_WIN"] == "0"
    assert cfg["SIMULATOR_STOP_TIME"] == "0.05" and cfg["BUFFER_SIZE"] == "32"
    assert cfg["FCT_OUTPUT_FILE"] == "fct.txt" and cfg["PFC_OUTPUT_FILE"] == "pfc.txt"
    # The queue monitor stays off unless asked for: it would start after the run has stopped.
    assert int(cfg["QLEN_MON_START"]) > 0.05e9
    on = _config(config_text(dcqcn=from_firmware(FirmwareDcqcn()), ecn=EcnConfig(), rates=TOPO.rates,
                             qlen_ns=(0, 100_000_000)))
    assert (on["QLEN_MON_START"], on["QLEN_MON_END"]) == ("0", "100000000")


def test_paper_parameters_map_their_timers_and_drop_the_hyper_increase() -> None:
    ns3 = from_paper(PaperDcqcn())
    assert (ns3.rate_decrease_interval_us, ns3.alpha_resume_interval_us, ns3.rp_timer_us) == (50, 55, 55)
    assert ns3.fast_recovery_times == 5 and ns3.rate_hai_bps == ns3.rate_ai_bps == 40e6
    assert ns3.clamp_target_rate  # the paper sets R_T <- R_C on every cut
    ecn = EcnConfig(kmin_bytes=5_000, kmax_bytes=200_000, pmax=0.01)
    cfg = _config(config_text(dcqcn=ns3, ecn=ecn, rates=(40e9, 100e9)))
    assert cfg["KMIN_MAP"] == "2 40000000000 5 100000000000 5" and cfg["PMAX_MAP"].endswith(" 0.01")
    # What the reference lacks is switched off on our side for a like-for-like comparison.
    m = matched_firmware(FirmwareDcqcn())
    assert m.min_time_between_cnps_s == 0 and m.byte_reset_bytes > 1e12 and m.initial_alpha == 1.0
    with pytest.raises(InputError, match="whole KB"):
        config_text(dcqcn=ns3, ecn=EcnConfig(kmin_bytes=5_500, kmax_bytes=200_000, pmax=0.01), rates=(100e9,))
    with pytest.raises(InputError, match="rates"):
        config_text(dcqcn=ns3, ecn=EcnConfig(), rates=())


def test_topology_numbers_hosts_first_and_interfaces_by_link_order() -> None:
    lines = TOPO.text.splitlines()
    assert lines[0] == "36 20 48"  # 16 hosts + 20 switches, 48 links
    assert lines[1].split() == [str(i) for i in range(16, 36)]
    assert lines[2] == "0 22 100Gbps 1000ns 0"  # h0 -- edge0_0, 200 m = 1 us
    assert all(len(line.split()) == 5 for line in lines[2:]) and len(lines) == 2 + 48
    assert TOPO.names[:2] == ("h0", "h1") and TOPO.names[22] == "edge0_0"
    assert TOPO.neighbour[(22, 1)] == 0 and TOPO.neighbour[(0, 1)] == 22
    back = {(a, b) for (a, _), b in TOPO.neighbour.items()}
    assert all((b, a) in back for a, b in back)  # every interface has its far end
    with pytest.raises(InputError, match="not a device"):
        TOPO.node("gpu7")


def test_flow_file_is_sorted_by_start_with_ports_numbered_per_pair() -> None:
    late_first = [Flow("h3", "h0", 2e6, start_s=1e-3), *FLOWS]
    out = flow_text(late_first, TOPO, start_offset_s=2.0)
    lines = out.text.splitlines()
    assert lines[0] == "4"
    assert lines[1:] == ["1 4 3 100 4000000 2.000000000", "2 0 3 100 4000000 2.000000000",
                         "1 4 3 100 1000000 2.000005000", "3 0 3 100 2000000 2.001000000"]
    assert out.key == {(1, 4, 10000): 1, (2, 0, 10000): 2, (1, 4, 10001): 3, (3, 0, 10000): 0}
    for bad, match in ((Flow("h1", "h0", 1.5), "whole number"), (Flow("h1", "h0", 1e6, stage=1), "staged")):
        with pytest.raises(InputError, match=match):
            flow_text([bad], TOPO)
    with pytest.raises(InputError, match="no flows"):
        flow_text([], TOPO)


def test_fct_lines_map_back_to_the_exported_flows() -> None:
    assert node_of_ip("0b000401") == 4 and node_of_ip("0b010001") == 256
    fct = parse_fct(FCT, EXPORTED)
    assert sorted(fct) == [0, 1, 2]
    assert fct[0].fct_ns == 1210377 and fct[0].size_bytes == 4_000_000
    assert fct[2].start_ns == 5000 and fct[2].standalone_ns == 88480
    with pytest.raises(ParseError, match="not exported"):
        parse_fct("0b000301 0b000001 10000 100 4000000 0 1 1\n", EXPORTED)
    with pytest.raises(ParseError, match="line 2"):
        parse_fct(FCT.splitlines()[0] + "\nFlow finished\n", EXPORTED)


def test_path_lines_give_device_paths_on_our_fat_tree() -> None:
    paths = parse_paths(STDOUT, EXPORTED, TOPO)
    assert paths[0] == ("h1", "edge0_0", "agg0_1", "core2", "agg1_1", "edge1_0", "h4")
    assert paths[1] == ("h2", "edge0_1", "agg0_0", "edge0_0", "h0")
    assert paths[2] == ("h1", "edge0_0", "agg0_0", "core0", "agg1_0", "edge1_0", "h4")
    fabric = fat_tree(4, 100e9)
    cabled = {frozenset((link.a.device, link.b.device)) for link in fabric.links}
    assert all(frozenset(hop) in cabled for p in paths.values() for hop in zip(p, p[1:], strict=False))
    with pytest.raises(ParseError, match="no interface 9"):
        parse_paths("PATH 0b000101 0b000401 10000 100 22 9\n", EXPORTED, TOPO)
    with pytest.raises(ParseError, match="not its destination"):
        parse_paths("PATH 0b000101 0b000401 10000 100 22 4\n", EXPORTED, TOPO)
    with pytest.raises(ParseError, match="not cabled"):  # h2 hangs off edge0_1, not edge0_0
        parse_paths("PATH 0b000201 0b000001 10000 100 22 1\n", EXPORTED, TOPO)


def test_pfc_file_gives_pauses_and_paused_time_per_port() -> None:
    by_port = {(p.node, p.ifindex): p for p in parse_pfc(PFC, TOPO, end_ns=2015000)}
    port = by_port[("edge0_0", 3)]
    assert port.neighbour == "agg0_0" and port.pauses == 2
    assert port.paused_ns == (2009300 - 2004100) + (2015000 - 2012500)  # the second pause still open at the end
    assert by_port[("agg0_1", 1)].paused_ns == 2015000 - 2011000
    with pytest.raises(ParseError, match="PFC file line 1"):
        parse_pfc("2004100 22 1 3 7\n", TOPO, 0)


def test_qlen_file_keeps_the_last_histogram() -> None:
    hist = parse_qlen(QLEN)
    assert hist == {(22, 1): [900, 40, 22, 0, 5], (22, 2): [1000], (26, 3): [999]}
    with pytest.raises(ParseError, match="line 2"):
        parse_qlen("time: 0\n22 x 1\n")


@settings(max_examples=25, deadline=None)
@given(st.text(alphabet=st.sampled_from("0123456789abcdef PATHtime:\n\t-"), max_size=300))
def test_random_text_raises_only_parse_errors(text: str) -> None:
    for parse in (lambda: parse_fct(text, EXPORTED), lambda: parse_paths(text, EXPORTED, TOPO),
                  lambda: parse_pfc(text, TOPO, 0), lambda: parse_qlen(text)):
        try:
            parse()
        except ParseError:
            pass


def test_a_10mb_line_is_read_in_linear_time() -> None:
    line = "0b000101 " * 1_200_000
    for parse in (lambda: parse_fct(line, EXPORTED), lambda: parse_paths("PATH " + line, EXPORTED, TOPO),
                  lambda: parse_pfc(line, TOPO, 0)):
        with pytest.raises(ParseError):
            parse()
    assert parse_qlen("22 1 " + "7 " * 2_000_000)[(22, 1)][-1] == 7
