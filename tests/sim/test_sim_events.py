"""The event engine (PFC steady state from flow event to flow event): when auto selects it, closed-form
port-level fairness, agreement with the stepped engine, and conservation/capacity under Hypothesis."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tensorfabric.errors import InputError
from tensorfabric.sim import EcnConfig, Flow, SimConfig, compile_network, fat_tree, leaf_spine, run, single_switch
from tensorfabric.sim.events import applies
from tensorfabric.sim.pfc import PfcConfig
from tensorfabric.sim.workloads import incast, permutation
from tensorfabric.topology import Fabric

RATE = 100e9
PFC_ONLY = SimConfig(step_s=1e-6, duration_s=0.05, dcqcn="none", ecn=EcnConfig(enabled=False), header_bytes=0)


def _fct(fabric: Fabric, flows: list[Flow], cfg: SimConfig) -> np.ndarray:
    trace = run(compile_network(fabric, flows, cfg), cfg)
    return np.asarray(trace.finish_s - trace.begin_s)


def test_auto_selects_events_only_without_head_of_line_coupling() -> None:
    fabric = fat_tree(4, RATE)
    hosts = [h.name for h in fabric.hosts]
    many_to_one = incast(hosts[1:9], hosts[0], 1e6)
    assert applies(compile_network(fabric, many_to_one, PFC_ONLY), PFC_ONLY) is None
    perm = compile_network(fabric, permutation(hosts, 1e6, seed=1), PFC_ONLY)
    assert "head-of-line" in (applies(perm, PFC_ONLY) or "")
    for cfg, why in ((dataclasses.replace(PFC_ONLY, dcqcn="firmware"), "congestion control"),
                     (dataclasses.replace(PFC_ONLY, ecn=EcnConfig()), "ECN"),
                     (dataclasses.replace(PFC_ONLY, counter_interval_s=1e-4), "counter stream")):
        assert why in (applies(compile_network(fabric, many_to_one, cfg), cfg) or "")


def test_events_engine_is_refused_where_it_does_not_apply() -> None:
    fabric = fat_tree(4, RATE)
    cfg = dataclasses.replace(PFC_ONLY, engine="events")
    net = compile_network(fabric, permutation([h.name for h in fabric.hosts], 1e5, seed=1), cfg)
    with pytest.raises(InputError, match="head-of-line"):
        run(net, cfg)
    with pytest.raises(InputError, match="engine"):
        SimConfig(engine="fast")  # type: ignore[arg-type]


# The packet-level network does give ideal port-level fairness across two tiers (benchmarks/sim_fairness_packet.py:
# htsim_roce_paths on the k=8 fat tree, receiver h0, senders on its edge and three more whose paths all enter h0's
# edge through one aggregation uplink): 2.996 / 3.001 S/C for the two local flows, 4.886-5.022 S/C for the
# others; 4.004-4.013 / 6.008-6.022 S/C with three local senders; over hop latencies of 0.015-1 us and PFC
# thresholds of 8/10-20/24 packets the local mean stays within 2.979-3.005 and 3.992-4.020 S/C. The stepped engine
# used to miss it (3.225 S/C here at a 1 us step; 4.314 against htsim's 4.009 with three local senders at 2 us):
# float noise split exact threshold ties between identical ports, PAUSE/XON acted at step boundaries, and
# identical NIC ports crossed XON at the same instant, so they stayed in lockstep and queued as one joint block.
# Ties are now decided alike and PAUSE/XON act at their sub-step instant, one packet time apart per egress
# (sim/pausetiming.py): within 1.2 % of htsim over that sweep, at every step from 2 to 0.25 us.


@pytest.mark.parametrize("engine", ["events", "stepped"])
def test_port_level_fairness_two_tiers(engine: str) -> None:
    # h0 on leaf0 receives from h1, h2 (leaf0) and h3, h4, h5 (leaf1, through the one spine). leaf0's egress
    # to h0 serves its three ingress ports equally: h1 and h2 get C/3 each, the spine port C/3, split three
    # ways upstream (C/9 each). Once h1, h2 finish (3S/C) the spine port has it all: the last finish at 5S/C.
    fabric = leaf_spine(2, 1, 3, RATE)
    size = 2e6
    flows = [Flow(f"h{i}", "h0", size) for i in range(1, 6)]
    fct = _fct(fabric, flows, dataclasses.replace(PFC_ONLY, engine=engine))  # type: ignore[arg-type]
    unit = size / (RATE / 8)
    np.testing.assert_allclose(fct, [3 * unit] * 2 + [5 * unit] * 3, rtol=0.02)


# htsim_roce_paths' own draws (benchmarks/sim_fairness_packet.py, time() pinned to 11 and 3) and its FCTs in us.
_HTSIM_FAIRNESS = {
    "2 local + 3 via one uplink": ([1, 2, 4, 5, 6], "agg0_1", [973.8, 975.5, 1632.1, 1587.8, 1631.4]),
    "3 local + 3 via one uplink": ([1, 2, 3, 4, 5, 6], "agg0_2", [1304.3, 1301.3, 1303.6, 1957.2, 1952.6, 1955.6]),
}


@pytest.mark.parametrize(("case", "engine"), [
    ("2 local + 3 via one uplink", "events"), ("2 local + 3 via one uplink", "stepped"),
    ("3 local + 3 via one uplink", "events"), ("3 local + 3 via one uplink", "stepped"),
])
def test_port_level_fairness_matches_the_packet_level_reference(case: str, engine: str) -> None:
    # The reference's setup (sim_vs_packet.py): k=8 fat tree, 100G, 1 us per hop, MTU 4096 + 64 B of header,
    # a 64 B ACK per packet, XOFF 15 / XON 12 packets, a PAUSE obeyed after the frame in flight; 2 us step.
    senders, uplink, ref_us = _HTSIM_FAIRNESS[case]
    mtu, header = 4096, 64
    pfc = PfcConfig(xoff_bytes=15 * mtu, xon_offset_bytes=3 * mtu, response_s=(mtu + header) * 8 / RATE)
    cfg = SimConfig(step_s=2e-6, duration_s=0.02, dcqcn="none", ecn=EcnConfig(enabled=False), pfc=pfc, mtu=mtu,
                    header_bytes=header, ack_bytes=header, engine=engine)  # type: ignore[arg-type]
    flows = [Flow(f"h{s}", "h0", 4e6, path=(f"h{s}", "edge0_0", "h0") if s < 4 else
                  (f"h{s}", f"edge0_{s // 4}", uplink, "edge0_0", "h0")) for s in senders]
    fct = _fct(fat_tree(8, RATE, cable_m=200.0, fabric_m=200.0), flows, cfg) * 1e6
    ref = np.array(ref_us)
    local = np.array(senders) < 4
    # Per group (htsim's three remote flows themselves spread over 3 %), then every flow.
    np.testing.assert_allclose([fct[local].mean(), fct[~local].mean()], [ref[local].mean(), ref[~local].mean()],
                               rtol=0.015)
    np.testing.assert_allclose(fct, ref, rtol=0.03)


@pytest.mark.parametrize("engine", ["events", "stepped"])
def test_stages_chain_on_completion(engine: str) -> None:
    # Stage 1 (h1, h2 -> h0) starts after its 20 us gap and shares the link: 2S/C each. Stage 2 (h3, h4 -> h0)
    # starts when stage 1 is delivered, plus the gap again, and takes 2S/C too.
    fabric = single_switch(5, RATE)
    size, gap = 1e6, 20e-6
    flows = [Flow(f"h{i}", "h0", size, stage=1 + (i > 2), gap_s=gap) for i in range(1, 5)]
    cfg = dataclasses.replace(PFC_ONLY, engine=engine)  # type: ignore[arg-type]
    trace = run(compile_network(fabric, flows, cfg), cfg)
    unit = size / (RATE / 8)
    np.testing.assert_allclose(trace.finish_s - trace.begin_s, [2 * unit] * 4, rtol=0.02)
    np.testing.assert_allclose(trace.begin_s, [gap] * 2 + [2 * gap + 2 * unit] * 2, rtol=0.02)


@st.composite
def incasts(draw: st.DrawFn, sizes: tuple[float, float] = (2e5, 2e6)) -> tuple[Fabric, list[Flow], SimConfig]:
    kind = draw(st.sampled_from(["single", "leaf-spine", "fat-tree"]))
    if kind == "single":
        fabric = single_switch(draw(st.integers(3, 8)), RATE)
    elif kind == "leaf-spine":
        fabric = leaf_spine(draw(st.integers(2, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 3)), RATE)
    else:
        fabric = fat_tree(4, RATE)
    hosts = [h.name for h in fabric.hosts]
    dst = draw(st.sampled_from(hosts))
    others = [h for h in hosts if h != dst]
    senders = draw(st.lists(st.sampled_from(others), min_size=1, max_size=min(8, len(others)), unique=True))
    flows = [Flow(s, dst, draw(st.floats(*sizes)), start_s=draw(st.sampled_from([0.0, 0.0, 5e-5, 2e-4])))
             for s in senders]
    cfg = dataclasses.replace(PFC_ONLY, seed=draw(st.integers(0, 3)), duration_s=draw(st.floats(2e-4, 2e-3)),
                              stop_when_idle=draw(st.booleans()), ack_bytes=draw(st.sampled_from([0, 64])))
    return fabric, flows, cfg


@settings(max_examples=40, deadline=None)
@given(incasts())
def test_events_conserve_bytes_and_respect_capacity(case: tuple[Fabric, list[Flow], SimConfig]) -> None:
    fabric, flows, cfg = case
    net = compile_network(fabric, flows, cfg)
    assume(applies(net, cfg) is None)
    trace = run(net, cfg)
    size = net.size
    for arr in (trace.sent, trace.delivered, trace.buffered):
        assert (arr >= -1e-6 * size).all()
    np.testing.assert_allclose(trace.sent, trace.delivered + trace.dropped + trace.buffered, rtol=1e-9, atol=1e-3)
    assert (trace.sent <= size * (1 + 1e-12)).all()
    assert trace.dropped.sum() == 0.0, "lossless PFC drops nothing"
    done = ~np.isnan(trace.finish_s)
    np.testing.assert_allclose(trace.delivered[done], size[done], rtol=1e-9)
    # No flow beats its NIC: line rate plus the path's propagation delay.
    line = net.line_bps / 8 * net.payload_fraction
    assert (trace.finish_s - trace.begin_s)[done].round(12).min(initial=np.inf) >= 0
    assert ((trace.finish_s - trace.begin_s)[done] >= (size / line + net.path_prop_s)[done] * (1 - 1e-9)).all()
    # Every sampled instant: no directed link carries more than its capacity.
    on_edge = np.zeros((len(flows), len(net.edges)))
    for f, path in enumerate(net.paths):
        on_edge[f, list(path)] = 1.0
    load = trace.series_rate.astype(np.float64) @ on_edge
    rates = np.array([e.rate_bps for e in net.edges])
    assert (load <= rates * (1 + 1e-6)).all()


@settings(max_examples=30, deadline=None)
@given(incasts(sizes=(1e6, 4e6)))
def test_events_agree_with_the_stepped_engine(case: tuple[Fabric, list[Flow], SimConfig]) -> None:
    # Flows start together here. With staggered starts the stepped engine is no reference for this one: on the
    # example Hypothesis found (single switch; h1-h3 at 0, h4 1 MB at 50 us, h5 1.29 MB at 200 us) its FCTs move
    # with the step by up to 17 % (h4 352 / 390 / 365 / 422 us at 1 / 0.5 / 0.25 / 0.1 us steps, h5 377 / 452 /
    # 452 / 451), and on 20 staggered cases with htsim's parameters, against an htsim that honours start times
    # (htsim_roce as built starts every flow at 0), it misses by up to 27.1 % at a 1 us step (p90 7.8 %), the
    # event engine by up to 15.1 % (p90 4.1 %). Staggered starts stay covered by the conservation and capacity
    # property above.
    #
    # Multi-tier shapes are back in: the stepped engine used to split a two-tier egress unequally (a k=4 fat tree,
    # h3 -> h2 beside h4, h5, h6 -> h2 through the uplinks: 366 us stepped against 428 us events, found with
    # --hypothesis-seed=1), which sim/pausetiming.py fixed; 0 failures over --hypothesis-seed 0-40 since.
    fabric, flows, cfg = case
    flows = [dataclasses.replace(f, start_s=flows[0].start_s) for f in flows]
    cfg = dataclasses.replace(cfg, duration_s=0.05, stop_when_idle=True)
    net = compile_network(fabric, flows, cfg)
    assume(applies(net, cfg) is None)
    events = _fct(fabric, flows, dataclasses.replace(cfg, engine="events"))
    stepped = _fct(fabric, flows, dataclasses.replace(cfg, engine="stepped"))
    # Allowed: the stepped engine rounds every hop's delay up to a whole step (a 3 m cable takes a 1 us step),
    # and the event engine skips the queue transients: after an event, the bytes queued ahead at the egress
    # (at most XOFF + headroom per feeding port) drain before the new shares hold.
    rounding = np.array([len(p) + 1 for p in net.paths]) * cfg.step_s
    queued = len(flows) * (cfg.pfc.xoff_bytes + net.headroom_bytes.max()) / (RATE / 8)
    assert (np.abs(events - stepped) <= 0.02 * stepped + rounding + queued).all(), (events, stepped)


@settings(max_examples=40, deadline=None)
@given(incasts())
def test_events_rates_are_nested_port_fair_shares(case: tuple[Fabric, list[Flow], SimConfig]) -> None:
    # What htsim shows on the two-tier cases above, as an independent closed form on random incast trees: with
    # every sender active and every link at one rate, each port brings at least any fair share, so each egress
    # splits its rate equally among the ports feeding it, and a flow gets C x the product of 1 / (ports) along
    # its path. Checked at the first sample, before any flow has finished.
    fabric, flows, cfg = case
    flows = [dataclasses.replace(f, start_s=0.0) for f in flows]
    cfg = dataclasses.replace(cfg, records=4000, duration_s=0.05, engine="events")
    net = compile_network(fabric, flows, cfg)
    assume(applies(net, cfg) is None)
    ports: dict[int, set[int]] = {}
    for s_in, s_out in zip(net.seg_in.tolist(), net.seg_edge.tolist(), strict=True):
        ports.setdefault(s_out, set()).add(s_in)
    share = np.array([np.prod([1 / len(ports[e]) for e in path[1:]]) for path in net.paths])
    trace = run(net, cfg)
    assert trace.series_t[0] < np.nanmin(trace.finish_s - net.ack_delay_s - net.path_prop_s)
    np.testing.assert_allclose(trace.series_rate[0], share * RATE, rtol=1e-5)


def test_cli_engine_option(capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main

    assert main(["simulate", "incast", "--engine", "events"]) == 2  # the scenario's default is paper DCQCN
    err = capsys.readouterr().err
    assert "congestion control" in err and len(err.strip().splitlines()) == 1
    assert main(["simulate", "incast", "--dcqcn", "none", "--no-ecn", "--flows", "4", "--size", "1MB", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["params"]["engine"] == "events"
    assert all(f["fct_s"] is not None for f in doc["flows"])
