"""Acceptance 3: a cyclic buffer dependency on a ring deadlocks; the same traffic routed acyclically does not."""

from __future__ import annotations

from tensorfabric.sim import Overrides, simulate


def test_ring_with_cyclic_dependency_deadlocks() -> None:
    r = simulate("deadlock", Overrides(duration_s=2e-3))
    d = r.pause["deadlock"]
    assert len(d["cycle_ports"]) == 4
    assert all(d["cycle_paused_at_end"])
    assert d["tail_delivered_bytes"] == 0.0
    assert d["stuck_bytes"] > 0
    assert d["unfinished_flows"] == len(r.flows)
    assert d["deadlocked"]


def test_acyclic_variant_completes() -> None:
    r = simulate("deadlock", Overrides(duration_s=4e-3, acyclic=True))
    d = r.pause["deadlock"]
    assert not d["deadlocked"]
    assert d["unfinished_flows"] == 0
    assert all(f.fct_s is not None for f in r.flows)
    assert r.drops_bytes == 0.0
