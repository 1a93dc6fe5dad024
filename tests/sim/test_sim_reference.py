"""The packet-level reference's formats (htsim connection matrix in, ``htsim_roce`` stdout back), the path
mapping onto our fat tree, and the shipped error table ``simulate`` prints from."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.errors import InputError, ParseError
from tensorfabric.sim import Flow, SimConfig, compile_network, fat_tree
from tensorfabric.sim.accuracy import error_summary, for_flows, load_table, nearest
from tensorfabric.sim.reference import connection_matrix, fat_tree_path, parse_output

# What htsim_roce (csg-htsim 841d9e7) prints for a run, in its own syntax, trimmed: setup chatter, the
# ECMP lines of the path-logging build, completions (the last one twice, as htsim does), the counters.
HTSIM_OUT = """\
no_of_nodes 128
Parsed args
Fat Tree topology with 1us links and 0us switching latency.
Connection 4->0 starting at 0 size 4000000
Connection 16->0 starting at 0 size 4000000
Starting simulation
ECMP 1 queue lossless output(100000Mb/s,61440bytes)LS1->US2(0)
ECMP 2 queue lossless output(100000Mb/s,61440bytes)LS4->US6(0)
ECMP 1 queue lossless output(100000Mb/s,61440bytes)US2->LS_0(0)
ECMP 2 queue lossless output(100000Mb/s,61440bytes)US6->CS2(0)
ECMP 2 queue lossless output(100000Mb/s,61440bytes)CS2->US2(0)
ECMP 2 queue lossless output(100000Mb/s,61440bytes)US2->LS_0(0)
 Queue LS0->DST0(0) LOSSLESS not working! I should have dropped this packet15
Flow Roce_4_0 2989 finished at 4225.27 total bytes 4001792
Flow Roce_16_0 3025 finished at 4733.19 total bytes 4001792
Flow Roce_16_0 3025 finished at 4733.19 total bytes 4001792
.Done
New: 0 Rtx: 0
"""
FLOWS = [Flow("h4", "h0", 4e6), Flow("h16", "h0", 4e6)]


def test_connection_matrix_is_htsim_syntax() -> None:
    text = connection_matrix([Flow("h4", "h0", 4e6), Flow("h16", "h0", 4e6)], 128)
    assert text == "Nodes 128\nConnections 2\n4->0 id 1 start 0 size 4000000\n16->0 id 2 start 0 size 4000000\n"
    # htsim_roce starts every connection at 0 whatever the matrix says: a staggered flow is refused.
    with pytest.raises(InputError, match="starts every connection at 0"):
        connection_matrix([Flow("h4", "h0", 4e6), Flow("h16", "h0", 4e6, start_s=2e-6)], 128)
    with pytest.raises(InputError, match="h<N>"):
        connection_matrix([Flow("gpu4", "h0", 1e6)], 128)
    with pytest.raises(InputError, match="outside"):
        connection_matrix([Flow("h200", "h0", 1e6)], 128)
    with pytest.raises(InputError, match="staged"):
        connection_matrix([Flow("h1", "h0", 1e6, stage=2)], 128)
    with pytest.raises(InputError, match="whole number"):
        connection_matrix([Flow("h1", "h0", 1.5)], 128)


def test_parse_output_reads_completions_paths_and_counters() -> None:
    run = parse_output(HTSIM_OUT, FLOWS)
    assert run.finish_s == {(4, 0): pytest.approx(4225.27e-6), (16, 0): pytest.approx(4733.19e-6)}
    assert run.hops[(4, 0)] == (("LS", 1, "US", 2), ("US", 2, "LS", 0))
    assert run.retransmits == 0
    # Same ToR, same pod: the path our fat tree needs, through htsim's core-wiring permutation.
    assert fat_tree_path(8, 4, 0, run.hops[(4, 0)]) == ("h4", "edge0_1", "agg0_2", "edge0_0", "h0")
    path = fat_tree_path(8, 16, 0, run.hops[(16, 0)])
    assert path == ("h16", "edge1_0", "agg1_2", "core8", "agg0_2", "edge0_0", "h0")
    # Every consecutive pair is a link of our k=8 fat tree.
    compile_network(fat_tree(8, 100e9), [Flow("h16", "h0", 1e6, path=path)], SimConfig())
    assert fat_tree_path(8, 1, 0, ()) == ("h1", "edge0_0", "h0")


def test_parse_output_refuses_what_it_cannot_read() -> None:
    with pytest.raises(ParseError, match="completion"):
        parse_output("Flow Roce_4_0 2989 finished at soon\n")
    with pytest.raises(ParseError, match="ECMP"):
        parse_output("ECMP 1 queue lossless output somewhere\n", FLOWS)
    with pytest.raises(ParseError, match="not in the exported matrix"):
        parse_output("ECMP 9 queue lossless output(100000Mb/s,61440bytes)LS1->US2(0)\n", FLOWS)
    with pytest.raises(ParseError, match="does not follow"):
        fat_tree_path(8, 4, 0, (("LS", 3, "US", 2),))
    with pytest.raises(ParseError, match="destination's ToR"):
        fat_tree_path(8, 4, 0, (("LS", 1, "US", 2), ("US", 2, "LS", 1)))


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_parse_output_hostile_text(text: str) -> None:
    try:
        parse_output(text, FLOWS)
    except (ParseError, InputError):
        pass


def test_parse_output_long_line() -> None:
    for prefix in ("Flow Roce_", "ECMP 1 ", "New: 0 Rtx: "):
        with pytest.raises(ParseError):
            parse_output(prefix + "9" * 10_000_000 + "\n", FLOWS)


def test_error_summary_quantiles_and_flow_by_flow() -> None:
    ref = np.array([1.0, 2.0, 3.0, 4.0])
    e = error_summary([1.1, 2.0, 2.7, 4.0], ref)
    assert e["rel_error"]["max"] == pytest.approx(0.0)
    assert e["rel_error"]["p50"] == pytest.approx(2.35 / 2.5 - 1)
    assert e["flow_median_abs_rel_error"] == pytest.approx(0.05)
    nan = error_summary([1.0, np.nan, 3.0, 4.0], ref)
    assert nan["unfinished_model"] == 1 and nan["flow_median_abs_rel_error"] == 0.0
    with pytest.raises(InputError):
        error_summary([1.0], ref)


def test_shipped_table_and_nearest_match() -> None:
    rows = load_table()
    assert {r["name"] for r in rows} >= {"incast-16x4MB", "perm-128x4MB", "perm-128x32MB"}
    m = nearest("perm", 128, 32e6)
    assert m is not None and m.name == "perm-128x32MB" and m.distance == 0.0
    inc = nearest("incast", 128, 4e6)
    assert inc is not None and inc.name == "incast-16x4MB"
    far = for_flows(["h1", "h2"], [1e9, 1e9], 16, "firmware")
    assert far is not None and len(far["notes"]) == 2
    assert for_flows([], [], 16, "none") is None
