"""Two-rank small all_reduce: Gloo's ring against tensorfabric's gather-sum (``PAIR_SUM_BYTES``), same run.

Decode all-reduces are tiny (hidden x 4 bytes per token: 1 KiB on the default model) and so latency-bound.
Gloo's ring on two ranks is a reduce-scatter then an all-gather, two dependent message rounds; Group.all_reduce
sends them as one all_gather and adds locally. Both are timed call by call on the same two ranks, alternating
round by round so drifts hit both alike, for float32 tensors of 1 KiB .. 256 KiB (the threshold is 64 KiB;
above it Group.all_reduce is the ring itself, so the 256 KiB row shows where the two meet). Reported per size:
median, mean and p90 of each and the ratio ring / gather-sum of the means and the medians (> 1: gather-sum
faster). With root and the lab available the ranks run in a ``2x1gbit`` network-namespace lab, otherwise on
loopback; the output says which. Writes benchmarks/results/pair_sum_latency.json and a PNG of the curve.

    .venv/bin/python benchmarks/pair_sum_latency.py [--loopback] [--rounds 5] [--iters 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from tensorfabric.fsutil import atomic_write_figure, atomic_write_json
from tensorfabric.lab.netlink import privileges_missing

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (1024, 4096, 16384, 65536, 262144)


def rank_body(rounds: int, iters: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from tensorfabric.transfer import init

    torch.set_num_threads(1)
    group = init("gloo", timeout_s=120, environ=dict(os.environ))
    times: dict[str, dict[int, list[float]]] = {"ring": {}, "gather_sum": {}}
    calls = {"ring": lambda t: dist.all_reduce(t, group=group.pg), "gather_sum": group.all_reduce}
    try:
        for rnd in range(rounds):
            for size in SIZES:
                t = torch.zeros(size // 4)  # zeros: repeated sums neither grow nor overflow
                order = ("ring", "gather_sum") if rnd % 2 == 0 else ("gather_sum", "ring")
                for name in order:
                    call = calls[name]
                    call(t)  # one unmeasured call: the first message of a size pays allocation
                    bucket = times[name].setdefault(size, [])
                    for _ in range(iters):
                        t0 = time.perf_counter()
                        call(t)
                        bucket.append(time.perf_counter() - t0)
        group.barrier()
    finally:
        group.destroy()
    return {name: {str(s): v for s, v in per.items()} for name, per in times.items()}


def _run(rounds: int, iters: int, lab: str | None) -> dict[str, Any]:
    """Rank 0's timings: two local ranks, or one per host of the lab ``lab``."""
    from tensorfabric.transfer import launch, placement

    where = placement(os.environ, ranks=2, lab=lab)
    return launch(_spawned, where, args=(rounds, iters), timeout_s=900)[0]  # type: ignore[no-any-return]


def _spawned(rank: int, rounds: int, iters: int) -> dict[str, Any]:
    return rank_body(rounds, iters)


def summarize(raw: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for size in SIZES:
        row: dict[str, Any] = {"bytes": size}
        for name in ("ring", "gather_sum"):
            ts = sorted(raw[name][str(size)])
            row[name] = {"median_ms": statistics.median(ts) * 1e3, "mean_ms": statistics.fmean(ts) * 1e3,
                         "p90_ms": ts[int(0.9 * (len(ts) - 1))] * 1e3, "calls": len(ts)}
        row["ratio_mean"] = row["ring"]["mean_ms"] / row["gather_sum"]["mean_ms"]
        row["ratio_median"] = row["ring"]["median_ms"] / row["gather_sum"]["median_ms"]
        rows.append(row)
    return rows


def plot(rows: list[dict[str, Any]], where: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    kib = [r["bytes"] / 1024 for r in rows]
    for name, style in (("ring", "o-"), ("gather_sum", "s-")):
        ax.plot(kib, [r[name]["mean_ms"] for r in rows], style, label=f"{name} mean")
        ax.plot(kib, [r[name]["median_ms"] for r in rows], style, alpha=0.4, label=f"{name} median")
    ax.axvline(64, color="grey", linestyle="--", label="PAIR_SUM_BYTES")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("all_reduce size (KiB, float32)")
    ax.set_ylabel("latency per call (ms)")
    ax.set_title(f"2-rank all_reduce, {where}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write_figure(path, fig, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loopback", action="store_true", help="Two local ranks on loopback, no lab.")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--out", default=str(RESULTS / "pair_sum_latency.json"))
    args = ap.parse_args()
    missing = "--loopback" if args.loopback else privileges_missing()
    where = f"loopback (no lab: {missing})" if missing else "lab 2x1gbit"
    started = time.perf_counter()
    raw = _run(args.rounds, args.iters, None if missing else "2x1gbit")
    rows = summarize(raw)
    result = {"benchmark": "pair_sum_latency", "where": where, "rounds": args.rounds, "iters": args.iters,
              "machine": {"cpus": os.cpu_count()}, "rows": rows, "wall_s": time.perf_counter() - started}
    print(f"2-rank float32 all_reduce, {where}: ring (Gloo) against gather-sum, ms per call")
    print(f"{'size':>8} {'ring med':>9} {'mean':>7} {'p90':>7} {'g-s med':>9} {'mean':>7} {'p90':>7} "
          f"{'ratio mean':>11} {'median':>7}")
    for r in rows:
        ring, gs = r["ring"], r["gather_sum"]
        print(f"{r['bytes'] // 1024:>6}Ki {ring['median_ms']:9.3f} {ring['mean_ms']:7.3f} {ring['p90_ms']:7.3f} "
              f"{gs['median_ms']:9.3f} {gs['mean_ms']:7.3f} {gs['p90_ms']:7.3f} {r['ratio_mean']:10.2f}x "
              f"{r['ratio_median']:6.2f}x")
    out = Path(args.out)
    atomic_write_json(out, result)
    plot(rows, where, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
