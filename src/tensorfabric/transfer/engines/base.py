"""The one communicator interface every transfer engine implements, with working torch.distributed defaults.

A :class:`Communicator` moves tensors between the ranks of one group. Its methods *start* an operation and
return a :class:`Pending`: the torch.distributed works still in flight (none when the engine finished the
call itself), an optional step to run once they are done, and the seconds the call blocked for its peers
(engines that can measure it). :class:`~tensorfabric.transfer.group.Group` owns everything around a call --
argument checks, statistics, turning failures into TransferError, async handles -- so an engine only moves
bytes. The defaults below are torch.distributed's own collectives over the group's process group; an engine
overrides what it does better and answers :meth:`Communicator.accepts` for the messages it can carry.

Every argument naming a rank (``root``, ``peer``, an item's ``peer``) is a rank **in the group**.

How to add an engine: subclass :class:`Communicator` in a module of this package, give it ``name``,
implement ``open`` (and ``ready``/``preferred`` if it needs a wheel or suits only some backends), and add it
to ``ENGINES`` in :mod:`tensorfabric.transfer.engines`. An engine that carries only some messages is
composed with the torch one by :class:`~tensorfabric.transfer.engines.router.Router`, as NIXL is.

Settling: an engine that can leave bytes only its own progress delivers (NIXL's inline messages) registers
a settler with :func:`on_settle`; every torch.distributed call runs :func:`settle_all` first, so no rank
blocks in torch while a peer waits for such bytes (engines/nixl_engine.py says why).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from tensorfabric.errors import InputError, TransferError

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.codecs import BlockCodec
    from tensorfabric.transfer.records import RankEntry, SendRecv

__all__ = ["DONE", "REDUCE_OPS", "Communicator", "LocalCommunicator", "Pending", "check_reduce_op", "nbytes",
           "on_settle", "settle_all"]

REDUCE_OPS = ("sum", "avg", "max", "min", "product")


class Pending(NamedTuple):
    """A started operation: ``works`` to wait on, then ``then`` (if any); ``waited`` seconds blocked for peers
    when the engine measures it (None otherwise). A tuple, not a dataclass: one is made per collective, and a
    frozen dataclass costs a microsecond more to build."""

    works: Sequence[Any] = ()
    then: Callable[[], None] | None = None
    waited: float | None = None


DONE = Pending()
"""A call the engine completed itself, without measuring its waits."""

_SETTLERS: list[Callable[[str], None]] = []
_REDUCE_TABLE: dict[str, Any] = {}


def on_settle(settler: Callable[[str], None]) -> None:
    """Run ``settler(op)`` before every torch.distributed call of this process (see the module docstring)."""
    if settler not in _SETTLERS:
        _SETTLERS.append(settler)


def settle_all(op: str = "settle") -> None:
    """Settle every engine of this process that asked to be (call before any torch.distributed call)."""
    for settler in _SETTLERS:
        settler(op)


def check_reduce_op(op: str) -> None:
    if op not in REDUCE_OPS:
        raise InputError(f"reduce op: {op!r} is not one of {', '.join(REDUCE_OPS)}")


def _reduce_op(op: str) -> Any:
    # Built once: looking up five pybind enum members costs microseconds, on every collective otherwise.
    if not _REDUCE_TABLE:
        import torch.distributed as dist

        _REDUCE_TABLE.update(sum=dist.ReduceOp.SUM, avg=dist.ReduceOp.AVG, max=dist.ReduceOp.MAX,
                             min=dist.ReduceOp.MIN, product=dist.ReduceOp.PRODUCT)
    return _REDUCE_TABLE[op]


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class Communicator:
    """Collectives of one group through torch.distributed (the default every engine starts from)."""

    name: ClassVar[str] = "torch"
    """The engine's name in ``ENGINES`` and in reports (``Group.engine``)."""

    def __init__(self, *, pg: Any, table: Sequence[RankEntry], rank: int, group: str, timeout_s: float,
                 backend: str, transport: str) -> None:
        self.pg = pg
        self.table = tuple(table)
        self.ranks = tuple(e.global_rank for e in self.table)
        self.size = len(self.table)
        self.rank = rank
        self.group = group
        self.timeout_s = timeout_s
        self.backend = backend
        self.transport = transport
        """What the bytes cross, e.g. ``gloo/tcp``, ``nccl/ib``, ``nixl/shm(...)+gloo/tcp``, ``local``."""

    # -- choosing an engine (class level: asked once, before anything is opened) ------------------------------
    @classmethod
    def open(cls, *, pg: Any, table: Sequence[RankEntry], rank: int, group: str, timeout_s: float, backend: str,
             transport: str, require_transport: str = "any", max_bytes: int = 0) -> Communicator:
        """The world's engine over ``pg`` (what ``init`` calls once the process group exists);
        ``max_bytes`` is for engines with slots of their own."""
        if backend == "gloo" and require_transport == "rdma":
            raise TransferError("--require-rdma: the torch engine on Gloo moves every tensor over TCP (gloo/tcp); "
                                "use the nixl engine on a RoCE host (or NCCL on GPUs)", op="init", group=group)
        return cls(pg=pg, table=table, rank=rank, group=group, timeout_s=timeout_s, backend=backend,
                   transport=transport)

    @classmethod
    def ready(cls) -> str | None:
        """None when this engine can run here, else what is missing and how to get it."""
        return None

    @classmethod
    def preferred(cls, backend: str) -> bool:
        """Whether ``engine="auto"`` picks this engine for a world on ``backend`` (when it is ready)."""
        return True

    def accepts(self, op: str, t: torch.Tensor, reduce_op: str = "sum") -> bool:
        """Whether this engine can carry ``op`` on ``t`` (the same answer on every rank for the same shapes:
        never anything a peer cannot see)."""
        return True

    # -- collectives -----------------------------------------------------------------------------------------
    def all_reduce(self, t: torch.Tensor, op: str) -> Pending:
        import torch.distributed as dist

        settle_all("all_reduce")
        return Pending((dist.all_reduce(t, _reduce_op(op), self.pg, async_op=True),))

    def all_gather(self, src: torch.Tensor, out: torch.Tensor) -> Pending:
        """``out`` (``size`` times ``src``, contiguous) gets every rank's ``src`` in group-rank order."""
        import torch.distributed as dist

        settle_all("all_gather")
        return Pending((dist.all_gather_single(out, src, self.pg, async_op=True),))

    def reduce_scatter(self, src: torch.Tensor, out: torch.Tensor, op: str) -> Pending:
        import torch.distributed as dist

        settle_all("reduce_scatter")
        return Pending((dist.reduce_scatter_single(out, src, _reduce_op(op), self.pg, async_op=True),))

    def broadcast(self, t: torch.Tensor, root: int) -> Pending:
        import torch.distributed as dist

        settle_all("broadcast")
        return Pending((dist.broadcast(t, self.ranks[root], self.pg, async_op=True),))

    def all_to_all(self, src: torch.Tensor, out: torch.Tensor) -> Pending:
        import torch.distributed as dist

        settle_all("all_to_all")
        return Pending((dist.all_to_all_single(out, src, group=self.pg, async_op=True),))

    def send(self, t: torch.Tensor, peer: int) -> Pending:
        import torch.distributed as dist

        settle_all("send")
        return Pending((dist.isend(t, self.ranks[peer], self.pg),))

    def recv(self, t: torch.Tensor, peer: int) -> Pending:
        import torch.distributed as dist

        settle_all("recv")
        return Pending((dist.irecv(t, self.ranks[peer], self.pg),))

    def batch(self, items: Sequence[SendRecv]) -> Pending:
        """Post every send and receive at once, so pairwise exchanges cannot deadlock."""
        import torch.distributed as dist

        settle_all("batch_send_recv")
        fns = {"send": dist.isend, "recv": dist.irecv}
        ops = [dist.P2POp(fns[item.kind], item.tensor, self.ranks[item.peer], self.pg) for item in items]
        return Pending(tuple(dist.batch_isend_irecv(ops)))

    def barrier(self) -> Pending:
        import torch.distributed as dist

        settle_all("barrier")
        return Pending((dist.barrier(self.pg, async_op=True),))

    # -- bytes for the compressed collectives ----------------------------------------------------------------
    def exchange(self, op: str, out: torch.Tensor, inp: torch.Tensor, gather: bool) -> Pending:
        """Move flat uint8 bytes: ``gather`` -- ``out`` gets every rank's ``inp`` in rank order (all_gather);
        otherwise ``inp`` holds one equal part per rank, part j goes to rank j and ``out`` gets the parts for
        this rank in source-rank order (all_to_all). ``op`` names the collective the bytes belong to."""
        import torch.distributed as dist

        settle_all(op)
        if gather:
            return Pending((dist.all_gather_single(out, inp, self.pg, async_op=True),))
        return Pending((dist.all_to_all_single(out, inp, group=self.pg, async_op=True),))

    def reduce_encoded(self, op: str, x: torch.Tensor, result: torch.Tensor, codec: BlockCodec) -> bool:
        """Run one segment of the n > 2 compressed all_reduce (``compressed._scatter_reduce_gather``) in a
        way of the engine's own, bit for bit the generic algorithm's; False: the engine has none, the
        caller runs the generic one over :meth:`exchange`."""
        return False

    # -- life cycle ------------------------------------------------------------------------------------------
    def settle(self, op: str = "settle") -> None:
        """Leave no bytes that need this process's progress to arrive (nothing to do for torch)."""

    def subgroup(self, name: str, table: Sequence[RankEntry], pg: Any = None) -> Communicator:
        """This engine over the members ``table`` (this rank among them; group ranks renumbered), over ``pg``
        when the caller already made one. Collective over those members; RuntimeError from torch passes up."""
        me = [e.global_rank for e in table].index(self.ranks[self.rank])
        if len(table) < 2:
            return LocalCommunicator(table=table, group=name, timeout_s=self.timeout_s, backend=self.backend)
        if pg is None:
            import torch.distributed as dist

            settle_all("new_group")
            pg = dist.new_group([e.global_rank for e in table], timeout=datetime.timedelta(seconds=self.timeout_s),
                                backend=self.backend, use_local_synchronization=True, group_desc=name)
        return type(self)(pg=pg, table=table, rank=me, group=name, timeout_s=self.timeout_s, backend=self.backend,
                          transport=self.transport)

    def close(self) -> None:
        """Tear the process group down (the world's also ends torch.distributed)."""
        import torch.distributed as dist

        settle_all("destroy")
        if self.pg is None or not dist.is_initialized():
            return
        if self.pg is dist.group.WORLD:
            dist.destroy_process_group()
        else:
            dist.destroy_process_group(self.pg)
        self.pg = None


class LocalCommunicator(Communicator):
    """A group of one rank: no process group, every collective is the identity. Reported as the torch engine
    (nothing crosses any engine) with the transport ``local``."""

    def __init__(self, *, table: Sequence[RankEntry], group: str, timeout_s: float, backend: str) -> None:
        super().__init__(pg=None, table=table, rank=0, group=group, timeout_s=timeout_s, backend=backend,
                         transport="local")

    def all_reduce(self, t: torch.Tensor, op: str) -> Pending:
        return DONE

    def all_gather(self, src: torch.Tensor, out: torch.Tensor) -> Pending:
        out.copy_(src)
        return DONE

    def reduce_scatter(self, src: torch.Tensor, out: torch.Tensor, op: str) -> Pending:
        out.copy_(src)
        return DONE

    def broadcast(self, t: torch.Tensor, root: int) -> Pending:
        return DONE

    def all_to_all(self, src: torch.Tensor, out: torch.Tensor) -> Pending:
        out.copy_(src)
        return DONE

    def barrier(self) -> Pending:
        return DONE

    def exchange(self, op: str, out: torch.Tensor, inp: torch.Tensor, gather: bool) -> Pending:
        out.copy_(inp)
        return DONE

    def close(self) -> None:
        settle_all("destroy")
