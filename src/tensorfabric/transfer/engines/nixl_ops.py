"""Collectives over a :class:`~tensorfabric.transfer.engines.nixl_engine.NixlEngine`, for tensors of one slot or less.

Algorithms (latency-bound sizes, so the fewest dependent message rounds wins): every collective is one round
of direct writes. all_reduce sends the whole input to every peer and each rank reduces locally **in Gloo's
ring order**, so the result is torch.distributed's bit for bit, float32 and bfloat16 included:

Gloo's ring (torch's only CPU all-reduce) cuts the buffer into ``2n`` segments of ``ceil(numel / 2n)``
elements; rank ``s`` owns segments ``2s`` and ``2s+1`` and the partial sum travels down the ring, so chunk
``s`` is ``((x[s-1] + x[s-2]) + ...) + x[s]`` (indices mod n), each addition rounded in the tensor's dtype
(a bfloat16 sum rounds at every step, as Gloo's does). Found by matching Gloo's output element by element on
3 and 4 ranks for sizes 1 .. 300001 in float32 and bfloat16 (tests/transfer keep checking it). Two ranks need
no order at all: ``x0 + x1`` is commutative.

One round of ``n - 1`` messages beats recursive doubling's ``log2 n`` dependent rounds at the sizes routed
here (at most one slot, ``NIXL_MAX_BYTES``) and group sizes of TP/PP groups; it moves ``n - 1`` copies of the
input per rank, which is why large tensors stay on Gloo's bandwidth-optimal ring.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    import torch

    from tensorfabric.transfer.engines.nixl_engine import NixlEngine
    from tensorfabric.transfer.records import SendRecv

__all__ = ["REDUCE_OPS", "all_gather", "all_reduce", "batch", "broadcast", "recv", "ring_order_reduce", "routable",
           "send"]

REDUCE_OPS = ("sum", "max", "min", "product")


def routable(engine: NixlEngine | None, t: torch.Tensor, nbytes: int) -> bool:
    """Whether one message of ``nbytes`` from ``t`` can go through ``engine`` (same answer on every rank for
    the same shapes: the decision must never depend on anything a peer cannot see)."""
    import torch

    return (engine is not None and 0 < nbytes <= engine.max_bytes and t.device.type == "cpu"
            and t.dtype != torch.bool and not t.is_complex())


def _combine(acc: torch.Tensor, other: torch.Tensor, op: str) -> None:
    import torch

    if op == "sum":
        acc.add_(other)
    elif op == "max":
        torch.maximum(acc, other, out=acc)
    elif op == "min":
        torch.minimum(acc, other, out=acc)
    else:
        acc.mul_(other)


def ring_order_reduce(parts: list[torch.Tensor], out: torch.Tensor, op: str) -> None:
    """``out`` = the reduction of ``parts`` (one flat tensor per rank) grouped as Gloo's ring groups it."""
    n = len(parts)
    numel = out.numel()
    if n == 2:
        out.copy_(parts[1])
        _combine(out, parts[0], op)
        return
    seg = -(-numel // (2 * n))
    for s in range(n):
        lo, hi = min(numel, 2 * s * seg), min(numel, 2 * (s + 1) * seg)
        if lo >= hi:
            break
        acc = out[lo:hi]
        acc.copy_(parts[(s - 1) % n][lo:hi])
        for j in range(2, n + 1):
            _combine(acc, parts[(s - j) % n][lo:hi], op)


def all_reduce(engine: NixlEngine, t: torch.Tensor, op: str) -> None:
    """Reduce ``t`` (contiguous) across the group in place."""
    n, r = engine.size, engine.rank
    flat = t.view(-1)
    for p in range(n):
        if p != r:
            engine.put(p, flat, "all_reduce")
    if n == 2:
        # x0 + x1 commutes: add the peer's tensor into ours, no copy of our own.
        _combine(flat, engine.take(1 - r, "all_reduce").view(t.dtype), op)
        engine.release(1 - r)
        engine.finish("all_reduce")
        return
    mine = flat.clone()
    parts = [mine if p == r else engine.take(p, "all_reduce").view(t.dtype) for p in range(n)]
    ring_order_reduce(parts, flat, op)
    for p in range(n):
        if p != r:
            engine.release(p)
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


def batch(engine: NixlEngine, items: Sequence[SendRecv]) -> None:
    """The routed items of one ``batch_send_recv``."""
    # Every send first: a send only waits for credit, which a peer blocked on our data has already returned.
    for item in items:
        if item.kind == "send":
            engine.put(item.peer, item.tensor, "batch_send_recv")
    for item in items:
        if item.kind == "recv":
            recv(engine, item.tensor, item.peer, "batch_send_recv")
    engine.finish("batch_send_recv")
