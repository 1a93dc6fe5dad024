"""The compressed all_reduce's two routes on three ranks: encoded bytes over Gloo, or over NIXL writes.

The same ``tensorfabric bench`` sweep (SmolLM2's 576 KiB prefill all-reduce by default, 3 ranks) with
``--codec int8`` through ``--engine torch`` (the algorithm's all_to_all and all_gather as Gloo collectives)
and ``--engine nixl`` (the same bytes as one-sided NIXL writes, ``transfer/engines/nixl_bulk.py``), and the
uncompressed all_reduce as the baseline, alternating configuration by round so that load drifts hit all
alike. Reported per place: the median over rounds of bench's per-call time, and the speed-up of each route
against the uncompressed all_reduce. Places: local ranks on loopback (``--nproc 3``) and a ``3x1gbit``
network-namespace lab (needs root; skipped otherwise). Writes benchmarks/results/compressed_routes.json.

    .venv/bin/python benchmarks/compressed_routes.py [--rounds 5] [--size 576K] [--iters 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from tensorfabric.fsutil import atomic_write_json
from tensorfabric.lab.netlink import privileges_missing

RESULTS = Path(__file__).resolve().parent / "results"
CONFIGS = {"none": ["--codec", "none", "--engine", "nixl"],
           "int8 over gloo": ["--codec", "int8", "--engine", "torch"],
           "int8 over nixl": ["--codec", "int8", "--engine", "nixl"]}


def _bench(where: str, argv: list[str]) -> dict[str, Any]:
    # bench places its own ranks (the one launcher): --nproc 3 local processes, or --lab one per lab host.
    place = ["--lab", "3x1gbit"] if where == "lab" else ["--nproc", "3"]
    out = subprocess.run([sys.executable, "-m", "tensorfabric", "bench", *place, *argv], check=True,
                         capture_output=True, text=True, timeout=300).stdout
    doc: dict[str, Any] = json.loads(out)
    return doc


def measure(where: str, size: str, iters: int, rounds: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {name: [] for name in CONFIGS}
    transport = ""
    for r in range(rounds):
        for name, extra in CONFIGS.items():
            doc = _bench(where, ["--min", size, "--max", size, "--iters", str(iters), "--json", *extra])
            row = doc["rows"][0]
            if row["wrong"]:
                raise SystemExit(f"{where} {name}: {row['wrong']} values outside the codec's bound")
            times[name].append(row["time_us"])
            transport = doc["transport"] if name == "int8 over nixl" else transport
            print(f"  {where:<8} round {r}: {name:<15} {row['time_us']:8.0f} us", flush=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    return {"where": where, "size": size, "transport_nixl": transport, "time_us": times, "median_us": med,
            "speedup_vs_none": {name: med["none"] / med[name] for name in CONFIGS if name != "none"}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--size", default="576K", help="all_reduce size, as bench's --min/--max take it")
    parser.add_argument("--out", type=Path, default=RESULTS / "compressed_routes.json")
    args = parser.parse_args()
    places = ["loopback"] + ([] if privileges_missing() else ["lab"])
    results = [measure(w, args.size, args.iters, args.rounds) for w in places]
    doc = {"benchmark": "compressed_routes", "ranks": 3, "machine": {"cpus": os.cpu_count(),
                                                                      "load_avg_1m": os.getloadavg()[0]},
           "rounds": args.rounds, "results": results}
    for res in results:
        m = res["median_us"]
        print(f"{res['where']:<8} {res['size']}: none {m['none']:7.0f} us | "
              f"int8 over gloo {m['int8 over gloo']:7.0f} us "
              f"(x{res['speedup_vs_none']['int8 over gloo']:.2f}) | int8 over nixl {m['int8 over nixl']:7.0f} us "
              f"(x{res['speedup_vs_none']['int8 over nixl']:.2f})")
    atomic_write_json(args.out, doc)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
