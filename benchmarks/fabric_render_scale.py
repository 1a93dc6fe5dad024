"""``tensorfabric fabric render`` of 4096 hosts as a user runs it, against 1024 hosts in the same run.

The whole command is timed (a fresh ``python -m tensorfabric`` process: imports, spec load, render, one atomic
file per device into an empty directory), median of 3 runs per size. Issue #29 measured 15.6 s at 4096 hosts,
12x the 1024-host time, because clearing stale temporaries globbed the directory once per file (quadratic in
files); the goal is under 3 s at 4096 hosts and a 4096/1024 ratio near 4 (linear).

Leaf/spine fabrics from ``fabric init`` (32 hosts per leaf, 8 spines, SONiC, 400G), as in fabric_render.py.

Usage: ``.venv/bin/python benchmarks/fabric_render_scale.py``. Writes benchmarks/results/fabric_render_scale.json.
Timings on a shared 2-core machine are noisy; the 1024-host baseline is measured in the same run for that reason.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tensorfabric.fabric.starter import starter_yaml
from tensorfabric.fsutil import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "fabric_render_scale.json"
HOSTS = (1024, 4096)
HOSTS_PER_LEAF = 32
SPINES = 8
REPEATS = 3
GOAL_S = 3.0


def _run_once(spec: Path, scratch: Path) -> tuple[float, int]:
    # Each run writes into a new, empty directory: the figure is a first render, not a re-render over old files.
    out = Path(tempfile.mkdtemp(prefix="out-", dir=scratch))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tensorfabric", "fabric", "render", "--fabric", str(spec),
                           "--out", str(out)], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"fabric render failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return seconds, len(os.listdir(out))


def measure(hosts: int, scratch: Path) -> dict[str, Any]:
    spec = scratch / f"fabric-{hosts}.yaml"
    atomic_write_text(spec, starter_yaml(leaves=hosts // HOSTS_PER_LEAF, spines=SPINES,
                                         hosts_per_leaf=HOSTS_PER_LEAF, speed_bps=400e9, nos="sonic",
                                         asic="spectrum4"))
    runs = [_run_once(spec, scratch) for _ in range(REPEATS)]
    times = [t for t, _ in runs]
    return {"hosts": hosts, "files": runs[0][1], "runs_s": [round(t, 3) for t in times],
            "median_s": round(statistics.median(times), 3)}


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tf-render-scale-") as tmp:
        rows = [measure(h, Path(tmp)) for h in HOSTS]
    small, large = rows[0], rows[-1]
    result = {
        "benchmark": "fabric_render_scale",
        "command": "python -m tensorfabric fabric render --fabric SPEC --out EMPTY_DIR",
        "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
        "repeats": REPEATS, "goal_s": GOAL_S, "rows": rows,
        "ratio_largest_to_baseline": round(large["median_s"] / small["median_s"], 2),
        "meets_goal": large["median_s"] < GOAL_S,
    }
    atomic_write_text(RESULTS, json.dumps(result, indent=2) + "\n")
    for row in rows:
        print(f"{row['hosts']:>5} hosts  {row['files']:>5} files  median {row['median_s']:.2f} s  runs {row['runs_s']}")
    print(f"4096/1024 = {result['ratio_largest_to_baseline']}x; goal < {GOAL_S} s: "
          f"{'met' if result['meets_goal'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
