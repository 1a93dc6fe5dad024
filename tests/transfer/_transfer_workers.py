"""Rank bodies for the spawned-rank tests (module level so the spawn context can import them).

Each worker checks what it can inside the rank and returns plain data; the test asserts on it, so a failure
shows every rank's view.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from tensorfabric.errors import TransferError
from tensorfabric.transfer import Group, SendRecv, get_codec, init
from tensorfabric.transfer.compressed import compressed_all_reduce, error_bound_all_reduce
from tensorfabric.transfer.engines.nixl_engine import NixlEngine
from tensorfabric.transfer.engines.torch import PAIR_SUM_BYTES
from tensorfabric.transfer.group import NIXL_MAX_BYTES

DTYPES = (torch.float32, torch.bfloat16, torch.int64)


def _nixl(g: Group) -> NixlEngine:
    """The NIXL engine under a group opened with ``engine="nixl"`` (the small side of its Router)."""
    engine: NixlEngine = g.comm.small.engine  # type: ignore[attr-defined]
    return engine


def _torch_twin(g: Group) -> Group:
    """The same ranks and process group through the torch engine alone (not to be destroyed: g owns pg)."""
    return Group(name=g.name, backend=g.backend, table=g.table, global_rank=g.global_rank, timeout_s=g.timeout_s,
                 pg=g.pg, transport="gloo/tcp")


def _data(rank: int, shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed * 100 + rank)
    if dtype == torch.int64:
        return torch.randint(-1000, 1000, shape, generator=gen, dtype=torch.int64)
    return torch.randn(shape, generator=gen).to(dtype)


def suite(rank: int, numel: int, engine: str = "torch") -> dict[str, Any]:
    """One process group, every check: spawning ranks is the expensive part on a small machine."""
    g = init(timeout_s=60, engine=engine)
    out = {"exactness": exactness(g), "codecs": codec_bounds(g, numel), "bucketing": bucketing(g),
           "codec_routes": codec_routes(g), "arrivals": arrivals(g)}
    if g.size == 4:
        out["mesh"] = mesh(g)
    g.barrier()
    g.destroy()
    return out


def exactness(g: Group) -> dict[str, Any]:
    """Every collective of Group against the same raw torch.distributed call, bit for bit."""
    n, rank = g.size, g.rank
    mismatches: list[str] = []

    def same(name: str, ours: torch.Tensor, ref: torch.Tensor) -> None:
        if ours.dtype != ref.dtype or ours.shape != ref.shape or not torch.equal(ours, ref):
            mismatches.append(name)

    for seed, dtype in enumerate(DTYPES):
        tag = str(dtype).removeprefix("torch.")
        x = _data(rank, (4 * n, 3), dtype, seed)
        for op, rop in (("sum", dist.ReduceOp.SUM), ("max", dist.ReduceOp.MAX), ("min", dist.ReduceOp.MIN),
                        ("product", dist.ReduceOp.PRODUCT)):
            ours, ref = x.clone(), x.clone()
            g.all_reduce(ours, op=op)
            dist.all_reduce(ref, op=rop)
            same(f"all_reduce/{op}/{tag}", ours, ref)
        ours = g.all_reduce(x.clone(), async_op=True).wait()
        ref = x.clone()
        dist.all_reduce(ref)
        same(f"all_reduce/async/{tag}", ours, ref)

        ref = torch.empty((n * x.shape[0], 3), dtype=dtype)
        dist.all_gather_single(ref, x)
        same(f"all_gather/{tag}", g.all_gather(x), ref)
        same(f"all_gather/async/{tag}", g.all_gather(x, async_op=True).wait(), ref)

        ref = torch.empty((x.shape[0] // n, 3), dtype=dtype)
        dist.reduce_scatter_single(ref, x)
        same(f"reduce_scatter/{tag}", g.reduce_scatter(x), ref)

        for src in range(n):
            ours, ref = x.clone(), x.clone()
            g.broadcast(ours, src=src)
            dist.broadcast(ref, src=src)
            same(f"broadcast/src{src}/{tag}", ours, ref)

        ref = torch.empty_like(x)
        dist.all_to_all_single(ref, x)
        same(f"all_to_all/{tag}", g.all_to_all(x), ref)

        nxt, prev = (rank + 1) % n, (rank - 1) % n
        got = torch.empty_like(x)
        g.batch_send_recv([SendRecv("send", x, nxt), SendRecv("recv", got, prev)])
        same(f"batch_send_recv/{tag}", got, _data(prev, tuple(x.shape), dtype, seed))
        if rank == 0:
            g.send(x, dst=1)
        elif rank == 1:
            got = torch.empty_like(x)
            g.recv(got, src=0)
            same(f"send_recv/{tag}", got, _data(0, tuple(x.shape), dtype, seed))
    g.barrier()
    stats = {s.op: (s.calls, s.bytes) for s in g.stats.snapshot()}
    # Either side of the two-rank gather-sum threshold and of the NIXL slot, odd sizes between: every path bit
    # for bit (the NIXL path reproduces Gloo's ring grouping of the additions).
    for numel in (1, 13, 1001, PAIR_SUM_BYTES // 4, PAIR_SUM_BYTES // 4 + 1, 65537, NIXL_MAX_BYTES // 4,
                  NIXL_MAX_BYTES // 4 + 1):
        x = _data(rank, (numel,), torch.float32, numel)
        ours, ref = g.all_reduce(x.clone()), x.clone()
        dist.all_reduce(ref)
        same(f"all_reduce/sum/float32/{numel}", ours, ref)
    for numel in (1001, NIXL_MAX_BYTES // 2):
        x = _data(rank, (numel,), torch.bfloat16, numel)
        ours, ref = g.all_reduce(x.clone()), x.clone()
        dist.all_reduce(ref)
        same(f"all_reduce/sum/bfloat16/{numel}", ours, ref)
    nixl_calls = {s.op: s.nixl_calls for s in g.stats.snapshot()}
    result = {"mismatches": mismatches, "stats": stats, "transport": g.transport, "size": n, "nixl": nixl_calls,
              "engine": g.engine,
              "table": [(e.global_rank, e.local_rank, e.group_rank) for e in g.table]}
    return result


def mesh(g: Group) -> dict[str, Any]:
    rank = g.rank
    groups = g.mesh((2, 2), ("pp", "tp"))
    out: dict[str, Any] = {}
    for name, sub in groups.items():
        t = torch.tensor([float(rank)])
        sub.all_reduce(t)
        b = torch.tensor([float(rank)])
        sub.broadcast(b, src=1)
        out[name] = {"name": sub.name, "ranks": sub.ranks, "rank": sub.rank, "sum": t.item(), "bcast": b.item(),
                     "table": [(e.global_rank, e.group_rank) for e in sub.table]}
    return out


def _inputs(kind: str, rank: int, numel: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(7 + rank)
    if kind == "random":
        return torch.randn(numel, generator=gen)
    if kind == "zeros":
        return torch.zeros(numel)
    if kind == "constant":
        return torch.full((numel,), 3.25 * (rank + 1))
    x = torch.randn(numel, generator=gen) * 0.01
    idx = torch.randint(0, numel, (max(1, numel // 50),), generator=gen)
    x[idx] = torch.randn(idx.numel(), generator=gen) * 1e4  # outliers four to six orders above the rest
    return x


def codec_bounds(g: Group, numel: int) -> dict[str, Any]:
    """Compressed all_reduce / all_gather against the documented bounds, and exact wire bytes."""
    n, rank = g.size, g.rank
    report: dict[str, Any] = {}
    for name in ("int8", "int4", "fp8", "int8o"):
        codec = get_codec(name, block=64)
        per_block = 9 if name == "int8o" else 4  # float32 scale (+ float32 outlier and its byte index)
        for kind in ("random", "zeros", "constant", "outliers"):
            for dtype in (torch.float32, torch.bfloat16):
                inputs = [_inputs(kind, r, numel).to(dtype) for r in range(n)]
                exact = torch.stack([x.to(torch.float64) for x in inputs]).sum(0)
                for op in ("sum", "avg"):
                    t = inputs[rank].clone()
                    before = g.stats.get("all_reduce", name).wire_bytes
                    g.all_reduce(t, op=op, codec=codec)
                    wire = g.stats.get("all_reduce", name).wire_bytes - before
                    want = exact / n if op == "avg" else exact
                    bound = error_bound_all_reduce(inputs, codec, n, op=op, out_dtype=dtype)
                    err = (t.to(torch.float64) - want).abs()
                    padded = -(-numel // (64 * n)) * 64 * n
                    report[f"all_reduce/{name}/{kind}/{str(dtype)[6:]}/{op}"] = {
                        "max_err": float(err.max()), "violations": int((err > bound).sum()),
                        "wire": wire, "expected_wire": padded * codec.bits // 8 + padded // 64 * per_block,
                        "exact_zero": bool(kind != "zeros" or float(err.max()) == 0.0),
                    }
                # Many pipeline segments (the default segment is larger than these test tensors).
                t = inputs[rank].clone()
                compressed_all_reduce(g.comm, t, codec, "sum", segment_elems=64 * n)
                err = (t.to(torch.float64) - exact).abs()
                bound = error_bound_all_reduce(inputs, codec, n, out_dtype=dtype)
                report[f"all_reduce/{name}/{kind}/{str(dtype)[6:]}/pipelined"] = {
                    "max_err": float(err.max()), "violations": int((err > bound).sum()), "result": t.tolist()[:50]}
                gathered = g.all_gather(inputs[rank].clone(), codec=codec)
                blockmax = [torch.nn.functional.pad(x.to(torch.float64), (0, -numel % 64)).view(-1, 64).abs()
                            .amax(1).repeat_interleave(64)[:numel] for x in inputs]
                gbound = torch.cat([codec.unit_error * m * (1 + (2.0**-8 if dtype == torch.bfloat16 else 0))
                                    + x.to(torch.float64).abs() * (2.0**-8 if dtype == torch.bfloat16 else 0)
                                    for m, x in zip(blockmax, inputs, strict=True)])
                gerr = (gathered.to(torch.float64) - torch.cat([x.to(torch.float64) for x in inputs])).abs()
                report[f"all_gather/{name}/{kind}/{str(dtype)[6:]}"] = {
                    "max_err": float(gerr.max()), "violations": int((gerr > gbound).sum())}
    return report


def codec_routes(g: Group) -> dict[str, Any]:
    """The compressed collectives through the group's engine against the Gloo route, bit for bit, on a tensor
    whose encoded parts span several NIXL slots (so pieces, the write-ahead window and credit all happen)."""
    out: dict[str, Any] = {}
    numel = 64 * 12_000 + 7  # int8: ~200 KiB per rank's part on four ranks, ~800 KiB in all on two
    x = _data(g.rank, (numel,), torch.float32, seed=11) * (1 + 1e3 * (torch.arange(numel) % 997 == 0))
    for name in ("int8", "fp8", "int8o"):
        codec = get_codec(name, block=64)
        routed = x.clone()
        g.all_reduce(routed, codec=codec)
        gathered = g.all_gather(x[:200_000].clone(), codec=codec)
        twin = _torch_twin(g)
        gloo = x.clone()
        twin.all_reduce(gloo, codec=codec)
        gloo_gathered = twin.all_gather(x[:200_000].clone(), codec=codec)
        out[name] = {"all_reduce_equal": bool(torch.equal(routed, gloo)),
                     "all_gather_equal": bool(torch.equal(gathered, gloo_gathered)),
                     "checksum": float(routed.double().sum())}
    return out


def notify_suite(rank: int) -> dict[str, Any]:
    g = init(timeout_s=60, engine="nixl")
    try:
        return {"notify": notify_without_blocking(g), "transport": g.transport}
    finally:
        g.destroy()


def notify_without_blocking(g: Group) -> dict[str, Any]:
    """A write's notification goes out from the writer's next put or take even when that call does not block.

    Rank 1 writes M1 and M2 to rank 0, then waits for rank 0's write A. Rank 0 takes M1 (blocking), writes A
    (60 KB, so that it is still in flight when ``put`` returns), progresses UCX for at least 50 ms without
    checking its own writes (``_poll``: notifications only) and until M2 is there, takes M2, and then waits on
    Gloo, making no NIXL call. Only that take can have sent A's notification; without it rank 1 times out. A
    round whose preconditions fail (A already complete when posted, or the take of M2 blocked) is retried."""
    e = _nixl(g)
    assert g.size == 2
    result: dict[str, Any] = {"rounds": 0, "received": [], "blocked": []}
    saved, e.timeout_s = e.timeout_s, 8.0
    flag = torch.zeros(1)
    try:
        for _ in range(5):
            result["rounds"] += 1
            if g.rank == 1:
                for _m in range(2):
                    e.put(0, torch.full((64,), 7, dtype=torch.uint8), "notify")
                try:
                    e.take(0, "notify")
                    e.release(0)
                    flag.fill_(1.0)
                except TransferError:
                    flag.fill_(0.0)
                dist.send(flag, 0, group=g.pg)
                dist.recv(flag, 0, group=g.pg)  # 1: rank 0's take blocked, so try again
            else:
                e.take(1, "notify")
                e.release(1)
                e.put(1, torch.full((60_000,), 9, dtype=torch.uint8), "notify")
                in_flight = bool(e._inflight)
                start = time.monotonic()
                while time.monotonic() < start + 5.0 and (
                        e._taken[1] not in e._arrived[1] or time.monotonic() < start + 0.05):  # M2, and A done
                    e._poll()
                    time.sleep(0.005)
                before = e.wait_s
                e.take(1, "notify")
                e.release(1)
                blocked = e.wait_s != before or not in_flight
                dist.recv(flag, 1, group=g.pg)
                result["received"].append(bool(flag.item()))
                result["blocked"].append(blocked)
                flag.fill_(1.0 if blocked else 0.0)
                dist.send(flag, 1, group=g.pg)
            if not flag.item():
                break
        e.finish("notify")
    finally:
        e.timeout_s = saved
    return result


def arrivals(g: Group) -> dict[str, Any]:
    """Lateness from call start times: rank r enters an all_reduce r * 60 ms late; clocks that differ or
    call sequences that differ give None."""
    import tempfile

    from tensorfabric.transfer.arrivals import lateness

    g.barrier()
    g.stats.reset()
    g.stats.track_calls()
    time.sleep(0.06 * g.rank)
    g.all_reduce(torch.ones(8))
    g.barrier()
    late = lateness(g)
    with tempfile.TemporaryDirectory() as tmp:
        boot = Path(tmp) / "boot_id"
        boot.write_text(f"boot-{g.rank}\n")
        other_clock = lateness(g, boot_id=boot)
    if g.rank == 0:
        g.stats.record("all_reduce", "none", 32, 32, 0.0)  # one more call on one rank only
    uneven = lateness(g)
    g.stats.track_calls(False)
    return {"late": late, "other_clock": other_clock, "uneven": uneven}


def bucketing(g: Group) -> dict[str, Any]:
    rank = g.rank
    shapes = [(3,), (2, 5), (), (7, 1, 2), (1,), (130,)]
    tensors = [torch.full(s, float(rank + i)) for i, s in enumerate(shapes)]
    tensors += [torch.full((4,), rank + 1, dtype=torch.int64), torch.full((2, 2), float(rank), dtype=torch.bfloat16)]
    before = [t.data_ptr() for t in tensors]
    out = g.all_reduce_coalesced(tensors, bucket_bytes=64)
    n = g.size
    ok = [bool(torch.equal(t, torch.full(t.shape, float(sum(r + i for r in range(n))), dtype=t.dtype)))
          for i, t in enumerate(out[:len(shapes)])]
    ok.append(bool(torch.equal(out[-2], torch.full((4,), sum(r + 1 for r in range(n)), dtype=torch.int64))))
    ok.append(bool(torch.equal(out[-1], torch.full((2, 2), float(sum(range(n))), dtype=torch.bfloat16))))
    same_storage = [t.data_ptr() == p for t, p in zip(out, before, strict=True)]
    return {"ok": ok, "same_storage": same_storage, "shapes": [tuple(t.shape) for t in out]}


def killed_peer(rank: int, timeout_s: float, engine: str = "torch", numel: int = 2_000_000) -> Any:
    """Rank 1 dies in the middle of an all_reduce; the others must raise TransferError."""
    g = init(timeout_s=timeout_s, engine=engine)
    g.all_reduce(torch.ones(4))
    if rank == 1:
        g.all_reduce(torch.ones(2_000_000), async_op=True)
        time.sleep(0.05)
        os._exit(17)
    t0 = time.monotonic()
    try:
        for _ in range(3):
            g.all_reduce(torch.ones(numel))
    except TransferError as exc:
        return {"error": str(exc), "op": exc.op, "group": exc.group, "peer": exc.peer,
                "seconds": time.monotonic() - t0}
    return {"error": None}


def stalled_peer(rank: int, timeout_s: float, engine: str = "torch") -> Any:
    """Rank 1 never joins the collective; rank 0 must raise TransferError after about timeout_s."""
    g = init(timeout_s=timeout_s, engine=engine)
    if rank == 1:
        time.sleep(timeout_s * 2)
        return None
    t0 = time.monotonic()
    try:
        g.all_reduce(torch.ones(16))
    except TransferError as exc:
        return {"op": exc.op, "group": exc.group, "peer": exc.peer, "seconds": time.monotonic() - t0,
                "error": str(exc)}
    return {"error": None}


def missing_peer(rank: int, timeout_s: float) -> Any:
    """Rank 1 never joins the rendezvous; rank 0's init must fail with TransferError after about timeout_s."""
    if rank == 1:
        time.sleep(timeout_s + 2)
        return None
    t0 = time.monotonic()
    try:
        init(timeout_s=timeout_s)
    except TransferError as exc:
        return {"op": exc.op, "group": exc.group, "seconds": time.monotonic() - t0, "error": str(exc)}
    return {"error": None}


def inline_suite(rank: int) -> dict[str, Any]:
    """The compressed all_reduce sends its bytes inside NIXL notifications and leaves its engine *unsettled*;
    every torch.distributed call through a Group settles it first (nixl_engine docstring). Each round: an
    int8 all_reduce of SmolLM2's prefill size (pieces of ~52 KB, the size UCX's TCP buffers), a rank-skewed
    pause (compute), then a decode-sized NIXL all_reduce (WRITEs) and a Gloo one (too big for NIXL)."""
    from tensorfabric.transfer.engines import nixl_engine

    g = init(timeout_s=30, engine="nixl")
    e = _nixl(g)
    codec = get_codec("int8")
    out: dict[str, Any] = {"transport": g.transport, "unsettled_after": [], "settled_after_gloo": [],
                           "credit_whole": [], "sums": []}
    try:
        for r in range(12):
            x = _data(rank, (256 * 576,), torch.float32, seed=r)
            g.all_reduce(x, codec=codec)
            out["unsettled_after"].append(e in nixl_engine._UNSETTLED)
            out["sums"].append(float(x.double().sum()))
            time.sleep(0.004 * ((rank + r) % g.size))
            small = torch.full((8,), float(rank))
            g.all_reduce(small)  # through NIXL WRITEs: carries our credit, settles nothing
            big = torch.ones(NIXL_MAX_BYTES // 4 + 16)
            g.all_reduce(big)  # through Gloo: settles first
            out["settled_after_gloo"].append(e not in nixl_engine._UNSETTLED and float(big[0]) == g.size
                                             and float(small[0]) == sum(range(g.size)))
            out["credit_whole"].append(all(e._credit[p] >= e._inline_upto[p] and e._acked[p] == e._taken[p]
                                           for p in range(g.size) if p != rank))
    finally:
        g.destroy()
    return out
