"""Simulator speed on the issue's two fat-tree permutations, against a baseline measured in the same run.

Cases (issue 8, acceptance 5; packet-level reference on a 2-core machine: htsim 15.5 s and 57 s):

* k = 8 three-tier fat tree, 128 hosts at 100G, permutation of 32 MB flows, PFC on;
* k = 16, 1024 hosts, permutation of 4 MB flows;
* k = 8, incast h1..h16 -> h0 of 4 MB each (issue 20's small scenario).

Each runs with PFC alone (as the htsim reference: no ECN, no congestion control) and with PFC + ECN +
firmware DCQCN; ``engine="auto"`` picks the engine (the event engine for the PFC-alone incast, the stepped
one elsewhere), and the engine it ran is recorded. Reported: build time (topology, routing, arrays), run
wall and CPU time, simulated time, flow completion times against the ideal (bytes / line rate).
Baseline: a bare Python heapq event loop (two events per packet-hop, no protocol logic) timed here,
extrapolated to the packet-hop events a packet-level simulator would need for the same traffic -- the
floor for any pure-Python packet simulator on this machine.

    .venv/bin/python benchmarks/sim_speed.py [--quick]

Writes benchmarks/results/sim_speed.json.
"""

from __future__ import annotations

import argparse
import heapq
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from tensorfabric.fsutil import atomic_write_json
from tensorfabric.sim import EcnConfig, PfcConfig, SimConfig, compile_network, fat_tree, run
from tensorfabric.sim.events import applies
from tensorfabric.sim.workloads import incast, permutation

RATE = 100e9
MTU = 4096
OUT = Path(__file__).resolve().parent / "results" / "sim_speed.json"
# ECN below the 100 KB static XOFF (the ordering rule: marking must act before pause), so DCQCN engages on
# the 2:1 ECMP collisions of a permutation; with the HPCC 400 KB Kmin only PFC would ever act.
ECN = EcnConfig(kmin_bytes=50e3, kmax_bytes=200e3, pmax=0.2)


def heapq_events_per_s(n: int = 400_000) -> float:
    """Events per second of a bare heapq loop: pop one, push one (a packet moving one hop)."""
    heap = [(float(i), i) for i in range(1024)]
    heapq.heapify(heap)
    start = time.perf_counter()
    for _ in range(n):
        t, i = heapq.heappop(heap)
        heapq.heappush(heap, (t + 1e-6, i))
    return n / (time.perf_counter() - start)


def case(k: int, size: float, cc: str, step_s: float, kind: str = "perm") -> dict[str, Any]:
    t0, c0 = time.perf_counter(), time.process_time()
    fabric = fat_tree(k, RATE)
    hosts = [h.name for h in fabric.hosts]
    flows = incast(hosts[1:17], hosts[0], size) if kind == "incast" else permutation(hosts, size, seed=1)
    cfg = SimConfig(step_s=step_s, duration_s=0.2, dcqcn=cc,  # type: ignore[arg-type]
                    ecn=ECN if cc != "none" else EcnConfig(enabled=False), pfc=PfcConfig(), mtu=MTU)
    net = compile_network(fabric, flows, cfg)
    t1, c1 = time.perf_counter(), time.process_time()
    trace = run(net, cfg)
    t2, c2 = time.perf_counter(), time.process_time()
    fct = trace.finish_s - trace.begin_s
    ideal = size * 8 / RATE
    hops = np.array([len(p) for p in net.paths])
    packet_hops = float((np.ceil(size / MTU) * hops).sum())
    why_not = applies(net, cfg)
    return {
        "k": k, "kind": kind, "hosts": len(fabric.hosts), "flows": len(flows), "flow_bytes": size, "dcqcn": cc,
        "step_s": step_s, "engine": "events" if why_not is None else "stepped",
        "build_wall_s": t1 - t0, "run_wall_s": t2 - t1, "wall_s": t2 - t0, "run_cpu_s": c2 - c1,
        "cpu_s": c2 - c0, "steps": trace.steps, "us_per_step": (t2 - t1) / trace.steps * 1e6,
        "sim_time_s": trace.sim_time_s, "ideal_fct_s": ideal,
        "fct_s": {"min": float(np.nanmin(fct)), "median": float(np.nanmedian(fct)),
                  "p99": float(np.nanpercentile(fct, 99)), "max": float(np.nanmax(fct))},
        "unfinished": int(np.isnan(fct).sum()), "drops_bytes": float(trace.dropped.sum()),
        "slowdown_max": float(np.nanmax(fct) / ideal), "packet_hop_events": 2 * packet_hops,
        "goal_wall_s": None if kind == "incast" else 1.5 if k == 8 else 6.0,
        "reference_packet_sim_wall_s": None if kind == "incast" else 15.5 if k == 8 else 57.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="only the PFC-only cases")
    parser.add_argument("--step", type=float, default=1e-6, help="time step in seconds (default 1e-6)")
    args = parser.parse_args()
    rate = heapq_events_per_s()
    results = []
    modes = ["none"] if args.quick else ["none", "firmware"]
    for k, size, kind in ((8, 32e6, "perm"), (16, 4e6, "perm"), (8, 4e6, "incast")):
        for cc in modes:
            r = case(k, size, cc, args.step, kind)
            r["baseline_heapq_wall_s"] = r["packet_hop_events"] / rate
            results.append(r)
            fct = r["fct_s"]
            what = f"{r['hosts']:>4} hosts" if kind == "perm" else "  16->1 incast"
            goal = "" if r["goal_wall_s"] is None else f"; goal {r['goal_wall_s']}s"
            print(f"k={k:<2} {what} x {size / 1e6:g} MB  dcqcn={cc:<8} {r['engine']:<7} wall {r['wall_s']:.3f}s "
                  f"(build {r['build_wall_s']:.3f}s, run {r['run_wall_s']:.3f}s, cpu {r['cpu_s']:.3f}s{goal})  "
                  f"simulated {r['sim_time_s'] * 1e3:.2f}ms  FCT min/med/max "
                  f"{fct['min'] * 1e3:.2f}/{fct['median'] * 1e3:.2f}/{fct['max'] * 1e3:.2f}ms vs ideal "
                  f"{r['ideal_fct_s'] * 1e3:.2f}ms  heapq floor {r['baseline_heapq_wall_s']:.1f}s", flush=True)
    doc = {
        "benchmark": "sim_speed",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
                    "load_avg_1m": os.getloadavg()[0]},
        "baseline": {"kind": "bare heapq event loop, same run", "events_per_s": rate},
        "results": results,
    }
    atomic_write_json(OUT, doc)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
