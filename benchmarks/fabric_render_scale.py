"""``tensorfabric fabric render`` of 4096 hosts as a user runs it, against 1024 hosts in the same run.

The whole command is timed (a fresh ``python -m tensorfabric`` process: imports, spec load, render, one atomic
file per device into an empty directory), median of 3 runs per size. Issue #29 measured 15.6 s at 4096 hosts,
12x the 1024-host time, because clearing stale temporaries globbed the directory once per file (quadratic in
files); the goal is under 3 s at 4096 hosts and a 4096/1024 ratio near 4 (linear).

Leaf/spine fabrics from ``fabric init`` (32 hosts per leaf, 8 spines, SONiC, 400G), as in fabric_render.py.

Usage: ``.venv/bin/python benchmarks/fabric_render_scale.py``. Writes benchmarks/results/fabric_render_scale.json.
Timings on a shared 2-core machine are noisy; the 1024-host baseline is measured in the same run for that reason,
the load average is recorded next to the figures, and so is each run's CPU time (user + system of the child, from
``getrusage(RUSAGE_CHILDREN)``), which other processes on the machine do not stretch the way they stretch wall time.
"""

from __future__ import annotations

import json
import os
import platform
import resource
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


def _cpu(who: int = resource.RUSAGE_CHILDREN) -> tuple[float, float]:
    used = resource.getrusage(who)
    return used.ru_utime, used.ru_stime


def _floor(files: int, scratch: Path) -> dict[str, float]:
    """What creating ``files`` files of 1 KB costs this machine now with a bare open/write/close loop: the part of a
    render no code change can remove. On a shared machine it swings tenfold (0.1 to 1 ms of system time a file)."""
    out = Path(tempfile.mkdtemp(prefix="floor-", dir=scratch))
    user, system = _cpu(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for index in range(files):
        fd = os.open(out / f"f{index}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, b"x" * 1024)
        os.close(fd)
    wall = time.perf_counter() - start
    user_after, system_after = _cpu(resource.RUSAGE_SELF)
    return {"wall_s": round(wall, 3), "user_s": round(user_after - user, 3), "sys_s": round(system_after - system, 3)}


def _run_once(spec: Path, scratch: Path) -> tuple[float, tuple[float, float], int]:
    # Each run writes into a new, empty directory: the figure is a first render, not a re-render over old files.
    out = Path(tempfile.mkdtemp(prefix="out-", dir=scratch))
    user, system = _cpu()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tensorfabric", "fabric", "render", "--fabric", str(spec),
                           "--out", str(out)], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"fabric render failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    user_after, system_after = _cpu()
    return seconds, (user_after - user, system_after - system), len(os.listdir(out))


def measure(hosts: int, scratch: Path) -> dict[str, Any]:
    spec = scratch / f"fabric-{hosts}.yaml"
    atomic_write_text(spec, starter_yaml(leaves=hosts // HOSTS_PER_LEAF, spines=SPINES,
                                         hosts_per_leaf=HOSTS_PER_LEAF, speed_bps=400e9, nos="sonic",
                                         asic="spectrum4"))
    load = os.getloadavg()[0]
    runs = [_run_once(spec, scratch) for _ in range(REPEATS)]
    times = [t for t, _, _ in runs]
    cpus = [u + s for _, (u, s), _ in runs]
    return {"hosts": hosts, "files": runs[0][2], "runs_s": [round(t, 3) for t in times],
            "median_s": round(statistics.median(times), 3), "cpu_runs_s": [round(c, 3) for c in cpus],
            "cpu_median_s": round(statistics.median(cpus), 3),
            "cpu_user_runs_s": [round(u, 3) for _, (u, _), _ in runs],
            "cpu_sys_runs_s": [round(s, 3) for _, (_, s), _ in runs],
            "file_creation_floor": _floor(runs[0][2], scratch),
            "load_avg_1min": [round(load, 2), round(os.getloadavg()[0], 2)]}


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
        print(f"{row['hosts']:>5} hosts  {row['files']:>5} files  median {row['median_s']:.2f} s  "
              f"runs {row['runs_s']}  CPU median {row['cpu_median_s']:.2f} s (user {row['cpu_user_runs_s']}, "
              f"sys {row['cpu_sys_runs_s']})  bare file creation {row['file_creation_floor']}  "
              f"load {row['load_avg_1min']}")
    print(f"4096/1024 = {result['ratio_largest_to_baseline']}x; goal < {GOAL_S} s: "
          f"{'met' if result['meets_goal'] else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
