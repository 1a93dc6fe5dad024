"""Egress queues are first in, first out, and what that does to PFC: a port that carries a congested flow
next to an innocent one is pushed over XOFF by the FIFO's swings and pauses both (docs/sim.md, "The residual,
found")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.sim import EcnConfig, Flow, PfcConfig, SimConfig, compile_network, fat_tree, run
from tensorfabric.sim.fifo import EgressFifo

RATE = 100e9
MTU = 4096


def test_bytes_leave_in_arrival_order() -> None:
    # Two segments of one queue: 100 B of segment 0 arrive first, then 100 B of segment 1; 50 B per step.
    fifo = EgressFifo(np.array([0, 0]), 1, 8)
    buf = np.zeros(2)
    sent = []
    for arrived in ([100.0, 0.0], [0.0, 100.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]):
        buf += arrived
        dep = fifo.serve(np.array(arrived), np.array([50.0]), buf)
        buf -= dep
        sent.append(dep.tolist())
    assert sent == [[50.0, 0.0], [50.0, 0.0], [0.0, 50.0], [0.0, 50.0], [0.0, 0.0]]


def test_bytes_of_one_step_leave_mixed_and_a_lone_segment_alone() -> None:
    # Queue 0 is shared (segments 0, 1), queue 1 has one segment: it sends min(backlog, capacity).
    fifo = EgressFifo(np.array([0, 0, 1]), 2, 8)
    arrived = np.array([30.0, 10.0, 70.0])
    dep = fifo.serve(arrived, np.array([20.0, 50.0]), arrived.copy())
    assert dep.tolist() == pytest.approx([15.0, 5.0, 50.0])


def test_bytes_older_than_the_window_still_leave() -> None:
    fifo = EgressFifo(np.array([0, 0]), 1, 8)
    buf = np.array([400.0, 100.0])
    fifo.serve(buf.copy(), np.array([0.0]), buf)  # paused while 8 more steps pass
    for _ in range(9):
        fifo.serve(np.zeros(2), np.array([0.0]), buf)
    total = np.zeros(2)
    for _ in range(10):
        dep = fifo.serve(np.zeros(2), np.array([100.0]), buf)
        buf -= dep
        total += dep
    assert total.tolist() == pytest.approx([400.0, 100.0])
    assert buf.tolist() == pytest.approx([0.0, 0.0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=8), st.integers(0, 2**32 - 1), st.sampled_from([8, 16]))
def test_fifo_is_work_conserving_and_bounded(seg_edge: list[int], seed: int, window: int) -> None:
    """Whatever the arrivals, pauses and window: each queue sends min(capacity, backlog), no segment more than
    it holds, and every byte leaves once the arrivals stop."""
    rng = np.random.default_rng(seed)
    se = np.array(seg_edge, dtype=np.int64)
    fifo = EgressFifo(se, 4, window)
    buf = np.zeros(se.size)
    for step in range(120):
        arrived = np.where(rng.random(se.size) < 0.5, rng.exponential(100.0, se.size), 0.0) if step < 60 else 0 * buf
        cap = np.where(rng.random(4) < 0.3, 0.0, rng.exponential(80.0, 4))  # 0: paused this step
        buf += arrived
        queue = np.bincount(se, buf, 4)
        dep = fifo.serve(arrived, cap, buf)
        assert (dep >= 0).all() and (dep <= buf + 1e-9).all()
        np.testing.assert_allclose(np.bincount(se, dep, 4), np.minimum(cap, queue), rtol=1e-9, atol=1e-6)
        buf -= dep
    for _ in range(200):
        buf -= fifo.serve(0 * buf, np.full(4, 1e4), buf)
    assert buf == pytest.approx(np.zeros(se.size), abs=1e-6)


def _four_flow_config() -> SimConfig:
    # The packet-level comparison's setting: XOFF 15 and XON 12 packets, 64 B headers and ACKs.
    pfc = PfcConfig(xoff_bytes=15 * MTU, xon_offset_bytes=3 * MTU, response_s=(MTU + 64) * 8 / RATE)
    return SimConfig(step_s=2e-6, duration_s=5e-3, dcqcn="none", ecn=EcnConfig(enabled=False), pfc=pfc, mtu=MTU,
                     header_bytes=64, ack_bytes=64)


def test_a_mixed_ingress_port_pauses_its_innocent_flow() -> None:
    """h16 -> h0 and h32 -> h0 collide on h0's link; h64 -> h2 shares h16's last fabric link, so edge0_0's port
    from agg0_3 is mixed (towards h0 and h2) and its port from agg0_1 is pure. Max-min gives all three half a
    link. The packet-level reference (htsim) gives the pure port's flow 604 us and the mixed port's two 717 us;
    a FIFO egress reproduces that direction: the mixed port is paused too, which slows the innocent h64 -> h2."""
    fabric = fat_tree(8, RATE, cable_m=200.0, fabric_m=200.0)
    flows = [
        Flow("h16", "h0", 4e6, path=("h16", "edge1_0", "agg1_3", "core15", "agg0_3", "edge0_0", "h0")),
        Flow("h32", "h0", 4e6, path=("h32", "edge2_0", "agg2_1", "core7", "agg0_1", "edge0_0", "h0")),
        Flow("h64", "h2", 4e6, path=("h64", "edge4_0", "agg4_3", "core12", "agg0_3", "edge0_0", "h2")),
    ]
    cfg = _four_flow_config()
    net = compile_network(fabric, flows, cfg)
    trace = run(net, cfg)
    mixed, pure, fct = trace.finish_s[[0, 2]], trace.finish_s[1], trace.finish_s
    assert np.isfinite(fct).all()
    assert mixed == pytest.approx([mixed[0]] * 2, rel=0.01)  # the mixed port's two flows share its fate
    assert pure < 0.93 * mixed.min()  # and the pure port's flow gets ahead of them
    edge = {(e.src, e.dst): i for i, e in enumerate(net.edges)}
    assert trace.edge_paused_s[edge[("agg0_3", "edge0_0")]] > 0.02 * fct.max()
    assert trace.dropped.sum() == 0.0
