"""simulate sweep: 1,000 k = 4 fat-tree scenarios on a two-worker process pool, an interrupt and its resume,
Ray against the pool, and the example fabric's sweep whose Pareto plot docs/sim.md shows.

Cases (issue 32, acceptance 2-4):

* ``speed`` -- a seeded random search: 250 settings (Kmin, Kmax log-uniform, Pmax, the firmware DCQCN additive
  increase) x 4 conditions (offered load 0.3 / 0.7, TP=4 packed and TP=2 x PP=2 spread) = 1,000 scenarios on a
  k = 4 fat tree (16 hosts, 100G), each a 2-layer decode token and 500 us of 1 MB background flows at a 2 us
  step. Timed as a user runs it: ``tensorfabric simulate sweep SPEC --jobs 2`` in a child process, wall clock
  and the CPU of the child and its workers. Goal: <= 10 minutes on 2 cores.
* ``resume`` -- the same sweep again, SIGINT after a third of the rows, then ``--resume``: rows kept, rows run
  by the second invocation (must be exactly the rest), and that the final rows equal the uninterrupted run's.
* ``ray`` -- the first 200 scenarios' spec (50 settings) on ``--executor ray --jobs 2`` and on the pool: wall
  time of each and whether the rows are byte-identical.
* ``example`` -- examples/sweep.yaml (the example fabric) with the budget p99 = 2 ms, paused = 1 %: its summary
  and Pareto plot are copied to benchmarks/results/sim_sweep_example.{json,png}.

    .venv/bin/python benchmarks/sim_sweep.py [--case speed,resume,ray,example] [--jobs 2]

Writes benchmarks/results/sim_sweep.json (and the example's files).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from tensorfabric.fsutil import atomic_write_bytes, atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
OUT = RESULTS / "sim_sweep.json"

SPEED_SPEC: dict[str, Any] = {
    "name": "k4-1000",
    "topology": {"kind": "fat-tree", "k": 4, "rate": "100G"},
    "search": "random",
    "samples": 250,
    "seed": 32,
    "step": "2us",
    "duration": "10ms",
    "workload": {"layers": 2, "tokens": 1, "background_size": "1MB", "window": "500us"},
    "budget": {"p99": "2ms", "paused": "1%"},
    "parameters": {
        "kmin": {"min": "10KB", "max": "400KB", "scale": "log"},
        "kmax": {"min": "200KB", "max": "3MB", "scale": "log"},
        "pmax": [0.05, 0.2, 1.0],
        "firmware.ai_bps": {"min": "5Mbit", "max": "100Mbit", "scale": "log"},
        "load": [0.3, 0.7],
        "placement": ["tp4", "tp2xpp2-spread"],
    },
}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "tensorfabric", "simulate", "sweep", *args]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(args: list[str]) -> dict[str, Any]:
    cpu0, t0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}): {done.stderr}")
    return {"wall_s": wall, "cpu_s": cpu, "exit": done.returncode, "summary": json.loads(done.stdout)}


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _load() -> float:
    return os.getloadavg()[0]


def speed(tmp: Path, jobs: int, _: dict[str, Any]) -> dict[str, Any]:
    spec = tmp / "k4.yaml"
    spec.write_text(yaml.safe_dump(SPEED_SPEC))
    load0 = _load()
    res = _run(_cli(str(spec), "--out", str(tmp / "k4"), "--jobs", str(jobs), "--json"))
    s = res.pop("summary")
    rec = s["recommendation"] or s["closest"]
    print(f"speed: {s['scenarios']} scenarios, --jobs {jobs}: wall {res['wall_s']:.1f}s, CPU {res['cpu_s']:.1f}s "
          f"({res['cpu_s'] / s['scenarios'] * 1e3:.0f} ms/scenario), load average {load0:.2f} -> {_load():.2f}; "
          f"goal 600s; met by {s['met_by']} of {s['settings']} settings")
    return {**res, "jobs": jobs, "scenarios": s["scenarios"], "settings": s["settings"], "met_by": s["met_by"],
            "skipped": s["skipped"], "errors": s["errors"], "load_average_before": load0,
            "load_average_after": _load(), "cpu_per_scenario_s": res["cpu_s"] / s["scenarios"],
            "recommendation": rec, "goal_s": 600,
            "rows_sha256": hashlib.sha256((tmp / "k4" / "rows.jsonl").read_bytes()).hexdigest()}


def resume(tmp: Path, jobs: int, so_far: dict[str, Any]) -> dict[str, Any]:
    spec = tmp / "k4.yaml"
    spec.write_text(yaml.safe_dump(SPEED_SPEC))
    out = tmp / "k4-interrupted"
    journal = out / "rows.jsonl"
    t0 = time.perf_counter()
    # A shell's background job ignores SIGINT and children inherit that: give the sweep Ctrl-C's default back.
    proc = subprocess.Popen(_cli(str(spec), "--out", str(out), "--jobs", str(jobs)), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    while not (journal.exists() and journal.read_text().count("\n") >= 333):
        if proc.poll() is not None:
            raise SystemExit(f"the sweep ended before the interrupt: {proc.stderr.read() if proc.stderr else ''}")
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    first = time.perf_counter() - t0
    kept = journal.read_text().count("\n")
    res = _run(_cli(str(spec), "--out", str(out), "--jobs", str(jobs), "--resume", "--json"))
    s = res.pop("summary")
    # The speed case's uninterrupted rows, by hash (that run may have been an earlier invocation).
    same = hashlib.sha256(journal.read_bytes()).hexdigest() == so_far.get("speed", {}).get("rows_sha256")
    print(f"resume: interrupted after {first:.1f}s (exit {proc.returncode}) with {kept} rows; --resume ran "
          f"{s['ran']} and kept {s['resumed']} in {res['wall_s']:.1f}s; rows identical to the uninterrupted run: "
          f"{same}")
    return {"interrupt_exit": proc.returncode, "interrupt_stderr": err.strip(), "rows_kept": kept,
            "first_wall_s": first, "resume_ran": s["ran"], "resume_resumed": s["resumed"],
            "resume_wall_s": res["wall_s"], "redone": kept + s["ran"] - s["scenarios"],
            "rows_identical_to_uninterrupted": same}


def ray(tmp: Path, jobs: int, _: dict[str, Any]) -> dict[str, Any]:
    doc = {**SPEED_SPEC, "name": "k4-200", "samples": 50}
    spec = tmp / "k4-200.yaml"
    spec.write_text(yaml.safe_dump(doc))
    pool = _run(_cli(str(spec), "--out", str(tmp / "pool"), "--jobs", str(jobs), "--json"))
    try:
        import ray as _  # noqa: F401
    except ImportError:
        return {"skipped": "ray is not installed"}
    on_ray = _run(_cli(str(spec), "--out", str(tmp / "ray"), "--jobs", str(jobs), "--executor", "ray", "--json"))
    same = (tmp / "pool" / "rows.jsonl").read_bytes() == (tmp / "ray" / "rows.jsonl").read_bytes()
    print(f"ray: 200 scenarios, pool {pool['wall_s']:.1f}s, ray {on_ray['wall_s']:.1f}s (cluster start "
          f"included); rows identical: {same}")
    return {"scenarios": 200, "pool_wall_s": pool["wall_s"], "ray_wall_s": on_ray["wall_s"],
            "rows_identical": same}


def example(tmp: Path, jobs: int, _: dict[str, Any]) -> dict[str, Any]:
    spec = ROOT / "examples" / "sweep.yaml"
    res = _run(_cli(str(spec), "--out", str(tmp / "example"), "--jobs", str(jobs), "--json"))
    s = res.pop("summary")
    atomic_write_bytes(RESULTS / "sim_sweep_example.png", (tmp / "example" / "pareto.png").read_bytes())
    atomic_write_json(RESULTS / "sim_sweep_example.json", s)
    shown = s["recommendation"] or s["closest"]
    print(f"example: {s['scenarios']} scenarios in {res['wall_s']:.1f}s; met by {s['met_by']} of {s['settings']}; "
          f"{'recommended' if s['recommendation'] else 'closest'}: {shown['setting'] if shown else None} "
          f"worst {shown['worst'] if shown else None}")
    return {**res, "scenarios": s["scenarios"], "met_by": s["met_by"], "settings": s["settings"],
            "recommendation": s["recommendation"], "closest": s["closest"]}


CASES = {"speed": speed, "resume": resume, "ray": ray, "example": example}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default=",".join(CASES), help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    previous: dict[str, Any] = json.loads(OUT.read_text()) if OUT.exists() else {}
    result: dict[str, Any] = {**previous, "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                                      "platform": platform.platform()}}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for case in args.case.split(","):
            result[case] = CASES[case](tmp, args.jobs, result)
            atomic_write_json(OUT, result)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
