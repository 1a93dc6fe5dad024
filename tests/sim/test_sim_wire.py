"""Wire physics the packet-level comparison pointed at: header bytes, ACK load and completion, FIFO drain of
a flow's last bytes, ECMP draws that differ by seed, and the `permutation` scenario with its error line."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tensorfabric.cli.main import main
from tensorfabric.errors import InputError
from tensorfabric.sim import (
    Flow,
    Overrides,
    PfcConfig,
    SimConfig,
    compile_network,
    fat_tree,
    run,
    simulate,
    single_switch,
)

RATE = 100e9


def test_header_bytes_stretch_a_lone_flow_by_the_wire_share() -> None:
    fabric = single_switch(2, RATE)
    flows = [Flow("h1", "h0", 4e6)]
    fct = {}
    for header in (0, 82):
        cfg = SimConfig(step_s=1e-7, dcqcn="none", duration_s=1e-3, header_bytes=header)
        fct[header] = float(run(compile_network(fabric, flows, cfg), cfg).finish_s[0])
    assert fct[82] - fct[0] == pytest.approx(4e6 * 8 / RATE * 82 / 4096, abs=2e-7)


def test_acks_load_the_reverse_path_and_delay_completion() -> None:
    fabric = single_switch(3, RATE)
    # h1 -> h0 at line rate while h0 -> h1 sends too: h0's uplink also carries h1's ACKs.
    flows = [Flow("h1", "h0", 4e6), Flow("h0", "h1", 4e6)]
    base = SimConfig(dcqcn="none", duration_s=5e-3, header_bytes=64)
    plain = run(compile_network(fabric, flows, base), base)
    acked_cfg = dataclasses.replace(base, ack_bytes=64)
    net = compile_network(fabric, flows, acked_cfg)
    acked = run(net, acked_cfg)
    assert (net.ack_delay_s > 0).all()
    stretch = acked.finish_s / plain.finish_s - 1
    assert stretch == pytest.approx([64 / 4160] * 2, abs=0.006)
    np.testing.assert_allclose(acked.delivered, 4e6)
    with pytest.raises(InputError):
        SimConfig(ack_bytes=-1)


def test_fifo_drains_the_last_bytes_in_one_sojourn() -> None:
    """Three ports into one: the two 1 MB flows get a third of the link each and finish together at
    3 MB / C; a geometric drain of their last bytes would stretch that by many sojourn times."""
    fabric = single_switch(4, RATE)
    flows = [Flow("h1", "h0", 1e6), Flow("h2", "h0", 1e6), Flow("h3", "h0", 4e6)]
    cfg = SimConfig(dcqcn="none", duration_s=5e-3, header_bytes=0)
    trace = run(compile_network(fabric, flows, cfg), cfg)
    assert trace.finish_s[:2] == pytest.approx([3e6 * 8 / RATE] * 2, rel=0.03)
    assert trace.finish_s[2] == pytest.approx(6e6 * 8 / RATE, rel=0.02)
    assert trace.dropped.sum() == 0.0


def test_ecmp_seeds_give_different_collision_patterns() -> None:
    fabric = fat_tree(4, RATE)
    hosts = [h.name for h in fabric.hosts]
    flows = [Flow(h, hosts[(i + 5) % len(hosts)], 1e6) for i, h in enumerate(hosts)]
    patterns = set()
    for seed in range(4):
        net = compile_network(fabric, flows, SimConfig(seed=seed))
        load = np.bincount(np.concatenate([np.array(p) for p in net.paths]), minlength=len(net.edges))
        patterns.add(tuple(sorted(load.tolist())))
    assert len(patterns) > 1


def test_permutation_scenario_and_its_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    r = simulate("permutation", Overrides(flows=16, size_bytes=1e6))
    assert len(r.flows) == 16 and all(f.fct_s is not None for f in r.flows) and r.drops_bytes == 0.0
    assert min(f.fct_s or 0 for f in r.flows) > 1e6 * 8 / RATE
    with pytest.raises(InputError, match="k\\^3/4"):
        simulate("permutation", Overrides(flows=100))
    assert main(["simulate", "permutation", "--flows", "16", "--size", "1MB"]) == 0
    out = capsys.readouterr().out
    assert "model error vs packet-level reference (htsim) on perm-128x4MB" in out
    assert "indicative only" in out  # 16 hosts is far from the 128 measured


def test_reference_pfc_is_lossless() -> None:
    assert PfcConfig(xoff_bytes=15 * 4096, xon_offset_bytes=3 * 4096).xoff_bytes == 61440
