"""Topology builders, ECMP routing, failed links and explicit paths; workload generators."""

from __future__ import annotations

from collections import Counter

import pytest

from tensorfabric.errors import InputError, SimulationError
from tensorfabric.sim import ModelShape, fat_tree, leaf_spine, ring, single_switch
from tensorfabric.sim.routing import Graph
from tensorfabric.sim.workloads import all_to_all, incast, kv_cache_bytes, permutation, tp_decode


def test_fat_tree_shape_and_ecmp() -> None:
    fab = fat_tree(4, 100e9)
    assert len(fab.hosts) == 16 and len(fab.switches) == 20 and len(fab.links) == 48
    g = Graph(fab)
    # h0 (pod 0) to h15 (pod 3): up to a core and down, six links, spread over the four cores.
    cores: Counter[str] = Counter()
    for flow_id in range(64):
        path = g.route(flow_id, "h0", "h15")
        assert len(path) == 6
        cores[g.edges[path[2]].dst] += 1
    assert len(cores) == 4
    assert len(g.route(0, "h0", "h1")) == 2  # same edge switch


def test_failed_link_forces_a_longer_path() -> None:
    fab = leaf_spine(3, 2, 1, 100e9)
    ok = Graph(fab).route(0, "h0", "h2")
    assert len(ok) == 4
    # leaf0 keeps only spine0, leaf2 only spine1: the route bounces through leaf1 (up-down-up-down).
    g = Graph(fab, failed=[("leaf0", "spine1"), ("leaf2", "spine0")])
    path = [g.edges[e].dst for e in g.route(0, "h0", "h2")]
    assert path == ["leaf0", "spine0", "leaf1", "spine1", "leaf2", "h2"]
    cut = Graph(fab, failed=[("leaf0", "spine0"), ("leaf0", "spine1")])
    with pytest.raises(SimulationError):
        cut.route(0, "h0", "h2")
    with pytest.raises(InputError):
        Graph(fab, failed=[("leaf0", "nowhere")])


def test_explicit_paths_and_bad_routes() -> None:
    g = Graph(ring(4, 1, 100e9))
    assert [g.edges[e].dst for e in g.explicit(0, ["h0", "s0", "s1", "s2", "h2"])] == ["s0", "s1", "s2", "h2"]
    with pytest.raises(InputError):
        g.explicit(0, ["h0", "s0", "s2", "h2"])  # no s0-s2 link
    with pytest.raises(InputError):
        g.route(0, "h0", "h0")
    with pytest.raises(InputError):
        g.route(0, "s0", "h1")
    with pytest.raises(InputError):
        ring(2, 1, 1e9)
    with pytest.raises(InputError):
        fat_tree(3, 1e9)
    with pytest.raises(InputError):
        single_switch(0, 1e9)


def test_workloads() -> None:
    hosts = [f"h{i}" for i in range(9)]
    perm = permutation(hosts, 1e6, seed=3)
    assert sorted(f.src for f in perm) == sorted(hosts) == sorted(f.dst for f in perm)
    assert all(f.src != f.dst for f in perm)
    assert len(all_to_all(hosts[:4], 1e3)) == 12
    assert [f.dst for f in incast(hosts[1:3], "h0", 1e3)] == ["h0", "h0"]
    model = ModelShape(layers=2, batch=8)
    flows = tp_decode(hosts[:4], model, tokens=2)
    # 2 tokens x 2 layers x 2 all-reduces x 2(N-1) ring steps x N ranks, each S/N bytes.
    assert len(flows) == 2 * 2 * 2 * 6 * 4
    assert {f.size_bytes for f in flows} == {8 * 8192 * 2 / 4}
    assert max(f.stage for f in flows) == 2 * 2 * 2 * 6
    assert kv_cache_bytes(ModelShape(layers=80, batch=1)) == 2 * 80 * 8 * 128 * 2048 * 2
    with pytest.raises(InputError):
        tp_decode(["h0"], model, 1)


def test_inference_tp_reports_per_token_latency() -> None:
    from tensorfabric.sim import Overrides, simulate

    r = simulate("inference-tp", Overrides(layers=2, tokens=2, duration_s=3e-3))
    lat = r.queues["token_latency_s"]
    assert len(lat) == 2 and all(x is not None and x > 0 for x in lat)
    # Each ring step moves 32 KiB at 100G (2.6 us) over 3 hops; 24 steps per token put a floor under it.
    assert all(x > 24 * 2.6e-6 for x in lat)


def test_pipeline_activations_chain_stages() -> None:
    from tensorfabric.sim import Flow, SimConfig, compile_network, run
    from tensorfabric.sim.workloads import pp_decode

    flows = pp_decode(["h0", "h1", "h2"], ModelShape(batch=4), tokens=3, stage_compute_s=5e-6)
    assert len(flows) == 6 and {f.size_bytes for f in flows} == {2 * 4 * 8192 * 2}
    flows.append(Flow("h3", "h2", 1e6, tag="cross"))  # stage 0: independent background traffic
    cfg = SimConfig(dcqcn="none", duration_s=1e-3)
    trace = run(compile_network(single_switch(4, 100e9), flows, cfg), cfg)
    begin, finish = trace.begin_s[:6], trace.finish_s[:6]
    assert all(begin[i + 1] >= finish[i] + 5e-6 - 1e-9 for i in range(5))  # each waits for the one before
    assert trace.begin_s[6] == 0.0


def test_failed_link_and_disabled_ecn_from_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tensorfabric.cli.main import main

    argv = ["simulate", "capacity-growth", "--duration", "400us", "--json", "--no-ecn",
            "--fail-link", "leaf0,spine0"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["params"]["ecn"] is False
    assert doc["params"]["failed_links"] == [["leaf0", "spine0"]]
    assert not any(p.startswith("spine0") for p in doc["queues"]["ports"])  # everything crosses spine1
    # Both leaves cut from different spines: no path at all is a simulation error (exit 1), named.
    assert main(["simulate", "capacity-growth", "--fail-link", "leaf0,spine0", "--fail-link", "leaf1,spine1"]) == 1
    assert "no path" in capsys.readouterr().err
    assert main(["simulate", "storm", "--fail-link", "leaf0"]) == 2
    assert main(["simulate", "storm", "--fail-link", "leaf0,mars"]) == 2
