"""The stepped engine's PFC counters against the per-step pause series they summarise: XOFF/XON episodes are
counted from state changes and paused time from XOFF time when a pause acts on the next step, so both must
agree with the series recorded at every step."""

from __future__ import annotations

import numpy as np
import pytest

from tensorfabric.sim import EcnConfig, PfcConfig, SimConfig, compile_network, fat_tree, run
from tensorfabric.sim.workloads import permutation

RATE = 100e9
MTU = 4096


@pytest.mark.parametrize("stuck", [(), ("h3",)])
def test_pause_counters_follow_the_pause_series(stuck: tuple[str, ...]) -> None:
    # 200 m cables (1 us) and a one-frame response: with a 2 us step a port obeys XOFF/XON on the next step.
    pfc = PfcConfig(xoff_bytes=15 * MTU, xon_offset_bytes=3 * MTU, response_s=(MTU + 64) * 8 / RATE)
    cfg = SimConfig(step_s=2e-6, duration_s=1.6e-3, dcqcn="none", ecn=EcnConfig(enabled=False), pfc=pfc, mtu=MTU,
                    header_bytes=64, ack_bytes=64, records=1000, stuck_nics=stuck, stop_when_idle=False,
                    engine="stepped")
    fabric = fat_tree(4, RATE, cable_m=200.0, fabric_m=200.0)
    net = compile_network(fabric, permutation([f"h{i}" for i in range(16)], 1_000_000, seed=3), cfg)
    trace = run(net, cfg)
    assert (net.pause_steps == 1).all()
    paused = trace.series_paused
    assert paused.shape[0] == trace.steps, "one record per step"
    start = net.forced_pause  # a stuck NIC's port starts in XOFF, and that counts as one
    before = np.vstack([start[None, :], paused[:-1]])
    np.testing.assert_array_equal(trace.edge_xoff_on, start + (paused & ~before).sum(axis=0))
    np.testing.assert_array_equal(trace.edge_xoff_off, (~paused & before).sum(axis=0))
    np.testing.assert_allclose(trace.edge_xoff_s, paused.sum(axis=0) * cfg.step_s, rtol=1e-12)
    np.testing.assert_allclose(trace.edge_paused_s, paused.sum(axis=0) * cfg.step_s, rtol=1e-12)
    assert trace.edge_xoff_on.sum() - start.sum() >= 5, "the permutation's collisions pause ports"
