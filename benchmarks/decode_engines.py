"""`tensorfabric run` decode through the NIXL engine against the torch (Gloo-only) engine, same run.

Runs ``tensorfabric run --json --ignore-eos --max-new-tokens N --engine E`` (on loopback, the default model and its
default tp unless ``--model``) for E in torch, nixl, alternating, ``--pairs`` times. Reports per engine the median
and range of tokens/s and of per-token communication, the per-collective split of NIXL calls into waiting
for the slowest peer and moving bytes, the per-pair tokens/s ratio, and whether every run produced the same
greedy tokens. Writes benchmarks/results/decode_engines.json.

    .venv/bin/python benchmarks/decode_engines.py [--pairs 5] [--tokens 32] [--model DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tensorfabric.fsutil import atomic_write_json

RESULTS = Path(__file__).resolve().parent / "results"


def one_run(engine: str, tokens: int, model: str | None) -> dict[str, Any]:
    argv = [sys.executable, "-m", "tensorfabric", "run", "--json", "--ignore-eos", "--max-new-tokens", str(tokens),
            "--engine", engine]
    if model is not None:
        argv += ["--model", model]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--model", default=None)
    ap.add_argument("--out", default=str(RESULTS / "decode_engines.json"))
    args = ap.parse_args()
    started = time.perf_counter()
    load_start = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {"torch": [], "nixl": []}
    for _ in range(args.pairs):
        for engine in ("torch", "nixl"):
            runs[engine].append(one_run(engine, args.tokens, args.model))
    tokens = [r["token_ids"] for rs in runs.values() for r in rs]
    summary: dict[str, Any] = {}
    for engine, rs in runs.items():
        tps = [r["tokens_per_s"] for r in rs]
        comm = [r["per_token"]["comm_s"] * 1e3 for r in rs]
        steps = args.tokens - 1
        per_op = {}
        for op in rs[0]["comm"]:
            wait = [r["comm"][op]["wait_s"] * 1e3 / steps for r in rs]
            total = [r["comm"][op]["seconds"] * 1e3 / steps for r in rs]
            per_op[op] = {"total_ms_per_token": statistics.median(total),
                          "wait_ms_per_token": statistics.median(wait) if engine == "nixl" else None,
                          "move_ms_per_token": statistics.median(t - w for t, w in zip(total, wait, strict=True))
                          if engine == "nixl" else None,
                          "nixl_calls": rs[0]["comm"][op]["nixl_calls"], "calls": rs[0]["comm"][op]["calls"]}
        summary[engine] = {"tokens_per_s": {"median": statistics.median(tps), "min": min(tps), "max": max(tps)},
                           "comm_ms_per_token": {"median": statistics.median(comm), "min": min(comm),
                                                 "max": max(comm)},
                           "compute_ms_per_token": statistics.median(r["per_token"]["compute_s"] * 1e3 for r in rs),
                           "transport": rs[0]["transport"], "per_op": per_op}
    ratios = [n["tokens_per_s"] / t["tokens_per_s"] for t, n in zip(runs["torch"], runs["nixl"], strict=True)]
    result = {"benchmark": "decode_engines", "model": runs["torch"][0]["model"], "tp": runs["torch"][0]["tp"],
              "new_tokens": args.tokens, "pairs": args.pairs, "summary": summary, "pair_ratios": ratios,
              "median_ratio": statistics.median(ratios), "identical_tokens": all(t == tokens[0] for t in tokens),
              "machine": {"cpus": os.cpu_count(), "load_avg_at_start": load_start,
                          "load_avg_at_end": os.getloadavg()}, "wall_s": time.perf_counter() - started}
    print(f"tensorfabric run, tp={result['tp']} loopback, {args.tokens} tokens, model {result['model']}, "
          f"{args.pairs} pairs "
          f"(load {load_start[0]:.1f} -> {result['machine']['load_avg_at_end'][0]:.1f})")
    for engine, s in summary.items():
        tps, comm = s["tokens_per_s"], s["comm_ms_per_token"]
        print(f"  {engine:>5}: {tps['median']:6.1f} tokens/s [{tps['min']:.1f}-{tps['max']:.1f}], comm "
              f"{comm['median']:.2f} ms/token [{comm['min']:.2f}-{comm['max']:.2f}], compute "
              f"{s['compute_ms_per_token']:.2f} ms/token  ({s['transport']})")
        for op, o in s["per_op"].items():
            split = "" if o["wait_ms_per_token"] is None else \
                f" = waiting {o['wait_ms_per_token']:.3f} + moving {o['move_ms_per_token']:.3f}"
            print(f"         {op:>15}: {o['total_ms_per_token']:.3f} ms/token{split} ({o['nixl_calls']}/{o['calls']} "
                  "calls via nixl)")
    print(f"  tokens/s nixl/torch per pair: {[f'{r:.2f}' for r in ratios]}, median {result['median_ratio']:.2f}x; "
          f"identical greedy tokens: {result['identical_tokens']}")
    out = Path(args.out)
    atomic_write_json(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
