"""Properties on random small fabrics and flows: sent = delivered + dropped + still in the network, per
flow; and PFC with the computed headroom never drops."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.sim import EcnConfig, Flow, PfcConfig, SimConfig, compile_network, leaf_spine, run, single_switch


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[object, list[Flow], SimConfig]:
    rate = draw(st.sampled_from([25e9, 40e9, 100e9]))
    if draw(st.booleans()):
        fabric = single_switch(draw(st.integers(2, 6)), rate)
    else:
        fabric = leaf_spine(2, draw(st.integers(1, 2)), draw(st.integers(1, 3)), rate)
    hosts = [h.name for h in fabric.hosts]
    n = draw(st.integers(1, 6))
    flows = []
    for _ in range(n):
        src, dst = draw(st.permutations(hosts))[:2]
        flows.append(Flow(src, dst, draw(st.floats(1e3, 3e6)), start_s=draw(st.floats(0, 1e-4))))
    pfc = PfcConfig(enabled=draw(st.booleans()), xoff_bytes=draw(st.floats(5e3, 2e5)),
                    xon_offset_bytes=1e3, headroom_bytes=draw(st.one_of(st.none(), st.floats(0, 5e4))))
    cfg = SimConfig(step_s=draw(st.sampled_from([5e-7, 1e-6, 2e-6])), duration_s=draw(st.floats(5e-5, 6e-4)),
                    dcqcn=draw(st.sampled_from(["paper", "firmware", "none"])),
                    ecn=EcnConfig(kmin_bytes=2e3, kmax_bytes=draw(st.floats(1e4, 4e5)), pmax=0.2), pfc=pfc,
                    seed=draw(st.integers(0, 5)), stop_when_idle=draw(st.booleans()))
    return fabric, flows, cfg


@settings(max_examples=40, deadline=None)
@given(scenarios())
def test_bytes_are_conserved(case: tuple[object, list[Flow], SimConfig]) -> None:
    fabric, flows, cfg = case
    trace = run(compile_network(fabric, flows, cfg), cfg)  # type: ignore[arg-type]
    size = np.array([f.size_bytes for f in flows])
    for arr in (trace.sent, trace.delivered, trace.dropped, trace.buffered):
        assert (arr >= -1e-6 * size).all()
    np.testing.assert_allclose(trace.sent, trace.delivered + trace.dropped + trace.buffered, rtol=1e-9, atol=1e-3)
    assert (trace.sent <= size * (1 + 1e-12)).all()
    done = ~np.isnan(trace.finish_s)
    np.testing.assert_allclose((trace.delivered + trace.dropped)[done], size[done], rtol=1e-6)
    if cfg.pfc.enabled and cfg.pfc.headroom_bytes is None:
        assert trace.dropped.sum() == 0.0, "PFC with the computed headroom must be lossless"
