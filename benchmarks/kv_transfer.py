"""KV-cache transfer, prefill rank -> decode rank: NIXL block writes against torch.distributed send/recv.

Two ranks, in the same run and on the same process group: rank 0 holds a request's cache (random data, real
layout), rank 1 the decode side.

* **nixl**: ``kv_transfer`` as ``run --disaggregate`` uses it: pack into the registered staging area, one
  WRITE per chunk of layers (4 chunks) whose descriptors put every block at its place in the decode pool (a
  shuffled block table: a serving pool's blocks are scattered), one notification each; the decode rank
  waits for all notifications and releases the request (an ``F`` notification back).
* **send_recv**: the same K and V tensors (per layer, contiguous, no paging) through ``dist.send``/``recv``
  (Gloo), then a one-element ack back.

Both are timed on rank 0 from the start until the decode side's ack arrived (``to_ack``: the decode rank holds
the whole cache), NIXL also until its writes completed (``write``, packing the cache into staging included;
the packing alone is ``nixl_pack``). Caches: the default ``run`` model (tiny,
4 layers, 4 KV heads x 32, float32) and a Llama-3-8B-shaped one (32 layers, 8 KV heads x 128, bfloat16),
over block sizes 16/64/256 tokens; repetitions alternate the path order; medians and p25/p75.

``--where loopback``: two local ranks (UCX picks shared memory, Gloo TCP over lo). ``--where lab``: one rank per
host of a 2x1gbit lab (root), where the lab forces ``UCX_TLS=tcp,self`` over the lab interface; the hosts' tx
counters are read around a NIXL-only run of known bytes. Writes benchmarks/results/kv_transfer.json and .png.

    .venv/bin/python benchmarks/kv_transfer.py [--where loopback|lab|both] [--reps 7]
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
SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {"layers": 4, "kv_heads": 4, "head_dim": 32, "dtype": "float32", "tokens": (256, 2048)},
    "llama3-8b": {"layers": 32, "kv_heads": 8, "head_dim": 128, "dtype": "bfloat16", "tokens": (128, 512)},
}
BLOCKS = (16, 64, 256)
LINK_BPS = 1e9


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rank_body(reps: int, paths: tuple[str, ...], shapes: tuple[str, ...], blocks: tuple[int, ...]) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from tensorfabric.inference.disagg import _ucx_log_path
    from tensorfabric.transfer import init
    from tensorfabric.transfer.kv.connect import connect_kv
    from tensorfabric.transfer.kv.pool import KVLayout, blocks_for
    from tensorfabric.transfer.kv.transfer import KVReceiver, KVSender

    torch.set_num_threads(1)
    log_path, _ = _ucx_log_path()  # its directory is under the launcher's scratch, removed with it
    group = init("gloo", timeout_s=300, environ=dict(os.environ), engine="torch")
    rank = group.rank
    role = "prefill" if rank == 0 else "decode"
    rows: list[dict[str, Any]] = []
    setups: dict[str, float] = {}
    transport = ""
    req = 0
    try:
        for name in shapes:
            sh = SHAPES[name]
            dtype = getattr(torch, sh["dtype"])
            elem = torch.empty(0, dtype=dtype).element_size()
            most = max(sh["tokens"])
            region_bytes = max(blocks_for(most, b) * KVLayout(sh["layers"], sh["kv_heads"], sh["head_dim"], b, elem)
                               .block_bytes for b in blocks)
            region = torch.zeros(region_bytes, dtype=torch.uint8)

            def exchange(obj: Any) -> list[Any]:
                out: list[Any] = [None] * group.size
                dist.all_gather_object(out, obj)
                return out

            first = KVLayout(sh["layers"], sh["kv_heads"], sh["head_dim"], blocks[0], elem)
            side = connect_kv(exchange, role=role, index=0, layout=first, region=region, timeout_s=60, slots=1,
                              blocks_per_slot=blocks_for(most, blocks[0]), chunks=4, log_path=log_path)
            setups[name] = side.setup_s
            req = 0  # request numbers (and the credit they imply) are per connection
            transport = side.transport()
            g = torch.Generator().manual_seed(0)
            for tokens in sh["tokens"]:
                keys = [torch.randn(sh["kv_heads"], tokens, sh["head_dim"], generator=g).to(dtype)
                        for _ in range(sh["layers"])]
                values = [torch.randn(sh["kv_heads"], tokens, sh["head_dim"], generator=g).to(dtype)
                          for _ in range(sh["layers"])]
                bufs = [torch.empty_like(k) for k in keys]
                ack = torch.zeros(1)
                raw_bytes = 2 * sum(k.numel() * elem for k in keys)
                for bt in blocks:
                    lay = KVLayout(sh["layers"], sh["kv_heads"], sh["head_dim"], bt, elem)
                    nb = blocks_for(tokens, bt)
                    if isinstance(side, KVSender):
                        side.relayout(lay, [lay], nb)
                    table = torch.randperm(nb, generator=torch.Generator().manual_seed(bt)).tolist()
                    times: dict[str, list[float]] = {p: [] for p in ("nixl_pack", "nixl_write", "nixl_to_ack",
                                                                      "send_recv")}
                    nbytes = descriptors = 0
                    for rep in range(reps + 1):  # rep 0 warms both paths for this shape
                        for path in (paths if rep % 2 else paths[::-1]):
                            group.barrier()
                            if path == "nixl" and isinstance(side, KVSender):
                                t0 = time.perf_counter()
                                rec = side.send(req, keys, values, tokens, 0, block_table=table)
                                t1 = time.perf_counter()
                                side.await_release(req)
                                t2 = time.perf_counter()
                                nbytes, descriptors = rec.nbytes, rec.descriptors
                                if rep:
                                    times["nixl_pack"].append(rec.pack_s)
                                    times["nixl_write"].append(t1 - t0)
                                    times["nixl_to_ack"].append(t2 - t0)
                            elif path == "nixl" and isinstance(side, KVReceiver):
                                side.wait_complete(req)
                                side.release(req)
                            elif rank == 0:
                                t0 = time.perf_counter()
                                for k, v in zip(keys, values, strict=True):
                                    dist.send(k, 1)
                                    dist.send(v, 1)
                                dist.recv(ack, 1)
                                if rep:
                                    times["send_recv"].append(time.perf_counter() - t0)
                            else:
                                for buf in bufs:
                                    dist.recv(buf, 0)
                                    dist.recv(buf, 0)
                                dist.send(ack, 0)
                            if path == "nixl":
                                req += 1
                    if rank == 0:
                        rows.append({"shape": name, "tokens": tokens, "block_tokens": bt, "blocks": nb,
                                     "kv_bytes": nbytes, "raw_bytes": raw_bytes, "descriptors": descriptors,
                                     "times": times})
            side.close_agent()
        group.barrier()
    finally:
        group.destroy()
    return {"transport": transport, "setup_s": setups, "rows": rows}


def _stats(ts: list[float], nbytes: int) -> dict[str, Any]:
    if not ts:
        return {}
    q = statistics.quantiles(ts, n=4) if len(ts) > 1 else [ts[0]] * 3
    med = statistics.median(ts)
    return {"median_ms": med * 1e3, "p25_ms": q[0] * 1e3, "p75_ms": q[2] * 1e3, "runs": len(ts),
            "gbytes_per_s": nbytes / med / 1e9, "link_fraction_1gbit": nbytes * 8 / med / LINK_BPS}


def summarize(raw: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for r in raw["rows"]:
        t = r["times"]
        row = {k: r[k] for k in ("shape", "tokens", "block_tokens", "blocks", "kv_bytes", "raw_bytes", "descriptors")}
        row["nixl_pack"] = _stats(t.get("nixl_pack", []), r["kv_bytes"])
        row["nixl_write"] = _stats(t["nixl_write"], r["kv_bytes"])
        row["nixl_to_ack"] = _stats(t["nixl_to_ack"], r["kv_bytes"])
        row["send_recv"] = _stats(t["send_recv"], r["raw_bytes"])
        if row["nixl_to_ack"] and row["send_recv"]:
            row["send_recv_over_nixl"] = row["send_recv"]["median_ms"] / row["nixl_to_ack"]["median_ms"]
        out.append(row)
    return out


def _print(where: str, raw: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    setup = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in raw["setup_s"].items())
    print(f"KV transfer, {where} (transport {raw['transport']}; connection setup {setup})")
    print(f"{'shape':>10} {'tokens':>6} {'block':>5} {'MiB':>7} {'descr':>6} {'nixl write ms':>22} "
          f"{'nixl to ack ms':>22} {'GB/s':>6} {'send/recv ms':>22} {'GB/s':>6} {'ratio':>6}")

    def cell(s: dict[str, Any]) -> str:
        return f"{s['median_ms']:8.2f} [{s['p25_ms']:5.1f}-{s['p75_ms']:5.1f}]" if s else f"{'-':>22}"

    for r in rows:
        a, s = r["nixl_to_ack"], r["send_recv"]
        print(f"{r['shape']:>10} {r['tokens']:>6} {r['block_tokens']:>5} {r['kv_bytes'] / 2**20:7.2f} "
              f"{r['descriptors']:>6} {cell(r['nixl_write'])} {cell(a)} {a.get('gbytes_per_s', 0):6.3f} {cell(s)} "
              f"{s.get('gbytes_per_s', 0):6.3f} {r.get('send_recv_over_nixl', 0):5.2f}x")


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wheres = [w for w in ("loopback", "lab") if "rows" in result.get(w, {})]
    fig, axes = plt.subplots(1, len(wheres), figsize=(6 * len(wheres), 4), squeeze=False)
    for ax, where in zip(axes[0], wheres, strict=True):
        rows = result[where]["rows"]
        for shape in SHAPES:
            mine = [r for r in rows if r["shape"] == shape and r["tokens"] == max(SHAPES[shape]["tokens"])]
            if not mine:
                continue
            bts = [r["block_tokens"] for r in mine]
            ax.plot(bts, [r["nixl_to_ack"]["gbytes_per_s"] for r in mine], "o-", label=f"{shape} nixl")
            ax.plot(bts, [r["send_recv"]["gbytes_per_s"] for r in mine], "s--", label=f"{shape} send/recv")
        if where == "lab":
            ax.axhline(LINK_BPS / 8e9, color="grey", linestyle=":", label="1 Gbit/s")
        ax.set_ylim(bottom=0)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("block size (tokens)")
        ax.set_ylabel("GB/s to the decode side's ack (median)")
        ax.set_title(f"KV transfer, {where} ({result[where]['transport']})", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    atomic_write_figure(path, fig, dpi=100)


def _spawned(rank: int, reps: int, paths: tuple[str, ...], shapes: tuple[str, ...], blocks: tuple[int, ...]
             ) -> dict[str, Any]:
    return rank_body(reps, paths, shapes, blocks)


def _lab(reps: int) -> dict[str, Any]:
    from tensorfabric.lab.lab import Lab
    from tensorfabric.transfer import launch, placement

    def phase(lab: Lab, *args: Any) -> tuple[dict[str, Any], list[int]]:
        before = _tx(lab.status().to_dict())
        rank0 = launch(_spawned, placement(os.environ, ranks=2, running_lab=lab.name), args=args, timeout_s=1200)[0]
        after = _tx(lab.status().to_dict())
        return rank0, [a - b for a, b in zip(after, before, strict=True)]

    with Lab(hosts=2, rate="1gbit") as lab:
        # Counter phase: NIXL only, Llama-3-8B shape, 512 tokens (64 MiB), block 16: known bytes on the wire.
        counted, tx = phase(lab, reps, ("nixl",), ("llama3-8b",), (16,))
        raw, _ = phase(lab, reps, ("nixl", "send_recv"), tuple(SHAPES), BLOCKS)
    moved = sum(r["kv_bytes"] * (len(r["times"]["nixl_write"]) + 1) for r in counted["rows"])
    return {"raw": raw, "counters": {"transport": counted["transport"], "nixl_payload_bytes": moved,
                                     "tx_bytes_per_host": tx, "h0_tx_over_payload": tx[0] / moved,
                                     "rows": summarize(counted)}}


def _tx(status: dict[str, Any]) -> list[int]:
    return [link["ends"][0]["tx_bytes"] for link in status["links"] if link["a"].endswith(":eth0")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--where", choices=("loopback", "lab", "both"), default="both")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--paths", default="nixl,send_recv", help=argparse.SUPPRESS)
    ap.add_argument("--shapes", default=",".join(SHAPES), help=argparse.SUPPRESS)
    ap.add_argument("--blocks", default=",".join(map(str, BLOCKS)), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(RESULTS / "kv_transfer.json"))
    args = ap.parse_args()
    paths, shapes = tuple(args.paths.split(",")), tuple(args.shapes.split(","))
    blocks = tuple(int(b) for b in args.blocks.split(","))
    from tensorfabric.transfer import launch, placement

    started = time.perf_counter()
    result: dict[str, Any] = {"benchmark": "kv_transfer", "reps": args.reps, "shapes": SHAPES,
                              "machine": {"cpus": os.cpu_count(), "load_avg_at_start": os.getloadavg()}}
    if args.where in ("loopback", "both"):
        where = placement(os.environ, ranks=2)
        raw = launch(_spawned, where, args=(args.reps, paths, shapes, blocks), timeout_s=1800)[0]
        result["loopback"] = {"transport": raw["transport"], "setup_s": raw["setup_s"], "rows": summarize(raw)}
        _print("loopback", raw, result["loopback"]["rows"])
    missing = privileges_missing()
    if args.where in ("lab", "both") and missing:
        print(f"lab skipped: {missing}")
        result["lab"] = {"skipped": missing}
    elif args.where in ("lab", "both"):
        lab = _lab(args.reps)
        raw = lab["raw"]
        result["lab"] = {"transport": raw["transport"], "setup_s": raw["setup_s"], "rows": summarize(raw),
                         "counters": lab["counters"]}
        _print("lab 2x1gbit", raw, result["lab"]["rows"])
        c = lab["counters"]
        best = max(c["rows"], key=lambda r: r["kv_bytes"])["nixl_to_ack"]
        print(f"lab counters ({c['transport']}): NIXL moved {c['nixl_payload_bytes']:,} B of KV; h0 eth0 tx "
              f"{c['tx_bytes_per_host'][0]:,} B = {c['h0_tx_over_payload']:.3f}x the payload; 64 MiB transfer median "
              f"{best['median_ms']:.1f} ms = {best['link_fraction_1gbit'] * 100:.1f} % of 1 Gbit/s")
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    result["wall_s"] = time.perf_counter() - started
    out = Path(args.out)
    atomic_write_json(out, result)
    plot(result, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
