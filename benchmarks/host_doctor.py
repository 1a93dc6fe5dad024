"""How fast the host doctor reads: NCCL log parsing throughput and discovery + checks on a fixture host.

Measures, in one run:

1. ``parse_nccl_log`` on a synthetic 8-rank log (the fixtures' NCCL lines repeated, interleaved 1:1 with
   application lines) of 200 000 lines, against a baseline in the same run that only splits the text and keeps
   the lines containing ``NCCL`` (the least any parser must do). Reported: lines/s for both and the ratio.
2. ``discover`` + ``run_doctor`` + ``derive_env`` on ``tests/fixtures/sysfs/mlx5-roce`` (8 GPUs, 2 ports):
   median wall time of 20 runs.

Usage: ``.venv/bin/python benchmarks/host_doctor.py``. Writes ``benchmarks/results/host_doctor.json``.
Timings on a shared 2-core machine are noisy; compare the ratio, not the absolute numbers.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from tensorfabric.fsutil import atomic_write_json
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.nccl_log import parse_nccl_log
from tensorfabric.host.ncclenv import derive_env

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "host_doctor.json"
LOG = ROOT / "tests" / "fixtures" / "nccl_logs" / "roce_gdr_2.21.log"
HOST = ROOT / "tests" / "fixtures" / "sysfs" / "mlx5-roce"
LINES = 200_000


def _synthetic_log() -> str:
    nccl = [line for line in LOG.read_text().splitlines() if "NCCL" in line]
    out: list[str] = []
    i = 0
    while len(out) < LINES:
        out.append(nccl[i % len(nccl)].replace("[0]", f"[{i % 8}]", 1))
        out.append(f"INFO worker-{i % 8}: step {i} loss=2.{i % 997:03d} tokens/s={1000 + i % 500}")
        i += 1
    return "\n".join(out) + "\n"


def _best_of(fn: Any, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    text = _synthetic_log()
    baseline = _best_of(lambda: [line for line in text.split("\n") if "NCCL" in line])
    parse = _best_of(lambda: parse_nccl_log(text, source="synthetic"))
    report = parse_nccl_log(text, source="synthetic")
    runs = []
    for _ in range(20):
        start = time.perf_counter()
        inv = discover(HOST)
        derive_env(inv, environ={})
        run_doctor(inv, environ={})
        runs.append(time.perf_counter() - start)
    result = {
        "machine": platform.platform(), "python": platform.python_version(), "noisy": "shared 2-core machine",
        "log_lines": LINES, "log_bytes": len(text.encode()),
        "baseline_filter_lines_per_s": round(LINES / baseline), "parse_lines_per_s": round(LINES / parse),
        "parse_vs_baseline_slowdown": round(parse / baseline, 1), "verdict": [report.transport, report.gpudirect],
        "doctor_mlx5_host_median_ms": round(statistics.median(runs) * 1e3, 1),
    }
    print(json.dumps(result, indent=2))
    atomic_write_json(RESULTS, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
