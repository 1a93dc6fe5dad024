"""How long fabric lint takes as the fabric grows, against loading the same spec in the same run.

For leaf/spine fabrics written by ``fabric init`` (8x4x16 up to 32x16x32 leaves x spines x hosts per leaf) it
measures, median of 3 runs each:

* baseline: ``yaml.safe_load`` + validation of the spec text (what every command pays);
* lint: every rule over the spec (spec -> per-device records with per-port headroom, then all rules, including
  the up-down / channel-dependency search).

Usage: ``.venv/bin/python benchmarks/fabric_lint.py``. Writes ``benchmarks/results/fabric_lint.json``.
Timings on a shared 2-core machine are noisy; compare lint against the baseline of the same run.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from tensorfabric.fabric.lint import lint
from tensorfabric.fabric.spec.load import load_text
from tensorfabric.fabric.starter import starter_yaml
from tensorfabric.fsutil import atomic_write_text

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "fabric_lint.json"
SIZES = [(8, 4, 16), (16, 8, 32), (32, 16, 32)]
REPEATS = 3


def _median(fn: Any) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    rows = []
    for leaves, spines, hosts in SIZES:
        text = starter_yaml(leaves=leaves, spines=spines, hosts_per_leaf=hosts)
        spec = load_text(text)
        load_s = _median(lambda t=text: load_text(t))  # type: ignore[misc]
        lint_s = _median(lambda s=spec: lint(s))  # type: ignore[misc]
        row = {"leaves": leaves, "spines": spines, "hosts_per_leaf": hosts, "links": len(spec.links),
               "findings": len(lint(spec)), "load_s": round(load_s, 4), "lint_s": round(lint_s, 4),
               "lint_over_load": round(lint_s / load_s, 2)}
        rows.append(row)
        print(f"{leaves:>3} leaves {spines:>3} spines {hosts:>3} hosts/leaf  {row['links']:>5} links  "
              f"load {load_s:.3f}s  lint {lint_s:.3f}s  ({row['lint_over_load']}x load)")
    atomic_write_text(RESULTS, json.dumps({"benchmark": "fabric_lint", "python": platform.python_version(),
                                           "machine": platform.machine(), "rows": rows}, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
