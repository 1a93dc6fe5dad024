"""Fluid simulator against the packet-level reference (csg-htsim ``htsim_roce``): same traffic, flow by flow.

Scenarios (issue 20): incast 16 -> 1 x 4 MB and permutations 128 x 4 MB, 128 x 32 MB on a k = 8 fat tree,
1024 x 4 MB on k = 16; 100G links, 1 us per hop, MTU 4096, lossless input queues with htsim's default PFC
thresholds (XOFF 15, XON 12 packets), ECMP, no congestion control (htsim's RoCE sender is fixed-rate: it
has no DCQCN, so there is no DCQCN comparison to make).

Each scenario's flows are exported to htsim's connection-matrix format and run through

* ``htsim_roce_paths`` (logs each flow's ECMP egress at every switch): the reference FCTs;
* ``htsim_roce`` (untouched build): the reference wall time, and -- because htsim seeds its per-flow path
  ids from the clock -- a second, independent ECMP draw of the reference (its own run-to-run spread);
* our model on the reference's own paths (flow-by-flow comparison) and on our own ECMP hash (the model as
  users run it; wall time for the speed ratio).

    scripts/build-htsim.sh /path/to/csg-htsim-snapshot        # once
    .venv/bin/python benchmarks/sim_vs_packet.py [--only NAME] [--skip-1024] [--write-table]

Writes benchmarks/results/sim_vs_packet.json and sim_vs_packet.png; --write-table also refreshes the error
table ``simulate`` prints (src/tensorfabric/sim/data/accuracy.json).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import resource
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tensorfabric.fsutil import atomic_write_figure, atomic_write_text
from tensorfabric.sim import EcnConfig, Flow, PfcConfig, SimConfig, compile_network, fat_tree, run
from tensorfabric.sim.accuracy import TABLE_PATH, error_summary
from tensorfabric.sim.events import applies
from tensorfabric.sim.reference import RefRun, connection_matrix, fat_tree_path, host_index, parse_output
from tensorfabric.sim.workloads import incast, permutation

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "sim_vs_packet.json"
PNG = OUT.with_suffix(".png")
RATE = 100e9
MTU = 4096
HOP_M = 200.0  # 1 us per hop at 5 ns/m
SEEDS = 4  # extra ECMP seeds of the model per scenario
LONG_RUN_S = 2.0
HEADER = 64  # htsim adds 64 B to every data packet and sends a 64 B ACK per packet
PFC_LOW, PFC_HIGH = 12, 15  # htsim main_roce defaults, in packets of data_packet_size
SCENARIOS = {
    "incast-16x4MB": (8, "incast", 4_000_000),
    "perm-128x4MB": (8, "perm", 4_000_000),
    "perm-128x32MB": (8, "perm", 32_000_000),
    "perm-1024x4MB": (16, "perm", 4_000_000),
}


def flows_for(k: int, kind: str, size: int) -> list[Flow]:
    hosts = [f"h{i}" for i in range(k ** 3 // 4)]
    if kind == "incast":
        return incast(hosts[1:17], hosts[0], size)
    return permutation(hosts, size, seed=1)


def model_config(step_s: float) -> SimConfig:
    # htsim's egress obeys a PAUSE once the packet it is sending is out (LosslessOutputQueue's PAUSE_RECEIVED):
    # one frame's wire time, not the Annex 31B worst case.
    pfc = PfcConfig(xoff_bytes=PFC_HIGH * MTU, xon_offset_bytes=(PFC_HIGH - PFC_LOW) * MTU,
                    response_s=(MTU + HEADER) * 8 / RATE)
    # The reference's packet format: 64 B of header on every data packet, a 64 B ACK back per packet.
    return SimConfig(step_s=step_s, duration_s=0.2, dcqcn="none", ecn=EcnConfig(enabled=False), pfc=pfc, mtu=MTU,
                     header_bytes=HEADER, ack_bytes=HEADER)


def run_htsim(binary: Path, cm: Path, nodes: int, end_us: int) -> tuple[str, float, float]:
    cmd = [str(binary), "-nodes", str(nodes), "-tm", str(cm), "-strat", "ecmp_host", "-paths", "256",
           "-mtu", str(MTU), "-hop_latency", "1", "-pfc_thresholds", str(PFC_LOW), str(PFC_HIGH),
           "-queue_type", "lossless_input", "-linkspeed", str(int(RATE / 1e6)), "-q", "1000",
           "-end", str(end_us), "-o", str(cm.with_suffix(".log"))]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=cm.parent)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{binary.name} failed ({done.returncode}): {done.stderr[-500:]}")
    return done.stdout, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_model(k: int, flows: list[Flow], step_s: float, seed: int = 0) -> tuple[np.ndarray, float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fabric = fat_tree(k, RATE, cable_m=HOP_M, fabric_m=HOP_M)
    cfg = dataclasses.replace(model_config(step_s), seed=seed)
    trace = run(compile_network(fabric, flows, cfg), cfg)
    fct = trace.finish_s - np.array([f.start_s for f in flows])
    return fct, time.perf_counter() - t0, time.process_time() - c0


def ref_fct(ref: RefRun, flows: list[Flow]) -> np.ndarray:
    keys = [(host_index(f.src), host_index(f.dst)) for f in flows]
    return np.array([ref.finish_s.get(key, np.nan) - f.start_s for key, f in zip(keys, flows, strict=True)])


def next_second() -> None:
    """htsim seeds its per-flow ECMP path ids from time(NULL): a run in a new second is a new ECMP draw."""
    now = int(time.time())
    while int(time.time()) == now:
        time.sleep(0.05)


def routed_like(ref: RefRun, k: int, flows: list[Flow]) -> list[Flow]:
    """Our flows on the reference run's own ECMP paths."""
    out = []
    for f in flows:
        key = (host_index(f.src), host_index(f.dst))
        out.append(dataclasses.replace(f, path=fat_tree_path(k, key[0], key[1], ref.hops.get(key, ()))))
    return out


def engine_of(k: int, flows: list[Flow], step_s: float) -> str:
    """Which engine ``engine="auto"`` runs for this scenario (and why not the event engine)."""
    cfg = model_config(step_s)
    why_not = applies(compile_network(fat_tree(k, RATE, cable_m=HOP_M, fabric_m=HOP_M), flows, cfg), cfg)
    return "events" if why_not is None else f"stepped ({why_not})"


def scenario(name: str, bindir: Path, step_s: float, tmp: Path, draws: int, repeats: int) -> dict[str, Any]:
    k, kind, size = SCENARIOS[name]
    nodes = k ** 3 // 4
    flows = flows_for(k, kind, size)
    cm = tmp / f"{name}.cm"
    cm.write_text(connection_matrix(flows, nodes))
    end_us = int(max(20_000, 40 * size * 8 / RATE * 1e6))
    out, ref_wall_paths, _ = run_htsim(bindir / "htsim_roce_paths", cm, nodes, end_us)
    ref = parse_output(out, flows)
    next_second()
    out2, ref_wall, ref_cpu = run_htsim(bindir / "htsim_roce", cm, nodes, end_us)
    ref2 = parse_output(out2, flows)
    # Timing: the median of `repeats` runs of each simulator (a single run of a few ms is mostly noise);
    # a reference run over LONG_RUN_S of CPU is timed once, its noise being small against its length.
    ref_times = [(ref_wall, ref_cpu)] + [run_htsim(bindir / "htsim_roce", cm, nodes, end_us)[1:]
                                         for _ in range(repeats - 1 if ref_cpu < LONG_RUN_S else 0)]
    ref_cpus = [c for _, c in ref_times]
    ref_wall = float(np.median([w for w, _ in ref_times]))
    routed = routed_like(ref, k, flows)
    ours_ref_paths, wall_ref_paths, _ = run_model(k, routed, step_s)
    # Further reference draws, each with the model on that draw's paths: how the error varies with routing.
    more = []
    for _ in range(draws - 1):
        next_second()
        extra = parse_output(run_htsim(bindir / "htsim_roce_paths", cm, nodes, end_us)[0], flows)
        e = error_summary(run_model(k, routed_like(extra, k, flows), step_s)[0], ref_fct(extra, flows))
        more.append({"rel_error": e["rel_error"], "flow_median_abs_rel_error": e["flow_median_abs_rel_error"],
                     "reference": e["reference"]})
    timed = [run_model(k, flows, step_s) for _ in range(repeats)]
    ours, wall = timed[0][0], float(np.median([x[1] for x in timed]))
    cpu, ref_cpu = float(np.median([x[2] for x in timed])), float(np.median(ref_cpus))
    r, r2 = ref_fct(ref, flows), ref_fct(ref2, flows)
    # Other ECMP draws of our own hash: how much the routing alone moves the distribution.
    draws = [error_summary(run_model(k, flows, step_s, seed)[0], r)["model"] for seed in range(1, SEEDS + 1)]
    doc: dict[str, Any] = {
        "name": name, "k": k, "hosts": nodes, "flows": len(flows), "flow_bytes": size, "kind": kind,
        "ideal_fct_s": size * 8 / RATE,
        "reference": {"fct_s": r.tolist(), "paths": [list(f.path or ()) for f in routed],
                      "wall_s": ref_wall, "cpu_s": ref_cpu, "cpu_runs_s": ref_cpus,
                      "wall_paths_build_s": ref_wall_paths,
                      "retransmits": ref.retransmits, "unfinished": int(np.isnan(r).sum())},
        "reference_second_draw": {"fct_s": r2.tolist(), "vs_first": error_summary(r2, r)},
        "model_reference_paths": {"fct_s": ours_ref_paths.tolist(), "wall_s": wall_ref_paths,
                                  "vs_reference": error_summary(ours_ref_paths, r), "other_draws": more},
        "model_own_ecmp": {"fct_s": ours.tolist(), "wall_s": wall, "cpu_s": cpu,
                           "cpu_runs_s": [x[2] for x in timed], "engine": engine_of(k, flows, step_s),
                           "vs_reference": error_summary(ours, r),
                           "vs_reference_second_draw": error_summary(ours, r2), "other_seeds": draws},
        # CPU seconds: on a shared machine wall time mostly measures the other tenants.
        "speed_ratio": ref_cpu / cpu, "speed_ratio_wall": ref_wall / wall,
    }
    all_draws = [doc["model_reference_paths"]["vs_reference"], *more]
    doc["model_reference_paths"]["worst_abs_rel_error"] = {
        q: max(abs(d["rel_error"][q]) for d in all_draws) for q in all_draws[0]["rel_error"]}
    doc["model_reference_paths"]["draws"] = len(all_draws)
    return doc


def line(doc: dict[str, Any]) -> str:
    e = doc["model_reference_paths"]["vs_reference"]
    o = doc["model_own_ecmp"]["vs_reference"]
    s = doc["reference_second_draw"]["vs_first"]
    pct = "/".join(f"{e['rel_error'][q] * 100:+.1f}" for q in ("p10", "p50", "p90", "p99", "max"))
    own = "/".join(f"{o['rel_error'][q] * 100:+.1f}" for q in ("p50", "p99", "max"))
    ref = "/".join(f"{s['rel_error'][q] * 100:+.1f}" for q in ("p50", "p99", "max"))
    ref_q = "/".join(f"{e['reference'][q] * 1e3:.3f}" for q in ("p10", "p50", "p90", "p99", "max"))
    worst = doc["model_reference_paths"]["worst_abs_rel_error"]
    pct += f" (worst of {doc['model_reference_paths']['draws']} draws p50/99/max " + "/".join(
        f"{worst[q] * 100:.1f}" for q in ("p50", "p99", "max")) + ")"
    return (f"{doc['name']:<15} ref p10/50/90/99/max {ref_q} ms | model on ref paths err % {pct}, flow-by-flow "
            f"median |err| {e['flow_median_abs_rel_error'] * 100:.1f}% | own ECMP p50/99/max % {own} | ref 2nd "
            f"draw % {ref} | cpu ref {doc['reference']['cpu_s'] * 1e3:.1f}ms ours "
            f"{doc['model_own_ecmp']['cpu_s'] * 1e3:.1f}ms = {doc['speed_ratio']:.1f}x (wall "
            f"{doc['speed_ratio_wall']:.1f}x), {doc['model_own_ecmp']['engine']}")


def plot(docs: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(docs), figsize=(4.5 * len(docs), 4), squeeze=False)
    for ax, doc in zip(axes[0], docs, strict=True):
        for label, key, style in (("htsim (reference)", ("reference",), "k-"),
                                  ("htsim, 2nd ECMP draw", ("reference_second_draw",), "k:"),
                                  ("model, reference paths", ("model_reference_paths",), "C0-"),
                                  ("model, own ECMP", ("model_own_ecmp",), "C1--")):
            x = np.sort(np.array(doc[key[0]]["fct_s"], dtype=float)) * 1e3
            ax.plot(x, np.arange(1, x.size + 1) / x.size, style, label=label, drawstyle="steps-post")
        ax.set_title(doc["name"])
        ax.set_xlabel("FCT (ms)")
        ax.set_ylabel("fraction of flows")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    atomic_write_figure(PNG, fig, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--htsim-dir", type=Path, default=ROOT / ".cache/htsim/src/sim/datacenter",
                        help="where scripts/build-htsim.sh put htsim_roce and htsim_roce_paths")
    parser.add_argument("--only", choices=sorted(SCENARIOS), action="append", help="run only these scenarios")
    parser.add_argument("--skip-1024", action="store_true", help="leave out the 1024-host run")
    parser.add_argument("--step", type=float, default=1e-6, help="model time step in seconds (default 1e-6)")
    parser.add_argument("--draws", type=int, default=3, help="reference ECMP draws per scenario (default 3)")
    parser.add_argument("--draws-1024", type=int, default=1, help="draws for the 1024-host run (default 1)")
    parser.add_argument("--repeats", type=int, default=5,
                        help=f"timed runs per simulator and scenario, median taken (default 5; a reference run "
                             f"over {LONG_RUN_S:g} s CPU is timed once)")
    parser.add_argument("--write-table", action="store_true", help=f"refresh {TABLE_PATH.name} from this run")
    args = parser.parse_args()
    for b in ("htsim_roce", "htsim_roce_paths"):
        if not (args.htsim_dir / b).is_file():
            raise SystemExit(f"{args.htsim_dir / b} not found; build it with scripts/build-htsim.sh SNAPSHOT")
    names = args.only or [n for n in SCENARIOS if not (args.skip_1024 and n == "perm-1024x4MB")]
    docs = []
    with tempfile.TemporaryDirectory(prefix="sim_vs_packet.") as tmp:
        for name in names:
            draws = args.draws_1024 if name == "perm-1024x4MB" else args.draws
            docs.append(scenario(name, args.htsim_dir, args.step, Path(tmp), max(1, draws), max(1, args.repeats)))
            print(line(docs[-1]), flush=True)
    commit = (args.htsim_dir.parent.parent.parent / "commit")
    doc = {
        "benchmark": "sim_vs_packet",
        "reference": {"simulator": "Broadcom/csg-htsim htsim_roce",
                      "commit": commit.read_text().strip() if commit.is_file() else None,
                      "flags": "-strat ecmp_host -paths 256 -mtu 4096 -hop_latency 1 -pfc_thresholds 12 15 "
                               "-queue_type lossless_input -linkspeed 100000 -q 1000"},
        "timing": "CPU seconds, median of --repeats runs each: htsim's whole process (getrusage of the child: "
                  "startup, topology, run); ours from building the fat tree to the end of the run, in a process "
                  "that has already imported Python and numpy (process_time)",
        "model": {"step_s": args.step, "dcqcn": "none", "xoff_bytes": PFC_HIGH * MTU,
                  "xon_bytes": PFC_LOW * MTU},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
                    "load_avg_1m": os.getloadavg()[0]},
        "scenarios": docs,
    }
    atomic_write_text(OUT, json.dumps(doc, indent=1) + "\n")
    plot(docs)
    print(f"wrote {OUT} and {PNG}")
    if args.write_table:
        table = {"source": "benchmarks/sim_vs_packet.py", "reference": doc["reference"]["simulator"],
                 "commit": doc["reference"]["commit"], "model_step_s": args.step,
                 "scenarios": [{"name": d["name"], "kind": d["kind"], "hosts": d["hosts"], "flows": d["flows"],
                                "flow_bytes": d["flow_bytes"],
                                "rel_error": d["model_reference_paths"]["vs_reference"]["rel_error"],
                                "worst_abs_rel_error": d["model_reference_paths"]["worst_abs_rel_error"],
                                "draws": d["model_reference_paths"]["draws"],
                                "flow_median_abs_rel_error":
                                    d["model_reference_paths"]["vs_reference"]["flow_median_abs_rel_error"],
                                "own_ecmp_rel_error": d["model_own_ecmp"]["vs_reference"]["rel_error"],
                                "reference_self_rel_error": d["reference_second_draw"]["vs_first"]["rel_error"],
                                "speed_ratio": d["speed_ratio"]} for d in docs]}
        atomic_write_text(TABLE_PATH, json.dumps(table, indent=1) + "\n")
        print(f"wrote {TABLE_PATH}")


if __name__ == "__main__":
    main()
