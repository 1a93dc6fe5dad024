"""Small all_reduce through the NIXL engine against the Gloo path, on the same two ranks in the same run.

Both paths are ``Group.all_reduce`` on one process group: the NIXL engine (``init(engine="nixl")``: one-sided
UCX writes or notifications) and the same group with the engine off (Gloo; for two ranks up to 64 KiB that is
the gather-sum of ``PAIR_SUM_BYTES``, the fastest Gloo path this project has). Calls are timed one by one,
alternating path round by round so load drifts hit both alike. Sizes: 1, 4, 16, 64 KiB (the decode sizes), then
128 KiB, 256 KiB and 1 MiB (to place the routing threshold ``NIXL_MAX_BYTES``). Reported per size: median and p25/p75
of each path and the ratio Gloo / NIXL of the medians.

``--where loopback`` runs two local ranks (UCX picks shared memory); ``--where lab`` runs them in a 2x1gbit
network-namespace lab (needs root), where the lab forces ``UCX_TLS=tcp,self`` and ``UCX_NET_DEVICES=eth0``;
there a second, NIXL-only run moves a known number of bytes and reads the hosts' tx counters to show the bytes
really crossed the shaped link. Default: both (the lab only with root). Writes
benchmarks/results/small_message_latency.json.

    .venv/bin/python benchmarks/small_message_latency.py [--where loopback|lab|both] [--rounds 7] [--iters 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

from tensorfabric.fsutil import atomic_write_json
from tensorfabric.lab.netlink import privileges_missing

RESULTS = Path(__file__).resolve().parent / "results"
SIZES = (1024, 4096, 16384, 65536, 131072, 262144, 1048576)
COUNTER_SIZES = (4096, 65536)
COUNTER_CALLS = 200


def rank_body(rounds: int, iters: int, sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    import torch

    from tensorfabric.transfer import Group, init

    torch.set_num_threads(1)
    # Slots of 1 MiB so the sizes above NIXL_MAX_BYTES also go through NIXL: this is where it is measured.
    nixl = init("gloo", timeout_s=120, environ=dict(os.environ), engine="nixl", nixl_max_bytes=max(sizes))
    gloo = Group(name="gloo", backend=nixl.backend, transport=nixl.transport.split("+")[-1], pg=nixl.pg,
                 table=nixl.table, global_rank=nixl.global_rank, timeout_s=nixl.timeout_s)
    paths = {"nixl": nixl, "gloo": gloo}
    times: dict[str, dict[int, list[float]]] = {"nixl": {}, "gloo": {}}
    try:
        for rnd in range(rounds):
            for size in sizes:
                t = torch.zeros(size // 4)  # zeros: repeated sums neither grow nor overflow
                for name in (("nixl", "gloo") if rnd % 2 == 0 else ("gloo", "nixl")):
                    group = paths[name]
                    group.all_reduce(t)  # unmeasured: the first call of a size pays its allocations
                    bucket = times[name].setdefault(size, [])
                    for _ in range(iters):
                        t0 = time.perf_counter()
                        group.all_reduce(t)
                        bucket.append(time.perf_counter() - t0)
        calls = {s.op: s.nixl_calls for s in nixl.stats.snapshot()}
        nixl.barrier()
    finally:
        nixl.destroy()
    return {"transport": nixl.transport, "nixl_calls": calls,
            "times": {name: {str(s): v for s, v in per.items()} for name, per in times.items()}}


def counter_body() -> dict[str, Any]:
    """NIXL only: COUNTER_CALLS all_reduces of each COUNTER_SIZES, between two barriers."""
    import torch

    from tensorfabric.transfer import init

    torch.set_num_threads(1)
    group = init("gloo", timeout_s=120, environ=dict(os.environ), engine="nixl")
    try:
        for size in COUNTER_SIZES:
            t = torch.zeros(size // 4)
            for _ in range(COUNTER_CALLS):
                group.all_reduce(t)
        routed = group.stats.get("all_reduce").nixl_calls
        group.barrier()
    finally:
        group.destroy()
    return {"transport": group.transport, "nixl_calls": routed}


def _spawned(rank: int, rounds: int, iters: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    return rank_body(rounds, iters, sizes)


def _counted(rank: int) -> dict[str, Any]:
    return counter_body()


def _run(rounds: int, iters: int, sizes: tuple[int, ...], lab: str | None) -> dict[str, Any]:
    """Rank 0's timings: two local ranks, or one per host of the lab ``lab``."""
    from tensorfabric.transfer import launch, placement

    where = placement(os.environ, ranks=2, lab=lab)
    return launch(_spawned, where, args=(rounds, iters, sizes), timeout_s=1800)[0]  # type: ignore[no-any-return]


def _lab(rounds: int, iters: int, sizes: tuple[int, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    from tensorfabric.lab.lab import Lab
    from tensorfabric.transfer import launch, placement

    raw = _run(rounds, iters, sizes, "2x1gbit")
    # A lab of our own for the counted run, so its counters hold nothing else.
    with Lab(hosts=2, rate="1gbit") as lab:
        before = _tx(lab.status().to_dict())
        info = launch(_counted, placement(os.environ, ranks=2, running_lab=lab.name), timeout_s=600)[0]
        after = _tx(lab.status().to_dict())
    sent = [a - b for a, b in zip(after, before, strict=True)]
    # Two ranks: each sends its whole tensor to the other once per all_reduce.
    expected = COUNTER_CALLS * sum(COUNTER_SIZES)
    return raw, {"calls_per_size": COUNTER_CALLS, "sizes": list(COUNTER_SIZES), "expected_bytes_per_rank": expected,
                 "tx_bytes_per_host": sent, "ratio": [s / expected for s in sent], **info}


def _tx(status: dict[str, Any]) -> list[int]:
    return [link["ends"][0]["tx_bytes"] for link in status["links"] if link["a"].endswith(":eth0")]


def summarize(raw: dict[str, Any], sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        row: dict[str, Any] = {"bytes": size}
        for name in ("nixl", "gloo"):
            ts = sorted(raw["times"][name][str(size)])
            q = statistics.quantiles(ts, n=4)
            row[name] = {"median_us": statistics.median(ts) * 1e6, "p25_us": q[0] * 1e6, "p75_us": q[2] * 1e6,
                         "calls": len(ts)}
        row["gloo_over_nixl"] = row["gloo"]["median_us"] / row["nixl"]["median_us"]
        rows.append(row)
    return rows


def _print(where: str, transport: str, rows: list[dict[str, Any]]) -> None:
    print(f"2-rank float32 all_reduce, {where} ({transport}): µs per call, median [p25-p75]")
    print(f"{'size':>8} {'nixl':>22} {'gloo':>22} {'gloo/nixl':>10}")
    for r in rows:
        n, g = r["nixl"], r["gloo"]
        print(f"{r['bytes'] // 1024:>6}Ki {n['median_us']:8.1f} [{n['p25_us']:5.0f}-{n['p75_us']:5.0f}] "
              f"{g['median_us']:8.1f} [{g['p25_us']:5.0f}-{g['p75_us']:5.0f}] {r['gloo_over_nixl']:9.1f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--where", choices=("loopback", "lab", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--max-size", type=int, default=max(SIZES),
                    help="Largest size measured (bytes); 65536 keeps to the routed sizes.")
    ap.add_argument("--out", default=str(RESULTS / "small_message_latency.json"))
    args = ap.parse_args()
    sizes = tuple(s for s in SIZES if s <= args.max_size)
    started = time.perf_counter()
    result: dict[str, Any] = {"benchmark": "small_message_latency", "rounds": args.rounds, "iters": args.iters,
                              "machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()}}
    if args.where in ("loopback", "both"):
        raw = _run(args.rounds, args.iters, sizes, None)
        result["loopback"] = {"transport": raw["transport"], "rows": summarize(raw, sizes)}
        _print("loopback", raw["transport"], result["loopback"]["rows"])
    missing = privileges_missing()
    if args.where in ("lab", "both") and missing:
        print(f"lab skipped: {missing}")
        result["lab"] = {"skipped": missing}
    elif args.where in ("lab", "both"):
        raw, counters = _lab(args.rounds, args.iters, sizes)
        result["lab"] = {"transport": raw["transport"], "rows": summarize(raw, sizes), "counters": counters}
        _print("lab 2x1gbit", raw["transport"], result["lab"]["rows"])
        print(f"lab counters: {COUNTER_CALLS} NIXL all_reduces of {list(COUNTER_SIZES)} B: tx per host "
              f"{counters['tx_bytes_per_host']} vs {counters['expected_bytes_per_rank']} B of tensors "
              f"(ratio {[f'{r:.3f}' for r in counters['ratio']]}), {counters['nixl_calls']} calls through NIXL")
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    result["wall_s"] = time.perf_counter() - started
    out = Path(args.out)
    atomic_write_json(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
