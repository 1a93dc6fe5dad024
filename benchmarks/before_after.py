"""Bench, decode and simulator figures of two revisions of this repository, measured in the same run.

A refactor must not cost speed (issue 30, acceptance 5). Each revision is checked out into its own temporary git
worktree and run with this venv's Python (``PYTHONPATH`` set to that tree's ``src``), so both use the same torch,
NIXL and numpy. The three benchmarks alternate revision by revision, round by round, so load drifting over the run
hits both alike:

* ``small_message_latency.py --where loopback``: all_reduce through NIXL and through Gloo, 1-64 KiB, two local ranks;
* ``decode_engines.py --pairs 1``: ``tensorfabric run`` decode tokens/s, torch and NIXL engines, and their tokens;
* ``sim_speed.py --quick``: the simulator's run CPU time on the PFC-only cases.

Reported per figure: each revision's median over the rounds and the ratio after/before of the medians.
Writes benchmarks/results/before_after.json.

    .venv/bin/python benchmarks/before_after.py --before 3d7b005 [--after HEAD] [--rounds 3] [--only NAME ...]
        [--decode-model DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tensorfabric.fsutil import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

Figures = dict[str, float]


def _latency(doc: dict[str, Any]) -> Figures:
    out: Figures = {}
    for row in doc["loopback"]["rows"]:
        kib = row["bytes"] // 1024
        out[f"bench all_reduce {kib} KiB nixl median us"] = row["nixl"]["median_us"]
        out[f"bench all_reduce {kib} KiB gloo median us"] = row["gloo"]["median_us"]
    return out


def _decode(doc: dict[str, Any]) -> Figures:
    summary = doc["summary"]
    out = {f"decode {engine} tokens/s": summary[engine]["tokens_per_s"]["median"] for engine in ("torch", "nixl")}
    out["decode identical tokens (1 = yes)"] = float(bool(doc["identical_tokens"]))
    return out


def _sim(doc: dict[str, Any]) -> Figures:
    return {f"sim k={r['k']} {r['kind']} {r['dcqcn']} run cpu s": r["run_cpu_s"] for r in doc["results"]}


# name -> (argv after the script, where the script writes its JSON relative to the tree, figures of that JSON)
BENCHES: dict[str, tuple[list[str], str, Callable[[dict[str, Any]], Figures]]] = {
    "small_message_latency": (["--where", "loopback", "--rounds", "3", "--iters", "20", "--max-size", "65536"],
                              "benchmarks/results/small_message_latency.json", _latency),
    "decode_engines": (["--pairs", "1", "--tokens", "32"], "benchmarks/results/decode_engines.json", _decode),
    "sim_speed": (["--quick"], "benchmarks/results/sim_speed.json", _sim),
}


def _worktree(rev: str, base: Path) -> tuple[Path, str]:
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    tree = base / sha[:12]
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), sha], check=True)
    return tree, sha


def _run(tree: Path, name: str, extra: list[str]) -> Figures:
    args, out, figures = BENCHES[name]
    args = [*args, *extra]
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    proc = subprocess.run([sys.executable, str(tree / "benchmarks" / f"{name}.py"), *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{name} at {tree.name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return figures(json.loads((tree / out).read_text()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default="HEAD")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", nargs="+", choices=sorted(BENCHES), default=sorted(BENCHES))
    ap.add_argument("--decode-model", default=None, metavar="DIR",
                    help="decode_engines' --model (default: the default model; on 2 cores its 3 ranks oversubscribe "
                         "the CPUs and tokens/s swings by 50 %% run to run)")
    ap.add_argument("--out", default=str(RESULTS / "before_after.json"))
    opts = ap.parse_args()
    extra = {"decode_engines": ["--model", opts.decode_model]} if opts.decode_model else {}
    start = time.perf_counter()
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="tf-before-after-") as tmp:
        trees = {label: _worktree(rev, Path(tmp)) for label, rev in (("before", opts.before), ("after", opts.after))}
        samples: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
        try:
            for r in range(opts.rounds):
                order = ("before", "after") if r % 2 == 0 else ("after", "before")
                for name in opts.only:
                    for label in order:
                        for key, value in _run(trees[label][0], name, extra.get(name, [])).items():
                            samples[label].setdefault(key, []).append(value)
                        print(f"round {r + 1}/{opts.rounds} {name} {label} done", flush=True)
        finally:
            for tree, _ in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    rows = []
    for key in samples["before"]:
        before = statistics.median(samples["before"][key])
        after = statistics.median(samples["after"][key])
        rows.append({"figure": key, "before_median": before, "after_median": after,
                     "after_over_before": after / before if before else None,
                     "before_samples": samples["before"][key], "after_samples": samples["after"][key]})
        ratio = f"{after / before:6.3f}" if before else "   n/a"
        print(f"{key:44s} before {before:12.3f}  after {after:12.3f}  after/before {ratio}")
    doc = {"benchmark": "before_after", "before": {"rev": opts.before, "sha": trees["before"][1]},
           "after": {"rev": opts.after, "sha": trees["after"][1]}, "rounds": opts.rounds,
           "benchmarks": opts.only, "decode_model": opts.decode_model,
           "machine": {"cpus": os.cpu_count(), "load_avg_at_start": load_start, "load_avg_at_end": os.getloadavg()},
           "rows": rows, "wall_s": time.perf_counter() - start}
    atomic_write_json(Path(opts.out), doc)


if __name__ == "__main__":
    main()
