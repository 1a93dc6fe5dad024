"""How long ``fabric render`` takes as the fabric grows from 64 to 4096 hosts, against loading the same spec.

Leaf/spine fabrics written by ``fabric init`` (32 hosts per leaf, 8 spines, SONiC, 400G), median of 3 runs each:

* baseline: parsing + validating the spec text (``load_text``), what every verb pays first;
* render: every device's file in memory, with the host doctor's NCCL derivation (what ``fabric render`` does);
* write: ``render_all`` into a fresh directory (render plus one atomic file per device).

Render must be linear in hosts: the script prints seconds per host at every size and the ratio of the largest
to the smallest (1.0 = perfectly linear). Goal: 4096 hosts under 10 s. Before this change the topology was
rebuilt per host (quadratic: 1024 hosts took 48 s, 4096 did not finish).

Usage: ``.venv/bin/python benchmarks/fabric_render.py [--quick]``. Writes ``benchmarks/results/fabric_render.json``
and ``fabric_render.png``. Timings on a shared 2-core machine are noisy; compare against the baseline column.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tensorfabric.fabric.renderers import render_all, render_fabric
from tensorfabric.fabric.spec.load import load_text
from tensorfabric.fabric.starter import starter_yaml
from tensorfabric.fsutil import atomic_write_figure, atomic_write_text
from tensorfabric.host.ncclenv import nccl_env_for_nics

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "fabric_render.json"
HOSTS = [64, 128, 256, 512, 1024, 2048, 4096]
HOSTS_PER_LEAF = 32
SPINES = 8
REPEATS = 3


def _median(fn: Callable[[Any], Any], setup: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        arg = setup()  # untimed: e.g. a freshly loaded spec, since a spec caches its indexes and topology
        start = time.perf_counter()
        fn(arg)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _write(text: str, repeats: int) -> float:
    # The output directory is made and removed outside the timed part: only render_all is measured.
    times = []
    for _ in range(repeats):
        spec = load_text(text)
        with tempfile.TemporaryDirectory(prefix="tf-render-bench-") as out:
            start = time.perf_counter()
            render_all(spec, out, nccl_env_for=nccl_env_for_nics)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hosts = [r["hosts"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for key, label in (("load_s", "load spec (baseline)"), ("render_s", "render in memory"),
                       ("write_s", "render_all to disk")):
        ax.plot(hosts, [r[key] for r in rows], marker="o", label=label)
    per_host = rows[0]["render_s"] / rows[0]["hosts"]
    ax.plot(hosts, [per_host * h for h in hosts], linestyle=":", color="grey", label="linear from 64 hosts")
    ax.axhline(10, color="red", linewidth=0.8, linestyle="--", label="goal: 10 s at 4096 hosts")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("hosts (32 per leaf, 8 spines)")
    ax.set_ylabel("seconds (median of 3)")
    ax.set_title("fabric render time vs fabric size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write_figure(path, fig)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="up to 1024 hosts, one run each")
    args = parser.parse_args()
    sizes = [h for h in HOSTS if h <= 1024] if args.quick else HOSTS
    repeats = 1 if args.quick else REPEATS
    rows = []
    # Warm up imports and caches once, so the smallest size does not carry first-call costs.
    render_fabric(load_text(starter_yaml(leaves=2, spines=SPINES, hosts_per_leaf=HOSTS_PER_LEAF)), nccl_env_for_nics)
    for hosts in sizes:
        text = starter_yaml(leaves=hosts // HOSTS_PER_LEAF, spines=SPINES, hosts_per_leaf=HOSTS_PER_LEAF)
        def fresh(t: str = text) -> Any:
            return load_text(t)

        load_s = _median(load_text, lambda t=text: t, repeats)  # type: ignore[misc]
        render_s = _median(lambda s: render_fabric(s, nccl_env_for_nics), fresh, repeats)
        write_s = _write(text, repeats)
        spec = fresh()
        files = len(render_fabric(spec, nccl_env_for_nics))
        row = {"hosts": hosts, "switches": len(spec.switches), "links": len(spec.links), "files": files,
               "load_s": round(load_s, 4), "render_s": round(render_s, 4), "write_s": round(write_s, 4),
               "render_ms_per_host": round(render_s / hosts * 1e3, 3)}
        rows.append(row)
        print(f"{hosts:>5} hosts {row['switches']:>4} switches {row['links']:>5} links  load {load_s:6.3f}s  "
              f"render {render_s:6.3f}s  write {write_s:6.3f}s  ({row['render_ms_per_host']:.3f} ms/host)")
    linearity = rows[-1]["render_ms_per_host"] / rows[0]["render_ms_per_host"]
    print(f"per-host render time at {rows[-1]['hosts']} hosts / at {rows[0]['hosts']} hosts: {linearity:.2f} "
          "(1.0 = linear)")
    out = RESULTS.with_name("fabric_render_quick.json") if args.quick else RESULTS
    atomic_write_text(out, json.dumps({"benchmark": "fabric_render", "python": platform.python_version(),
                                       "machine": platform.machine(), "repeats": repeats,
                                       "per_host_ratio_largest_to_smallest": round(linearity, 2),
                                       "rows": rows}, indent=2) + "\n")
    print(f"wrote {out}")
    if not args.quick:
        plot(rows, out.with_suffix(".png"))
        print(f"wrote {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
