"""PFC port-level fairness across two tiers: the packet-level reference against both engines, flow by flow.

The question (tests/sim/test_sim_events.py::test_port_level_fairness_two_tiers): h0 receives from senders on
its own edge switch and from three senders whose paths all enter that edge switch through ONE aggregation
uplink. Ideal port-level fairness gives every ingress port of h0's egress an equal share and splits the
uplink port's share again upstream; with two local senders that is 3 S/C for them and 5 S/C for the three
others. Does the packet-level network (csg-htsim ``htsim_roce_paths``, k = 8 fat tree, the flags and the
model configuration of ``sim_vs_packet.py``) do that, and do our engines on htsim's own paths?

htsim draws every flow's ECMP path id from ``srand(time(NULL))``. To pick the draw where the three remote
paths share one uplink, the reference runs under a tiny ``LD_PRELOAD`` shim (compiled here with ``cc``)
that pins ``time()`` to 0, 1, 2 ...; the first draw with the wanted shape is used. Nothing else changes.

A sweep then varies what sets the pause cycle -- the hop latency (0.015-1 us) and the PFC thresholds (8/10,
12/15, 20/24 packets) -- on both fair-share cases, in htsim and in the model (cables of 200 m per us, XOFF and
XON the same packet counts), with the stepped engine at 2, 1, 0.5 and 0.25 us steps.

    .venv/bin/python benchmarks/sim_fairness_packet.py [--htsim-dir DIR] [--no-sweep]

Writes benchmarks/results/sim_fairness_packet.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import sim_vs_packet as svp  # the reference's flags, model_config and path mapping: one definition

from tensorfabric.fsutil import atomic_write_text
from tensorfabric.sim import Flow, compile_network, fat_tree, run
from tensorfabric.sim.reference import connection_matrix, parse_output

OUT = svp.ROOT / "benchmarks" / "results" / "sim_fairness_packet.json"
K, NODES, SIZE = 8, 128, 4_000_000
SHIM = "#include <stdlib.h>\n#include <time.h>\ntime_t time(time_t *t) { const char *s = getenv(\"FAKE_TIME\");" \
       " time_t v = s ? (time_t)atol(s) : 0; if (t) *t = v; return v; }\n"
# name: (senders to h0, ideal port-fair FCT per flow in units of S/C where it has a closed form)
CASES: dict[str, tuple[list[int], list[float] | None]] = {
    "2 local + 3 from one edge, one uplink": ([1, 2, 4, 5, 6], [3, 3, 5, 5, 5]),
    "3 local + 3 from one edge, one uplink": ([1, 2, 3, 4, 5, 6], [4, 4, 4, 6, 6, 6]),
    "2 local + 3 from three edges, one uplink": ([1, 2, 4, 8, 12], [3, 3, 5, 5, 5]),
    "2 local + 3 from three pods, one uplink": ([1, 2, 32, 64, 96], None),  # the cores decide the split
}
STEPS = (2e-6, 1e-6, 0.5e-6)
SWEEP_CASES = list(CASES)[:2]
SWEEP_HOPS_US = (1.0, 0.5, 0.25, 0.1, 0.015)
SWEEP_THRESHOLDS = ((12, 15), (20, 24), (8, 10))
SWEEP_STEPS = (2e-6, 1e-6, 0.5e-6, 0.25e-6)
MAX_DRAWS = 256  # htsim's path id is random() % 256 after the pinned seed


def one_uplink(paths: list[tuple[str, ...]]) -> bool:
    """The remote flows (paths longer than host-edge-host) all enter h0's edge through the same switch."""
    remote = [p for p in paths if len(p) > 3]
    return len({p[-3] for p in remote}) == 1


def reference(binary: Path, flows: list[Flow], tmp: Path, shim: Path) -> tuple[int, Any]:
    cm = tmp / "fair.cm"
    cm.write_text(connection_matrix(flows, NODES))
    os.environ["LD_PRELOAD"] = str(shim)  # run_htsim's child inherits the environment
    try:
        for draw in range(MAX_DRAWS):
            os.environ["FAKE_TIME"] = str(draw)
            ref = parse_output(svp.run_htsim(binary, cm, NODES, 20_000)[0], flows)
            if one_uplink([f.path or () for f in svp.routed_like(ref, K, flows)]):
                return draw, ref
    finally:
        del os.environ["LD_PRELOAD"], os.environ["FAKE_TIME"]
    raise SystemExit(f"no draw in {MAX_DRAWS} routes the remote flows through one uplink")


def case(name: str, binary: Path, tmp: Path, shim: Path) -> dict[str, Any]:
    senders, ideal = CASES[name]
    flows = [Flow(f"h{s}", "h0", SIZE) for s in senders]
    draw, ref = reference(binary, flows, tmp, shim)
    routed = svp.routed_like(ref, K, flows)
    r = svp.ref_fct(ref, flows)
    unit = SIZE * (svp.MTU + svp.HEADER) / svp.MTU * 8 / svp.RATE  # S/C on the wire, headers included
    fabric = fat_tree(K, svp.RATE, cable_m=svp.HOP_M, fabric_m=svp.HOP_M)
    models: dict[str, list[float]] = {}
    for engine, steps in (("events", STEPS[:1]), ("stepped", STEPS)):
        for step in steps:
            cfg = dataclasses.replace(svp.model_config(step), engine=engine)  # type: ignore[arg-type]
            trace = run(compile_network(fabric, routed, cfg), cfg)
            models[f"{engine} {step * 1e6:g}us"] = (trace.finish_s - trace.begin_s).tolist()
    doc = {"name": name, "senders": senders, "draw": draw, "paths": [list(f.path or ()) for f in routed],
           "unit_s": unit, "ideal_units": ideal, "reference_fct_s": r.tolist(), "model_fct_s": models,
           "model_rel_error": {k: (np.array(v) / r - 1).tolist() for k, v in models.items()}}
    print(f"{name} (draw {draw}; uplink {routed[-1].path[-3] if routed[-1].path else '?'})")
    print(f"  {'htsim':<13}" + " ".join(f"{x / unit:6.3f}" for x in r) + "  (FCT / (S/C))")
    if ideal:
        print(f"  {'ideal':<13}" + " ".join(f"{x:6.3f}" for x in ideal))
    for k, v in models.items():
        err = " ".join(f"{e * 100:+.1f}" for e in doc["model_rel_error"][k])
        print(f"  {k:<13}" + " ".join(f"{x / unit:6.3f}" for x in v) + f"  err % {err}")
    return doc


def htsim_variant(binary: Path, cm: Path, hop_us: float, low: int, high: int) -> str:
    """sim_vs_packet.run_htsim's command with the hop latency and PFC thresholds varied (it fixes both)."""
    cmd = [str(binary), "-nodes", str(NODES), "-tm", str(cm), "-strat", "ecmp_host", "-paths", "256",
           "-mtu", str(svp.MTU), "-hop_latency", str(hop_us), "-pfc_thresholds", str(low), str(high),
           "-queue_type", "lossless_input", "-linkspeed", str(int(svp.RATE / 1e6)), "-q", "1000",
           "-end", "20000", "-o", str(cm.with_suffix(".log"))]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=cm.parent).stdout


def sweep(doc: dict[str, Any], binary: Path, tmp: Path, shim: Path) -> list[dict[str, Any]]:
    """Mean FCT of the local and of the remote flows, in S/C, per (thresholds, hop latency) and simulator."""
    senders = doc["senders"]
    flows = [Flow(f"h{s}", "h0", SIZE) for s in senders]
    cm = tmp / "sweep.cm"
    cm.write_text(connection_matrix(flows, NODES))
    local = np.array([len(p) == 3 for p in doc["paths"]])
    unit = doc["unit_s"]
    rows = []
    os.environ["LD_PRELOAD"], os.environ["FAKE_TIME"] = str(shim), str(doc["draw"])  # the case's own draw
    try:
        for low, high in SWEEP_THRESHOLDS:
            for hop in SWEEP_HOPS_US:
                ref = parse_output(htsim_variant(binary, cm, hop, low, high), flows)
                routed = svp.routed_like(ref, K, flows)
                fabric = fat_tree(K, svp.RATE, cable_m=hop * svp.HOP_M, fabric_m=hop * svp.HOP_M)
                fct = {"htsim": svp.ref_fct(ref, flows)}
                for engine, steps in (("events", SWEEP_STEPS[:1]), ("stepped", SWEEP_STEPS)):
                    for step in steps:
                        base = svp.model_config(step)
                        pfc = dataclasses.replace(base.pfc, xoff_bytes=high * svp.MTU,
                                                  xon_offset_bytes=(high - low) * svp.MTU)
                        cfg = dataclasses.replace(base, pfc=pfc, engine=engine)  # type: ignore[arg-type]
                        trace = run(compile_network(fabric, routed, cfg), cfg)
                        fct[f"{engine} {step * 1e6:g}us"] = trace.finish_s - trace.begin_s
                row = {"xon_xoff_packets": [low, high], "hop_us": hop,
                       "local_mean_units": {k: float(v[local].mean() / unit) for k, v in fct.items()},
                       "remote_mean_units": {k: float(v[~local].mean() / unit) for k, v in fct.items()}}
                rows.append(row)
                print(f"  thr {low}/{high} hop {hop:<5g}us local mean S/C: " + " | ".join(
                    f"{k} {v:.3f}" for k, v in row["local_mean_units"].items()), flush=True)
    finally:
        del os.environ["LD_PRELOAD"], os.environ["FAKE_TIME"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--htsim-dir", type=Path, default=svp.ROOT / ".cache/htsim/src/sim/datacenter",
                        help="where scripts/build-htsim.sh put htsim_roce_paths")
    parser.add_argument("--no-sweep", action="store_true", help="leave out the latency/threshold sweep")
    args = parser.parse_args()
    binary = args.htsim_dir / "htsim_roce_paths"
    if not binary.is_file():
        raise SystemExit(f"{binary} not found; build it with scripts/build-htsim.sh SNAPSHOT")
    with tempfile.TemporaryDirectory(prefix="sim_fairness.") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "faketime.c").write_text(SHIM)
        shim = tmp / "faketime.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), str(tmp / "faketime.c")], check=True)
        docs = [case(name, binary, tmp, shim) for name in CASES]
        if not args.no_sweep:
            for d in docs:
                if d["name"] in SWEEP_CASES:
                    print(f"sweep: {d['name']}")
                    d["sweep"] = sweep(d, binary, tmp, shim)
    doc = {"benchmark": "sim_fairness_packet", "reference": "Broadcom/csg-htsim htsim_roce_paths",
           "flags": "as benchmarks/sim_vs_packet.py (k=8, 100G, 1 us per hop, MTU 4096, PFC 12/15 packets)",
           "flow_bytes": SIZE, "cases": docs}
    atomic_write_text(OUT, json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
