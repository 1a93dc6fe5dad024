"""Compressed all_reduce against uncompressed, same run: 16 MiB float32 on 2 Gloo ranks over loopback.

Variants (none, int8, int4, fp8) alternate round by round so load drift hits them alike; each round times
``iters`` calls per variant. Reported per codec: median time, speed ratio (uncompressed time / codec time,
> 1 means faster), wire bytes (payload + scales) and the max error against the float64 exact sum, next to
the documented bound. Loopback moves bytes at memory speed, so the quantize/dequantize work dominates here;
the ratio that matters for a real link is measured through the lab (``tensorfabric bench --lab 2x1gbit
--codec int8``).

Usage: python benchmarks/codec_speedup.py [--rounds 5] [--iters 3]; writes benchmarks/results/codec_speedup.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
NUMEL = 16 * 2**20 // 4
VARIANTS = ("none", "int8", "int4", "fp8")


def _input(rank: int) -> Any:
    import torch

    return torch.randn(NUMEL, generator=torch.Generator().manual_seed(1234 + rank))


def rank_body(rank: int, rounds: int, iters: int) -> dict[str, Any]:
    import torch

    from tensorfabric.transfer import get_codec, init
    from tensorfabric.transfer.compressed import error_bound_all_reduce

    group = init(timeout_s=300)
    n = group.size
    inputs = [_input(r) for r in range(n)]
    exact = torch.stack([x.double() for x in inputs]).sum(0)
    codecs = {name: (get_codec(name) if name != "none" else None) for name in VARIANTS}
    work = inputs[rank].clone()

    def timed(name: str) -> float:
        group.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            work.copy_(inputs[rank])
            group.all_reduce(work, codec=codecs[name])
        return (time.perf_counter() - t0) / iters

    errors: dict[str, Any] = {}
    for name, codec in codecs.items():
        work.copy_(inputs[rank])
        group.all_reduce(work, codec=codec)  # warm-up and the accuracy sample
        err = (work.double() - exact).abs()
        bound = error_bound_all_reduce(inputs, codec, n) if codec is not None else None
        errors[name] = {"max_error": float(err.max()), "mean_error": float(err.mean()),
                        "bound_violations": int((err > bound).sum()) if bound is not None else 0,
                        "max_bound": float(bound.max()) if bound is not None else 0.0}
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for r in range(rounds):
        order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
        for name in order:
            times[name].append(timed(name))
    wire = {s.codec: s.wire_bytes // max(s.calls, 1) for s in group.stats.snapshot() if s.op == "all_reduce"}
    group.destroy()
    return {"times": times, "errors": errors, "wire": wire}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=3)
    args = parser.parse_args()
    from tensorfabric.fsutil import atomic_write_json
    from tensorfabric.transfer import launch, placement

    t0 = time.time()
    ranks = launch(rank_body, placement(os.environ, ranks=2), args=(args.rounds, args.iters), timeout_s=1800)
    if 0 not in ranks:
        return 0  # a non-zero rank of a launched job: rank 0 reports
    rank0 = ranks[0]
    base = statistics.median(rank0["times"]["none"])
    rows = []
    for name in VARIANTS:
        med = statistics.median(rank0["times"][name])
        rows.append({"codec": name, "time_ms": med * 1e3, "speed_ratio": base / med,
                     "wire_bytes": rank0["wire"].get(name, NUMEL * 4), **rank0["errors"][name]})
    result = {"benchmark": "codec_speedup", "nranks": 2, "backend": "gloo", "link": "loopback",
              "size_bytes": NUMEL * 4, "dtype": "float32", "block": 64, "rounds": args.rounds, "iters": args.iters,
              "rows": rows, "wall_s": time.time() - t0,
              "note": "2-core machine shared with other jobs; loopback, so codec compute dominates"}
    print(f"{'codec':>6}  {'time ms':>9}  {'ratio':>6}  {'wire bytes':>11}  {'max error':>10}  {'bound':>9}")
    for r in rows:
        print(f"{r['codec']:>6}  {r['time_ms']:>9.1f}  {r['speed_ratio']:>5.2f}x  {r['wire_bytes']:>11}  "
              f"{r['max_error']:>10.3e}  {r['max_bound']:>9.3e}")
    RESULTS.mkdir(exist_ok=True)
    atomic_write_json(RESULTS / "codec_speedup.json", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
