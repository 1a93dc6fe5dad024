"""Collectives over a :class:`~tensorfabric.transfer.nixl_engine.NixlEngine`, for tensors of one slot or less.

Algorithms (latency-bound sizes, so the fewest dependent message rounds wins):

* all_reduce: two ranks exchange once; a power-of-two group runs recursive doubling (log2 n rounds, partner
  ``rank ^ 2**k``); any other size sends every input to every rank and sums in rank order (one round). Every
  rank combines the same operands in the same grouping, so all ranks hold the same bits.
* all_gather, broadcast, send/recv: direct writes (one round).

Summation: float32/float64/integers sum in their own type; bfloat16/float16 accumulate in float32 and round
once at the end. For two ranks this is Gloo's result bit for bit (``x0 + x1`` is computed in float32 and
rounded once there too); for more ranks float sums can differ from Gloo's ring in the last place, because
the ring groups the additions differently (integer-valued data is equal exactly whatever the order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.nixl_engine import NixlEngine

__all__ = ["REDUCE_OPS", "all_gather", "all_reduce", "broadcast", "recv", "routable", "send"]

REDUCE_OPS = ("sum", "max", "min", "product")


def routable(engine: NixlEngine | None, t: torch.Tensor, nbytes: int) -> bool:
    """Whether one message of ``nbytes`` from ``t`` can go through ``engine`` (same answer on every rank for
    the same shapes: the decision must never depend on anything a peer cannot see)."""
    import torch

    return (engine is not None and 0 < nbytes <= engine.max_bytes and t.device.type == "cpu"
            and t.dtype != torch.bool and not t.is_complex())


def _acc_dtype(dtype: torch.dtype) -> torch.dtype:
    import torch

    return torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype


def _combine(acc: torch.Tensor, other: torch.Tensor, op: str) -> torch.Tensor:
    import torch

    other = other.to(acc.dtype)
    if op == "sum":
        return acc.add_(other)
    if op == "max":
        return torch.maximum(acc, other, out=acc)
    if op == "min":
        return torch.minimum(acc, other, out=acc)
    return acc.mul_(other)


def _as(raw: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return raw.view(dtype)


def all_reduce(engine: NixlEngine, t: torch.Tensor, op: str) -> None:
    """Reduce ``t`` (contiguous) across the group in place."""
    n, r = engine.size, engine.rank
    flat = t.view(-1)
    acc_dtype = _acc_dtype(t.dtype)
    if n & (n - 1) == 0:
        acc: Any = None
        mask = 1
        while mask < n:
            partner = r ^ mask
            payload = flat if acc is None else acc
            engine.put(partner, payload, "all_reduce")
            got = _as(engine.take(partner, "all_reduce"), payload.dtype)
            if acc is None:
                acc = flat.to(acc_dtype, copy=True)
            _combine(acc, got, op)
            engine.release(partner)
            mask <<= 1
    else:
        for p in range(n):
            if p != r:
                engine.put(p, flat, "all_reduce")
        parts = [flat if p == r else _as(engine.take(p, "all_reduce"), t.dtype) for p in range(n)]
        acc = parts[0].to(acc_dtype, copy=True)
        for part in parts[1:]:
            _combine(acc, part, op)
        for p in range(n):
            if p != r:
                engine.release(p)
    flat.copy_(acc)
    engine.finish("all_reduce")


def all_gather(engine: NixlEngine, src: torch.Tensor, out: torch.Tensor) -> None:
    """``out`` (``size`` times ``src``, contiguous) gets every rank's ``src`` in group-rank order."""
    import torch

    n, r = engine.size, engine.rank
    mine = src.reshape(-1).view(torch.uint8)
    chunks = out.view(-1).view(torch.uint8).view(n, -1)
    for p in range(n):
        if p != r:
            engine.put(p, src, "all_gather")
    chunks[r].copy_(mine)
    for p in range(n):
        if p != r:
            chunks[p].copy_(engine.take(p, "all_gather"))
            engine.release(p)
    engine.finish("all_gather")


def broadcast(engine: NixlEngine, t: torch.Tensor, root: int) -> None:
    import torch

    if engine.rank == root:
        for p in range(engine.size):
            if p != root:
                engine.put(p, t, "broadcast")
    else:
        t.view(-1).view(torch.uint8).copy_(engine.take(root, "broadcast"))
        engine.release(root)
    engine.finish("broadcast")


def send(engine: NixlEngine, t: torch.Tensor, peer: int, op: str = "send") -> None:
    engine.put(peer, t, op)
    engine.finish(op)


def recv(engine: NixlEngine, t: torch.Tensor, peer: int, op: str = "recv") -> None:
    import torch

    t.view(-1).view(torch.uint8).copy_(engine.take(peer, op))
    engine.release(peer)
