"""The NIXL engine: small CPU tensors by one-sided UCX writes (engines/nixl_engine.py, brought up by
engines/nixl_connect.py), composed with the torch engine by size (engines/router.py), and how it is brought up:
one NIXL engine per group, opened over the group's process group, UCX's lane log captured and turned into the
group's transport line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError, TransferError
from tensorfabric.fsutil import SCRATCH_ENV, scratch_dir
from tensorfabric.transfer.engines import nixl_bulk, nixl_ops
from tensorfabric.transfer.engines.base import Communicator, Pending
from tensorfabric.transfer.engines.nixl_connect import open_engine
from tensorfabric.transfer.engines.nixl_ucx import available, prepare_ucx_env
from tensorfabric.transfer.engines.router import Router
from tensorfabric.transfer.engines.torch import TorchCommunicator

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.codecs import BlockCodec
    from tensorfabric.transfer.engines.nixl_engine import NixlEngine
    from tensorfabric.transfer.records import RankEntry, SendRecv

__all__ = ["NixlCommunicator", "open_for_group", "transport_label"]

_CONTIGUOUS_OPS = frozenset({"all_reduce", "broadcast", "recv", "batch_send_recv", "all_gather", "send"})


class NixlCommunicator(Communicator):
    """The collectives of :mod:`~tensorfabric.transfer.engines.nixl_ops` over one group's NIXL engine. It
    carries one slot (``engine.max_bytes``) at most, so it is always the small side of a Router whose large
    side is the torch engine over the same process group; ``open`` builds that pair."""

    name = "nixl"

    def __init__(self, engine: NixlEngine, *, pg: Any, table: Sequence[RankEntry], rank: int, group: str,
                 timeout_s: float, backend: str, transport: str) -> None:
        super().__init__(pg=pg, table=table, rank=rank, group=group, timeout_s=timeout_s, backend=backend,
                         transport=transport)
        self.engine = engine

    @classmethod
    def ready(cls) -> str | None:
        if available():
            return None
        return "engine 'nixl' needs the NIXL wheel: pip install 'tensorfabric[nixl]' (nixl-cu12)"

    @classmethod
    def preferred(cls, backend: str) -> bool:
        # NIXL carries host-memory tensors; with NCCL the tensors live on the GPU.
        return backend == "gloo"

    @classmethod
    def open(cls, *, pg: Any, table: Sequence[RankEntry], rank: int, group: str, timeout_s: float, backend: str,
             transport: str, require_transport: str = "any", max_bytes: int = 64 * 2**10) -> Communicator:
        """The world's engine: NIXL up to ``max_bytes``, the torch engine above, over ``pg``.

        UCX reads the real process environment (as NCCL does), so this is where the transfer subsystem writes
        it (see ``nixl_ucx.prepare_ucx_env``): its lane log goes to a per-process file, unless the user
        chose ``UCX_LOG_LEVEL`` or ``UCX_LOG_FILE`` (then the transport reads unknown). The log's directory
        lives under the launcher's scratch directory (``SCRATCH_ENV``) when there is one, so a rank killed
        before :meth:`NixlEngine.close` leaves nothing behind once its launcher exits."""
        if not 0 < max_bytes <= 64 * 2**20:
            raise InputError(f"nixl_max_bytes: {max_bytes!r} must be between 1 and 64 MiB")
        log_path = log_dir = None
        if "UCX_LOG_LEVEL" not in os.environ and "UCX_LOG_FILE" not in os.environ:
            log_dir = scratch_dir("ucx", os.environ.get(SCRATCH_ENV))
            log_path = str(Path(log_dir) / "ucx.%p.log")
        prepare_ucx_env(os.environ, log_path)
        try:
            engine = open_for_group(pg, table, rank, group, timeout_s, max_bytes, log_path)
        except BaseException:
            if log_dir is not None:
                import shutil

                shutil.rmtree(log_dir, ignore_errors=True)
            raise
        engine.owned_dir = log_dir
        large = TorchCommunicator(pg=pg, table=table, rank=rank, group=group, timeout_s=timeout_s,
                                  backend=backend, transport=transport)
        small = cls(engine, pg=pg, table=table, rank=rank, group=group, timeout_s=timeout_s, backend=backend,
                    transport=transport_label(engine, require_transport))
        return Router(small, large, max_bytes)

    def accepts(self, op: str, t: torch.Tensor, reduce_op: str = "sum") -> bool:
        import torch

        return (op in _CONTIGUOUS_OPS and reduce_op in nixl_ops.REDUCE_OPS and t.device.type == "cpu"
                and t.dtype != torch.bool and not t.is_complex() and t.is_contiguous())

    def _timed(self, call: Any, *args: Any) -> Pending:
        waited = self.engine.wait_s
        call(self.engine, *args)
        return Pending(waited=self.engine.wait_s - waited)

    def all_reduce(self, t: torch.Tensor, op: str) -> Pending:
        return self._timed(nixl_ops.all_reduce, t, op)

    def all_gather(self, src: torch.Tensor, out: torch.Tensor) -> Pending:
        return self._timed(nixl_ops.all_gather, src, out)

    def broadcast(self, t: torch.Tensor, root: int) -> Pending:
        return self._timed(nixl_ops.broadcast, t, root)

    def send(self, t: torch.Tensor, peer: int) -> Pending:
        return self._timed(nixl_ops.send, t, peer)

    def recv(self, t: torch.Tensor, peer: int) -> Pending:
        return self._timed(nixl_ops.recv, t, peer)

    def batch(self, items: Sequence[SendRecv]) -> Pending:
        return self._timed(nixl_ops.batch, items)

    def exchange(self, op: str, out: torch.Tensor, inp: torch.Tensor, gather: bool) -> Pending:
        nixl_bulk.exchange(self.engine, op, out, inp, gather)
        return Pending()

    def reduce_encoded(self, op: str, x: torch.Tensor, result: torch.Tensor, codec: BlockCodec) -> bool:
        nixl_bulk.scatter_reduce_gather(self.engine, op, x, result, codec)
        return True

    def settle(self, op: str = "settle") -> None:
        self.engine.settle(op)

    def subgroup(self, name: str, table: Sequence[RankEntry], pg: Any = None) -> Communicator:
        """A NIXL engine over ``pg``, the process group the torch side of the Router just made."""
        me = [e.global_rank for e in table].index(self.ranks[self.rank])
        engine = open_for_group(pg, table, me, name, self.timeout_s, self.engine.max_bytes, self.engine.log_path)
        return type(self)(engine, pg=pg, table=table, rank=me, group=name, timeout_s=self.timeout_s,
                          backend=self.backend, transport=transport_label(engine, "any"))

    def close(self) -> None:
        # The process group belongs to the torch side of the Router.
        self.engine.close()


def open_for_group(pg: Any, table: Sequence[RankEntry], rank: int, name: str, timeout_s: float, max_bytes: int,
                   log_path: str | None) -> NixlEngine:
    """This rank's engine for the group ``pg`` (collective over its members)."""
    import torch.distributed as dist

    def exchange(obj: Any) -> list[Any]:
        out: list[Any] = [None] * len(table)
        try:
            dist.all_gather_object(out, obj, group=pg)
        except RuntimeError as exc:
            raise TransferError(f"exchanging NIXL metadata failed: {exc}", op="init", group=name) from exc
        return out

    return open_engine(exchange, rank=rank, size=len(table), table=table, host=table[rank].host, group=name,
                       timeout_s=timeout_s, slot_bytes=max_bytes, log_path=log_path)


def transport_label(engine: NixlEngine, require_transport: str) -> str:
    """``nixl/<kind>(lanes)``, enforcing ``require_transport`` on what UCX reports."""
    found = engine.transport()
    if require_transport == "rdma" and not found.rdma:
        why = "UCX's log was not captured (UCX_LOG_LEVEL/UCX_LOG_FILE set by the user)" if not engine.log_path \
            else f"UCX chose {found.label()}"
        raise TransferError(f"--require-rdma: NIXL is not on RDMA: {why}; small tensors would cross "
                            "shared memory or TCP. On a RoCE host check `tensorfabric doctor` and UCX_TLS/"
                            "UCX_NET_DEVICES", op="init", group=engine.group)
    return found.label()
