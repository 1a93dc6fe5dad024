"""Process groups and collectives: the runtime every other part moves tensors with.

Lifecycle: ``group = init()`` (one per process, from torchrun's env:// variables) → ``group.mesh(...)`` for TP/PP
subgroups → collectives → ``group.destroy()``. With WORLD_SIZE 1 (or unset) no process group is created and
every collective is the identity, so single-process code paths need no special case.

Rank table (``Group.table``), e.g. for a world of 4 ranks on 2 hosts split by ``mesh((2, 2))`` into TP groups::

    global rank  local rank  host   rank in tp group   tp group
    0            0           h1     0                  tp0 = {0, 1}
    1            1           h1     1                  tp0
    2            0           h2     0                  tp1 = {2, 3}
    3            1           h2     1                  tp1

``dst``/``src``/``peer`` arguments are ranks **in the group** (0 .. size-1), never global ranks;
``group.ranks[i]`` maps group rank ``i`` to its global rank.

Every collective takes ``async_op``: False returns the result, True a :class:`Handle` whose ``wait()``
returns it. Every call is recorded in ``group.stats`` (see :mod:`tensorfabric.transfer.stats`). A dead or
stalled peer raises :class:`~tensorfabric.errors.TransferError` naming the op, the group and the suspected
peer within the group's ``timeout_s``.

Environment: :func:`init` reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT from ``environ`` (default
``os.environ``, the one place the transfer subsystem reads it).
"""

from __future__ import annotations

import datetime
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError, TransferError
from tensorfabric.transfer import nccl, nixl_ops, nixl_setup
from tensorfabric.transfer.failures import to_transfer_error
from tensorfabric.transfer.nixl_engine import settle_all
from tensorfabric.transfer.records import Handle, RankEntry, SendRecv, ravel, unravel
from tensorfabric.transfer.stats import GroupStats

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.codecs import BlockCodec
    from tensorfabric.transfer.nixl_engine import NixlEngine

__all__ = ["BACKENDS", "ENGINES", "NIXL_MAX_BYTES", "REDUCE_OPS", "Group", "Handle", "RankEntry", "SendRecv", "init"]

BACKENDS = ("auto", "gloo", "nccl")
ENGINES = nixl_setup.ENGINES
NIXL_MAX_BYTES = 64 * 2**10
"""Messages up to this size go through the NIXL engine (when it is on), larger ones through torch.distributed.
Measured on two local ranks with benchmarks/small_message_latency.py (docs/transfer.md): NIXL's all_reduce
median beat Gloo's in every run up to 64 KiB (9.1x quiet; 1.8-4.8x at load 6). Above it the answer depends
on the machine: quiet, NIXL still won 7.1x at 128 KiB and 2.1x at 1 MiB; at load 6 it was mixed at 128-256 KiB
and lost every run at 1 MiB (0.3-0.7x: NIXL sends the whole tensor to each peer and copies it twice more,
Gloo's ring halves it). 64 KiB is where it won everywhere; ``init(nixl_max_bytes=...)`` raises it on a
dedicated host. It is also the per-peer slot size, so the receive region costs ``slots x 64 KiB`` per peer."""
REDUCE_OPS = ("sum", "avg", "max", "min", "product")
PAIR_SUM_BYTES = 64 * 2**10
"""Two-rank Gloo sums up to this size run as one all_gather plus a local add instead of Gloo's ring (a
reduce-scatter then an all-gather: two dependent message rounds). Small tensors are latency-bound, so one
round halves them: a 1 KiB decode all-reduce over the lab's 1 Gbit link takes 1.1 ms instead of 2.1-2.7 ms
(mean), and at 256 KiB the two are even (see docs/transfer.md). ``x0 + x1`` is the ring's sum bit for bit."""


_REDUCE_TABLE: dict[str, Any] = {}


def _reduce_op(op: str) -> Any:
    # Built once: looking up five pybind enum members costs microseconds, on every collective otherwise.
    if not _REDUCE_TABLE:
        import torch.distributed as dist

        _REDUCE_TABLE.update(sum=dist.ReduceOp.SUM, avg=dist.ReduceOp.AVG, max=dist.ReduceOp.MAX,
                             min=dist.ReduceOp.MIN, product=dist.ReduceOp.PRODUCT)
    rop = _REDUCE_TABLE.get(op)
    if rop is None:
        raise InputError(f"reduce op: {op!r} is not one of {', '.join(REDUCE_OPS)}")
    return rop


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Group:
    """A set of ranks that run collectives together (see the module docstring for the rank table)."""

    def __init__(self, *, name: str, backend: str, transport: str, pg: Any, table: Sequence[RankEntry],
                 global_rank: int, timeout_s: float, nixl: NixlEngine | None = None) -> None:
        self.name = name
        self.backend = backend
        self.transport = transport
        self.pg = pg
        self.table = tuple(table)
        self.ranks = tuple(e.global_rank for e in self.table)
        self.size = len(self.table)
        self.global_rank = global_rank
        self.rank = self.ranks.index(global_rank)
        self.timeout_s = timeout_s
        self.stats = GroupStats()
        self._host = self.table[self.rank].host
        self.nixl = nixl
        """The NIXL engine small tensors take (see NIXL_MAX_BYTES), or None: everything through torch."""

    @property
    def engine(self) -> str:
        """``nixl`` when small tensors go through NIXL, else ``torch``."""
        return "torch" if self.nixl is None else "nixl"

    def __repr__(self) -> str:
        return (f"Group(name={self.name!r}, rank={self.rank}, size={self.size}, backend={self.backend!r}, "
                f"engine={self.engine!r}, transport={self.transport!r})")

    # -- plumbing ------------------------------------------------------------------------------------------
    def _error(self, exc: BaseException, op: str, peer: int | None = None) -> TransferError:
        hint = self.ranks[peer] if peer is not None and 0 <= peer < self.size else None
        return to_transfer_error(exc, op=op, group=self.name, table=self.table, me=self.global_rank,
                                 host=self._host, timeout_s=self.timeout_s, hint=hint)

    def _run(self, op: str, nbytes: int, start: Callable[[], Any], result: Callable[[], Any], async_op: bool,
             peer: int | None = None) -> Any:
        """Start a torch.distributed call, then either wait now or hand back a Handle; record either way."""
        settle_all(op)  # a peer may still need this process to progress a NIXL engine (nixl_engine docstring)
        t0 = time.perf_counter()
        try:
            work = start()
        except RuntimeError as exc:
            raise self._error(exc, op, peer) from exc
        works = work if isinstance(work, list) else [work]

        def finish() -> Any:
            try:
                for w in works:
                    w.wait()
            except RuntimeError as exc:
                raise self._error(exc, op, peer) from exc
            self.stats.record(op, "none", nbytes, nbytes, time.perf_counter() - t0)
            return result()

        if async_op:
            return Handle(works, finish)
        return finish()

    def _done(self, op: str, nbytes: int, value: Any, async_op: bool, codec: str = "none",
              wire: int | None = None, t0: float | None = None) -> Any:
        """Record a call that completed synchronously (identity or codec path) and shape its return."""
        seconds = time.perf_counter() - t0 if t0 is not None else 0.0
        self.stats.record(op, codec, nbytes, nbytes if wire is None else wire, seconds)
        return Handle([], lambda: value) if async_op else value

    def _via_nixl(self, op: str, nbytes: int, call: Callable[[NixlEngine], None], value: Any,
                  async_op: bool) -> Any:
        """Run a NIXL collective now (they complete synchronously) and record its time and its waiting."""
        engine = self.nixl
        assert engine is not None
        t0 = time.perf_counter()
        waited = engine.wait_s
        call(engine)
        self.stats.record(op, "none", nbytes, nbytes, time.perf_counter() - t0)
        self.stats.record_wait(op, engine.wait_s - waited)
        return Handle([], lambda: value) if async_op else value

    def _check_peer(self, peer: int, what: str) -> int:
        if isinstance(peer, bool) or not isinstance(peer, int) or not 0 <= peer < self.size or peer == self.rank:
            raise InputError(f"{what}: {peer!r} must be a rank in group {self.name!r} other than this one "
                             f"(0..{self.size - 1}, this rank is {self.rank})")
        return self.ranks[peer]

    def _split(self, t: torch.Tensor, what: str) -> None:
        if t.dim() == 0 or t.shape[0] % self.size:
            raise InputError(f"{what}: first dimension {tuple(t.shape)} must be divisible by the group size "
                             f"{self.size}")

    # -- collectives ---------------------------------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, op: str = "sum", codec: BlockCodec | None = None,
                   async_op: bool = False) -> Any:
        """Reduce ``t`` across the group in place and return it. With ``codec`` (sum/avg only) the
        compressed algorithm of :mod:`tensorfabric.transfer.compressed` runs instead (synchronously)."""
        import torch.distributed as dist

        rop = _reduce_op(op)
        if codec is not None and codec.name != "none":
            from tensorfabric.transfer.compressed import compressed_all_reduce

            t0 = time.perf_counter()
            wire = compressed_all_reduce(self, t, codec, op)
            return self._done("all_reduce", _nbytes(t), t, async_op, codec.name, wire, t0)
        if self.pg is None:
            return self._done("all_reduce", _nbytes(t), t, async_op)
        if op in nixl_ops.REDUCE_OPS and t.is_contiguous() and nixl_ops.routable(self.nixl, t, _nbytes(t)):
            return self._via_nixl("all_reduce", _nbytes(t), lambda e: nixl_ops.all_reduce(e, t, op), t, async_op)
        if self._use_pair_sum(t, op):
            return self._gather_sum(t, async_op)
        return self._run("all_reduce", _nbytes(t), lambda: dist.all_reduce(t, rop, self.pg, async_op=True),
                         lambda: t, async_op)

    def _use_pair_sum(self, t: torch.Tensor, op: str) -> bool:
        """Whether ``all_reduce`` takes the PAIR_SUM_BYTES path (see there)."""
        import torch

        return (self.size == 2 and op == "sum" and self.backend == "gloo" and _nbytes(t) <= PAIR_SUM_BYTES
                and t.is_contiguous() and t.dtype != torch.bool and not t.is_complex())

    def _gather_sum(self, t: torch.Tensor, async_op: bool) -> Any:
        """``t = x0 + x1`` from one all_gather; the same order on both ranks, so both hold the same bits."""
        import torch
        import torch.distributed as dist

        flat = t.view(-1)
        n = flat.numel()
        both = torch.empty(2 * n, dtype=t.dtype, device=t.device)

        def total() -> torch.Tensor:
            torch.add(both[:n], both[n:], out=flat)
            return t

        return self._run("all_reduce", _nbytes(t), lambda: dist.all_gather_single(both, flat, self.pg, async_op=True),
                         total, async_op)

    def all_gather(self, t: torch.Tensor, codec: BlockCodec | None = None, async_op: bool = False) -> Any:
        """Concatenate every rank's ``t`` along dim 0 in group-rank order (a 0-d ``t`` counts as shape (1,))."""
        import torch
        import torch.distributed as dist

        src = t.reshape(1) if t.dim() == 0 else t.contiguous()
        if codec is not None and codec.name != "none":
            from tensorfabric.transfer.compressed import compressed_all_gather

            t0 = time.perf_counter()
            out, wire = compressed_all_gather(self, src, codec)
            return self._done("all_gather", _nbytes(out), out, async_op, codec.name, wire, t0)
        out = torch.empty((self.size * src.shape[0], *src.shape[1:]), dtype=src.dtype, device=src.device)
        if self.pg is None:
            out.copy_(src)
            return self._done("all_gather", _nbytes(out), out, async_op)
        if nixl_ops.routable(self.nixl, src, _nbytes(src)):
            return self._via_nixl("all_gather", _nbytes(out), lambda e: nixl_ops.all_gather(e, src, out), out,
                                  async_op)
        return self._run("all_gather", _nbytes(out),
                         lambda: dist.all_gather_single(out, src, self.pg, async_op=True), lambda: out, async_op)

    def reduce_scatter(self, t: torch.Tensor, op: str = "sum", async_op: bool = False) -> Any:
        """Reduce ``t`` (first dim divisible by the group size) and return this rank's slice of the result."""
        import torch
        import torch.distributed as dist

        rop = _reduce_op(op)
        self._split(t, "reduce_scatter input")
        src = t.contiguous()
        out = torch.empty((src.shape[0] // self.size, *src.shape[1:]), dtype=src.dtype, device=src.device)
        if self.pg is None:
            out.copy_(src)
            return self._done("reduce_scatter", _nbytes(src), out, async_op)
        return self._run("reduce_scatter", _nbytes(src),
                         lambda: dist.reduce_scatter_single(out, src, rop, self.pg, async_op=True),
                         lambda: out, async_op)

    def broadcast(self, t: torch.Tensor, src: int = 0, async_op: bool = False) -> Any:
        """Copy group rank ``src``'s ``t`` into every rank's ``t`` (in place)."""
        import torch.distributed as dist

        if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < self.size:
            raise InputError(f"broadcast src: {src!r} must be a rank in group {self.name!r} (0..{self.size - 1})")
        if self.pg is None:
            return self._done("broadcast", _nbytes(t), t, async_op)
        if t.is_contiguous() and nixl_ops.routable(self.nixl, t, _nbytes(t)):
            return self._via_nixl("broadcast", _nbytes(t), lambda e: nixl_ops.broadcast(e, t, src), t, async_op)
        root = self.ranks[src]
        return self._run("broadcast", _nbytes(t), lambda: dist.broadcast(t, root, self.pg, async_op=True),
                         lambda: t, async_op, peer=src if src != self.rank else None)

    def all_to_all(self, t: torch.Tensor, async_op: bool = False) -> Any:
        """Split ``t`` into ``size`` chunks along dim 0; chunk j goes to rank j. Returns the received chunks
        concatenated in source-rank order."""
        import torch
        import torch.distributed as dist

        self._split(t, "all_to_all input")
        src = t.contiguous()
        out = torch.empty_like(src)
        if self.pg is None:
            out.copy_(src)
            return self._done("all_to_all", _nbytes(src), out, async_op)
        return self._run("all_to_all", _nbytes(src),
                         lambda: dist.all_to_all_single(out, src, group=self.pg, async_op=True), lambda: out,
                         async_op)

    def send(self, t: torch.Tensor, dst: int, async_op: bool = False) -> Any:
        import torch.distributed as dist

        peer = self._check_peer(dst, "send dst")
        if nixl_ops.routable(self.nixl, t, _nbytes(t)):
            src = t.contiguous()
            return self._via_nixl("send", _nbytes(t), lambda e: nixl_ops.send(e, src, dst), None, async_op)
        return self._run("send", _nbytes(t), lambda: dist.isend(t.contiguous(), peer, self.pg), lambda: None,
                         async_op, peer=dst)

    def recv(self, t: torch.Tensor, src: int, async_op: bool = False) -> Any:
        """Receive into ``t`` (contiguous) from group rank ``src``; returns ``t``."""
        import torch.distributed as dist

        peer = self._check_peer(src, "recv src")
        if not t.is_contiguous():
            raise InputError(f"recv: the buffer of shape {tuple(t.shape)} must be contiguous (use .contiguous())")
        if nixl_ops.routable(self.nixl, t, _nbytes(t)):
            return self._via_nixl("recv", _nbytes(t), lambda e: nixl_ops.recv(e, t, src), t, async_op)
        return self._run("recv", _nbytes(t), lambda: dist.irecv(t, peer, self.pg), lambda: t, async_op, peer=src)

    def batch_send_recv(self, ops: Sequence[SendRecv], async_op: bool = False) -> Any:
        """Post all sends and receives at once (``batch_isend_irecv``) so pairwise exchanges cannot deadlock."""
        import torch.distributed as dist

        if not ops:
            return self._done("batch_send_recv", 0, None, async_op)
        p2p, small = [], []
        for item in ops:
            fn = {"send": dist.isend, "recv": dist.irecv}.get(item.kind)
            if fn is None:
                raise InputError(f"batch_send_recv kind: {item.kind!r} is not one of send, recv")
            peer_global = self._check_peer(item.peer, f"{item.kind} peer")
            # Each item is routed by its own size, as its partner routes the matching item.
            if item.tensor.is_contiguous() and nixl_ops.routable(self.nixl, item.tensor, _nbytes(item.tensor)):
                small.append(item)
            else:
                p2p.append(dist.P2POp(fn, item.tensor, peer_global, self.pg))
        nbytes = sum(_nbytes(item.tensor) for item in ops)
        peer = ops[0].peer if len({o.peer for o in ops}) == 1 else None
        if not p2p:
            return self._via_nixl("batch_send_recv", nbytes, lambda e: nixl_ops.batch(e, small), None, async_op)
        handle = self._run("batch_send_recv", nbytes if not small else nbytes - sum(_nbytes(i.tensor) for i in small),
                           lambda: dist.batch_isend_irecv(p2p), lambda: None, True, peer=peer)
        if small:
            self._via_nixl("batch_send_recv", sum(_nbytes(i.tensor) for i in small),
                           lambda e: nixl_ops.batch(e, small), None, False)
        return handle if async_op else handle.wait()

    def barrier(self) -> None:
        import torch.distributed as dist

        if self.pg is None:
            return
        self._run("barrier", 0, lambda: dist.barrier(self.pg, async_op=True), lambda: None, False)

    def all_reduce_coalesced(self, tensors: Sequence[torch.Tensor], op: str = "sum",
                             codec: BlockCodec | None = None, bucket_bytes: int = 25 * 2**20) -> list[torch.Tensor]:
        """All-reduce many tensors through flat buckets; each input is updated in place and returned."""
        from tensorfabric.transfer.bucket import buckets

        for bucket in buckets(tensors, bucket_bytes):
            self.all_reduce(bucket.flat, op=op, codec=codec)
            bucket.copy_back()
        return list(tensors)

    # -- structure -----------------------------------------------------------------------------------------
    def mesh(self, shape: Sequence[int] = (1, 1), names: Sequence[str] = ("pp", "tp")) -> dict[str, Group]:
        """Subgroups of a row-major mesh over this group's ranks: ``{name: the group along that axis that
        contains this rank}``. Group rank r sits at coordinates ``unravel(r, shape)``; with ``shape=(pp, tp)``
        ranks 0..tp-1 form the first TP group and ranks {0, tp, 2tp, ...} the first PP group. Every member of
        this group must call it with the same arguments."""
        import math

        shape = tuple(shape)
        names = tuple(names)
        if len(shape) != len(names) or len(set(names)) != len(names):
            raise InputError(f"mesh: shape {shape} and names {names} must have the same length, names unique")
        if any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape) or math.prod(shape) != self.size:
            raise InputError(f"mesh shape {shape}: positive sizes whose product is the group size {self.size}")
        coords = unravel(self.rank, shape)
        result: dict[str, Group] = {}
        for axis, name in enumerate(names):
            members = []
            for i in range(shape[axis]):
                c = list(coords)
                c[axis] = i
                members.append(ravel(c, shape))
            rest = [x for a, x in enumerate(coords) if a != axis]
            index = ravel(rest, [d for a, d in enumerate(shape) if a != axis])
            result[name] = self._subgroup(f"{self.name}.{name}{index}", members)
        return result

    def subgroup(self, name: str, group_ranks: Sequence[int]) -> Group:
        """The group of ``group_ranks`` (ranks of this group, ascending), named ``<this>.<name>``. Only its
        members call it: the two sides of a disaggregated run each build their own."""
        ranks = list(group_ranks)
        if not ranks or ranks != sorted(set(ranks)) or not 0 <= ranks[0] <= ranks[-1] < self.size \
                or self.rank not in ranks:
            raise InputError(f"subgroup ranks {ranks} must be ascending ranks of {self.name!r} including this one")
        return self._subgroup(f"{self.name}.{name}", ranks)

    def _subgroup(self, name: str, group_ranks: Sequence[int]) -> Group:
        import torch.distributed as dist

        entries = [self.table[r] for r in group_ranks]
        table = [RankEntry(e.global_rank, e.local_rank, i, e.host, e.pid) for i, e in enumerate(entries)]
        pg = None
        if self.pg is not None and len(table) > 1:
            settle_all("new_group")
            try:
                pg = dist.new_group([e.global_rank for e in table], timeout=datetime.timedelta(seconds=self.timeout_s),
                                    backend=self.backend, use_local_synchronization=True, group_desc=name)
            except RuntimeError as exc:
                raise self._error(exc, "new_group") from exc
        transport = self.transport if pg is not None else "local"
        engine = None
        if self.nixl is not None and pg is not None:
            me = [e.global_rank for e in table].index(self.global_rank)
            engine = nixl_setup.open_for_group(pg, table, me, name, self.timeout_s, self.nixl.max_bytes,
                                               self.nixl.log_path)
            transport = nixl_setup.transport_label(engine, self.transport.split("+")[-1], "any")
        return Group(name=name, backend=self.backend, transport=transport, pg=pg, table=table,
                     global_rank=self.global_rank, timeout_s=self.timeout_s, nixl=engine)

    def destroy(self) -> None:
        """Tear the process group down (the world group also ends torch.distributed)."""
        import torch.distributed as dist

        settle_all("destroy")
        if self.nixl is not None:
            self.nixl.close()
            self.nixl = None
        if self.pg is None or not dist.is_initialized():
            return
        if self.pg is dist.group.WORLD:
            dist.destroy_process_group()
        else:
            dist.destroy_process_group(self.pg)
        self.pg = None


def _int_env(environ: Mapping[str, str], key: str, default: int) -> int:
    raw = environ.get(key, "")
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InputError(f"environment {key}={raw!r} must be an integer such as 0") from None


def init(backend: str = "auto", *, timeout_s: float = 60.0, environ: Mapping[str, str] | None = None,
         nccl_env: Mapping[str, str] | None = None, require_transport: str = "warn", name: str = "world",
         engine: str = "auto", nixl_max_bytes: int = NIXL_MAX_BYTES) -> Group:
    """Create (or adopt) the world process group from torchrun's env:// variables.

    ``backend``: auto (nccl when CUDA is available, else gloo), gloo or nccl. ``timeout_s`` bounds rendezvous
    and every collective. ``nccl_env`` (from the host doctor) is applied before NCCL init without overwriting
    user settings; ``require_transport`` decides what a non-RDMA NCCL transport does: ``warn`` (log),
    ``rdma`` (raise TransferError) or ``any`` (accept silently). Gloo runs report ``gloo/tcp``; a world of one
    reports ``local`` and creates no process group.

    ``engine``: ``torch`` (every tensor through torch.distributed), ``nixl`` (CPU tensors up to
    ``nixl_max_bytes`` through the NIXL engine, larger ones through torch; InputError when NIXL is not
    installed) or ``auto`` (nixl when installed and the backend is gloo). With NIXL the transport reads
    ``nixl/<shm|tcp|rdma>(lanes UCX chose)+gloo/tcp`` and ``require_transport="rdma"`` refuses anything but
    RDMA lanes.
    """
    import torch
    import torch.distributed as dist

    env = os.environ if environ is None else environ
    if backend not in BACKENDS:
        raise InputError(f"backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    if require_transport not in nccl.TRANSPORT_CHECKS:
        raise InputError(f"require_transport: {require_transport!r} is not one of "
                         f"{', '.join(nccl.TRANSPORT_CHECKS)}")
    if not timeout_s > 0:
        raise InputError(f"timeout_s: {timeout_s!r} must be a positive number of seconds such as 60")
    chosen = backend if backend != "auto" else ("nccl" if torch.cuda.is_available() else "gloo")
    if engine not in ENGINES:
        raise InputError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")
    rank = _int_env(env, "RANK", 0)
    world = _int_env(env, "WORLD_SIZE", 1)
    local_rank = _int_env(env, "LOCAL_RANK", rank)
    host, pid = socket.gethostname(), os.getpid()
    if world <= 1 and not dist.is_initialized():
        table = [RankEntry(0, local_rank, 0, host, pid)]
        return Group(name=name, backend=chosen, transport="local", pg=None, table=table, global_rank=0,
                     timeout_s=timeout_s)
    use_nixl = nixl_setup.wanted(engine, chosen, world)  # before the rendezvous: bad input fails every rank at once
    capture = None
    if chosen == "nccl":
        # NCCL reads the real process environment, so the hook writes there whatever ``environ`` was read from.
        nccl.apply_env(nccl_env, os.environ)
        capture = nccl.capture_log(os.environ)
        torch.cuda.set_device(local_rank % max(torch.cuda.device_count(), 1))
    timeout = datetime.timedelta(seconds=timeout_s)
    if not dist.is_initialized():
        try:
            dist.init_process_group(chosen, init_method="env://", rank=rank, world_size=world, timeout=timeout)
        except (RuntimeError, ValueError) as exc:
            raise TransferError(f"rendezvous of {world} ranks failed within {timeout_s:g} s: {exc}",
                                op="init", group=name) from exc
    else:
        chosen = str(dist.get_backend())
    rank, world = dist.get_rank(), dist.get_world_size()
    infos: list[Any] = [None] * world
    try:
        dist.all_gather_object(infos, (host, local_rank, pid))
    except RuntimeError as exc:
        raise TransferError(f"exchanging the rank table failed: {exc}", op="init", group=name) from exc
    table = [RankEntry(r, int(lr), r, str(h), int(p)) for r, (h, lr, p) in enumerate(infos)]
    transport = "gloo/tcp" if chosen == "gloo" else "nccl/unknown"
    if chosen == "gloo" and require_transport == "rdma" and not use_nixl:
        raise TransferError("--require-rdma: the torch engine on Gloo moves every tensor over TCP (gloo/tcp); "
                            "use the nixl engine on a RoCE host (or NCCL on GPUs)", op="init", group=name)
    if capture is not None:
        probe = torch.ones(1, device="cuda")
        dist.all_reduce(probe)
        torch.cuda.synchronize()
        try:
            transport = nccl.verify(capture.read(), require_transport, group=name)
        finally:
            capture.discard()
    nixl = None
    if use_nixl:
        nixl = nixl_setup.open_world(dist.group.WORLD, table, rank, name, timeout_s, nixl_max_bytes)
        transport = nixl_setup.transport_label(nixl, transport, require_transport)
    return Group(name=name, backend=chosen, transport=transport, pg=dist.group.WORLD, table=table,
                 global_rank=rank, timeout_s=timeout_s, nixl=nixl)
