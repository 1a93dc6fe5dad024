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
from tensorfabric.transfer.engines import select
from tensorfabric.transfer.engines.base import (
    REDUCE_OPS,
    Communicator,
    LocalCommunicator,
    Pending,
    check_reduce_op,
    nbytes,
)
from tensorfabric.transfer.engines.torch import TorchCommunicator
from tensorfabric.transfer.failures import to_transfer_error
from tensorfabric.transfer.nccl import TRANSPORT_CHECKS, apply_env, capture_log, verify
from tensorfabric.transfer.records import Handle, RankEntry, SendRecv, ravel, unravel
from tensorfabric.transfer.stats import GroupStats

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.codecs import BlockCodec

__all__ = ["BACKENDS", "NIXL_MAX_BYTES", "REDUCE_OPS", "Group", "Handle", "RankEntry", "SendRecv", "init"]

BACKENDS = ("auto", "gloo", "nccl")
NIXL_MAX_BYTES = 64 * 2**10
"""Messages up to this size go through the NIXL engine (when it is on), larger ones through torch.distributed.
Measured on two local ranks with benchmarks/small_message_latency.py (docs/transfer.md): NIXL's all_reduce
median beat Gloo's in every run up to 64 KiB (9.1x quiet; 1.8-4.8x at load 6). Above it the answer depends
on the machine: quiet, NIXL still won 7.1x at 128 KiB and 2.1x at 1 MiB; at load 6 it was mixed at 128-256 KiB
and lost every run at 1 MiB (0.3-0.7x: NIXL sends the whole tensor to each peer and copies it twice more,
Gloo's ring halves it). 64 KiB is where it won everywhere; ``init(nixl_max_bytes=...)`` raises it on a
dedicated host. It is also the per-peer slot size, so the receive region costs ``slots x 64 KiB`` per peer."""


class Group:
    """A set of ranks that run collectives together (see the module docstring for the rank table).

    The group checks arguments, records statistics, names failures and builds subgroups; its communicator
    (:mod:`tensorfabric.transfer.engines`, chosen once by :func:`init`) moves the bytes. Built without one, a
    group runs the torch engine over ``pg`` (the identity when ``pg`` is None)."""

    def __init__(self, *, name: str, backend: str, table: Sequence[RankEntry], global_rank: int, timeout_s: float,
                 pg: Any = None, transport: str = "local", comm: Communicator | None = None) -> None:
        self.name = name
        self.backend = backend
        self.table = tuple(table)
        self.ranks = tuple(e.global_rank for e in self.table)
        self.size = len(self.table)
        self.global_rank = global_rank
        self.rank = self.ranks.index(global_rank)
        self.timeout_s = timeout_s
        self.stats = GroupStats()
        self._host = self.table[self.rank].host
        if comm is None:
            comm = LocalCommunicator(table=self.table, group=name, timeout_s=timeout_s, backend=backend) \
                if pg is None else TorchCommunicator(pg=pg, table=self.table, rank=self.rank, group=name,
                                                     timeout_s=timeout_s, backend=backend, transport=transport)
        self.comm = comm
        self.pg = comm.pg
        self.transport = comm.transport
        self.engine = comm.name
        """The engine's name: ``nixl`` when small tensors go through NIXL, else ``torch``."""

    def __repr__(self) -> str:
        return (f"Group(name={self.name!r}, rank={self.rank}, size={self.size}, backend={self.backend!r}, "
                f"engine={self.engine!r}, transport={self.transport!r})")

    # -- plumbing ------------------------------------------------------------------------------------------
    def _error(self, exc: BaseException, op: str, peer: int | None = None) -> TransferError:
        hint = self.ranks[peer] if peer is not None and 0 <= peer < self.size else None
        return to_transfer_error(exc, op=op, group=self.name, table=self.table, me=self.global_rank,
                                 host=self._host, timeout_s=self.timeout_s, hint=hint)

    def _call(self, op: str, size: int, start: Callable[[], Pending], result: Any, async_op: bool,
              peer: int | None = None) -> Any:
        """Start ``op`` on the communicator, then either finish it now or hand back a Handle; record either way."""
        t0 = time.perf_counter()
        try:
            pending = start()
        except RuntimeError as exc:
            raise self._error(exc, op, peer) from exc
        if async_op:
            return Handle(pending.works, lambda: self._finish(op, size, pending, result, peer, t0))
        return self._finish(op, size, pending, result, peer, t0)

    def _finish(self, op: str, size: int, pending: Pending, result: Any, peer: int | None, t0: float) -> Any:
        works, then, waited = pending
        if works:
            try:
                for w in works:
                    w.wait()
            except RuntimeError as exc:
                raise self._error(exc, op, peer) from exc
        if then is not None:
            then()
        self.stats.record(op, "none", size, size, time.perf_counter() - t0)
        if waited is not None:
            self.stats.record_wait(op, waited)
        return result

    def _coded(self, op: str, size: int, run: Callable[[], tuple[Any, int]], codec: str, async_op: bool) -> Any:
        """Run a compressed collective now (they complete synchronously: ``run`` returns the result and the wire
        bytes) and record it."""
        t0 = time.perf_counter()
        try:
            result, wire = run()
        except RuntimeError as exc:
            raise self._error(exc, op) from exc
        self.stats.record(op, codec, size, wire, time.perf_counter() - t0)
        return Handle([], lambda: result) if async_op else result

    def _check_peer(self, peer: int, what: str) -> None:
        if isinstance(peer, bool) or not isinstance(peer, int) or not 0 <= peer < self.size or peer == self.rank:
            raise InputError(f"{what}: {peer!r} must be a rank in group {self.name!r} other than this one "
                             f"(0..{self.size - 1}, this rank is {self.rank})")

    def _split(self, t: torch.Tensor, what: str) -> None:
        if t.dim() == 0 or t.shape[0] % self.size:
            raise InputError(f"{what}: first dimension {tuple(t.shape)} must be divisible by the group size "
                             f"{self.size}")

    # -- collectives ---------------------------------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, op: str = "sum", codec: BlockCodec | None = None,
                   async_op: bool = False) -> Any:
        """Reduce ``t`` across the group in place and return it. With ``codec`` (sum/avg only) the
        compressed algorithm of :mod:`tensorfabric.transfer.compressed` runs instead (synchronously)."""
        check_reduce_op(op)
        if codec is not None and codec.name != "none":
            from tensorfabric.transfer.compressed import compressed_all_reduce

            return self._coded("all_reduce", nbytes(t), lambda: (t, compressed_all_reduce(self.comm, t, codec, op)),
                               codec.name, async_op)
        return self._call("all_reduce", nbytes(t), lambda: self.comm.all_reduce(t, op), t, async_op)

    def all_gather(self, t: torch.Tensor, codec: BlockCodec | None = None, async_op: bool = False) -> Any:
        """Concatenate every rank's ``t`` along dim 0 in group-rank order (a 0-d ``t`` counts as shape (1,))."""
        import torch

        src = t.reshape(1) if t.dim() == 0 else t.contiguous()
        if codec is not None and codec.name != "none":
            from tensorfabric.transfer.compressed import compressed_all_gather

            return self._coded("all_gather", self.size * nbytes(src),
                               lambda: compressed_all_gather(self.comm, src, codec), codec.name, async_op)
        out = torch.empty((self.size * src.shape[0], *src.shape[1:]), dtype=src.dtype, device=src.device)
        return self._call("all_gather", nbytes(out), lambda: self.comm.all_gather(src, out), out, async_op)

    def reduce_scatter(self, t: torch.Tensor, op: str = "sum", async_op: bool = False) -> Any:
        """Reduce ``t`` (first dim divisible by the group size) and return this rank's slice of the result."""
        import torch

        check_reduce_op(op)
        self._split(t, "reduce_scatter input")
        src = t.contiguous()
        out = torch.empty((src.shape[0] // self.size, *src.shape[1:]), dtype=src.dtype, device=src.device)
        return self._call("reduce_scatter", nbytes(src), lambda: self.comm.reduce_scatter(src, out, op), out,
                          async_op)

    def broadcast(self, t: torch.Tensor, src: int = 0, async_op: bool = False) -> Any:
        """Copy group rank ``src``'s ``t`` into every rank's ``t`` (in place)."""
        if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < self.size:
            raise InputError(f"broadcast src: {src!r} must be a rank in group {self.name!r} (0..{self.size - 1})")
        return self._call("broadcast", nbytes(t), lambda: self.comm.broadcast(t, src), t, async_op,
                          peer=src if src != self.rank else None)

    def all_to_all(self, t: torch.Tensor, async_op: bool = False) -> Any:
        """Split ``t`` into ``size`` chunks along dim 0; chunk j goes to rank j. Returns the received chunks
        concatenated in source-rank order."""
        import torch

        self._split(t, "all_to_all input")
        src = t.contiguous()
        out = torch.empty_like(src)
        return self._call("all_to_all", nbytes(src), lambda: self.comm.all_to_all(src, out), out, async_op)

    def send(self, t: torch.Tensor, dst: int, async_op: bool = False) -> Any:
        self._check_peer(dst, "send dst")
        src = t.contiguous()
        return self._call("send", nbytes(t), lambda: self.comm.send(src, dst), None, async_op, peer=dst)

    def recv(self, t: torch.Tensor, src: int, async_op: bool = False) -> Any:
        """Receive into ``t`` (contiguous) from group rank ``src``; returns ``t``."""
        self._check_peer(src, "recv src")
        if not t.is_contiguous():
            raise InputError(f"recv: the buffer of shape {tuple(t.shape)} must be contiguous (use .contiguous())")
        return self._call("recv", nbytes(t), lambda: self.comm.recv(t, src), t, async_op, peer=src)

    def batch_send_recv(self, ops: Sequence[SendRecv], async_op: bool = False) -> Any:
        """Post all sends and receives at once (``batch_isend_irecv``) so pairwise exchanges cannot deadlock."""
        for item in ops:
            if item.kind not in ("send", "recv"):
                raise InputError(f"batch_send_recv kind: {item.kind!r} is not one of send, recv")
            self._check_peer(item.peer, f"{item.kind} peer")
        if not ops:
            return self._call("batch_send_recv", 0, Pending, None, async_op)
        size = sum(nbytes(item.tensor) for item in ops)
        peer = ops[0].peer if len({o.peer for o in ops}) == 1 else None
        return self._call("batch_send_recv", size, lambda: self.comm.batch(ops), None, async_op, peer=peer)

    def barrier(self) -> None:
        if self.size > 1:  # a group of one has nothing to wait for, and records nothing
            self._call("barrier", 0, self.comm.barrier, None, False)

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
        entries = [self.table[r] for r in group_ranks]
        table = [RankEntry(e.global_rank, e.local_rank, i, e.host, e.pid) for i, e in enumerate(entries)]
        try:
            comm = self.comm.subgroup(name, table)
        except RuntimeError as exc:
            raise self._error(exc, "new_group") from exc
        return Group(name=name, backend=self.backend, table=table, global_rank=self.global_rank,
                     timeout_s=self.timeout_s, comm=comm)

    def destroy(self) -> None:
        """Tear the group down: its engines, then its process group (the world's also ends torch.distributed)."""
        self.comm.close()
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
    if require_transport not in TRANSPORT_CHECKS:
        raise InputError(f"require_transport: {require_transport!r} is not one of "
                         f"{', '.join(TRANSPORT_CHECKS)}")
    if not timeout_s > 0:
        raise InputError(f"timeout_s: {timeout_s!r} must be a positive number of seconds such as 60")
    chosen = backend if backend != "auto" else ("nccl" if torch.cuda.is_available() else "gloo")
    rank = _int_env(env, "RANK", 0)
    world = _int_env(env, "WORLD_SIZE", 1)
    # Chosen once, before the rendezvous: bad input fails every rank at once.
    communicator = select(engine, chosen, world)
    local_rank = _int_env(env, "LOCAL_RANK", rank)
    host, pid = socket.gethostname(), os.getpid()
    if world <= 1 and not dist.is_initialized():
        table = [RankEntry(0, local_rank, 0, host, pid)]
        return Group(name=name, backend=chosen, transport="local", pg=None, table=table, global_rank=0,
                     timeout_s=timeout_s)
    capture = None
    if chosen == "nccl":
        # NCCL reads the real process environment, so the hook writes there whatever ``environ`` was read from.
        apply_env(nccl_env, os.environ)
        capture = capture_log(os.environ)
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
    if capture is not None:
        probe = torch.ones(1, device="cuda")
        dist.all_reduce(probe)
        torch.cuda.synchronize()
        try:
            transport = verify(capture.read(), require_transport, group=name)
        finally:
            capture.discard()
    comm = communicator.open(pg=dist.group.WORLD, table=table, rank=rank, group=name, timeout_s=timeout_s,
                             backend=chosen, transport=transport, require_transport=require_transport,
                             max_bytes=nixl_max_bytes)
    return Group(name=name, backend=chosen, table=table, global_rank=rank, timeout_s=timeout_s, comm=comm)
