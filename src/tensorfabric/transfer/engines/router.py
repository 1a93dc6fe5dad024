"""Two engines composed by message size: ``small`` carries what it accepts up to ``max_bytes``, ``large`` the rest.

This is how the NIXL engine runs (``init(engine="nixl")``): NIXL below the threshold, torch.distributed above
(see ``NIXL_MAX_BYTES`` in :mod:`tensorfabric.transfer.group` for where the threshold comes from). Every rank
routes a message by what its peers see too (the op, the tensor's size, dtype, device and layout), so both
sides of every exchange take the same engine. Collectives the small engine has no algorithm for
(reduce_scatter, all_to_all, barrier) always take the large one; the compressed collectives' byte exchanges
take the small one whatever their size, because it cuts them into slot-sized pieces itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensorfabric.transfer.engines.base import Communicator, Pending, nbytes, settle_all

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.codecs import BlockCodec
    from tensorfabric.transfer.records import RankEntry, SendRecv

__all__ = ["Router"]


class Router(Communicator):
    """``small`` up to ``max_bytes`` where it accepts the message, else ``large``; both over the same group."""

    def __init__(self, small: Communicator, large: Communicator, max_bytes: int) -> None:
        super().__init__(pg=large.pg, table=large.table, rank=large.rank, group=large.group,
                         timeout_s=large.timeout_s, backend=large.backend,
                         transport=f"{small.transport}+{large.transport}")
        self.small, self.large, self.max_bytes = small, large, max_bytes
        self.name = small.name  # type: ignore[misc]  # reported as the engine that makes it differ from torch

    def _pick(self, op: str, t: torch.Tensor, reduce_op: str = "sum") -> Communicator:
        if 0 < nbytes(t) <= self.max_bytes and self.small.accepts(op, t, reduce_op):
            return self.small
        return self.large

    def accepts(self, op: str, t: torch.Tensor, reduce_op: str = "sum") -> bool:
        return self.large.accepts(op, t, reduce_op)

    def all_reduce(self, t: torch.Tensor, op: str) -> Pending:
        return self._pick("all_reduce", t, op).all_reduce(t, op)

    def all_gather(self, src: torch.Tensor, out: torch.Tensor) -> Pending:
        return self._pick("all_gather", src).all_gather(src, out)

    def reduce_scatter(self, src: torch.Tensor, out: torch.Tensor, op: str) -> Pending:
        return self._pick("reduce_scatter", src, op).reduce_scatter(src, out, op)

    def broadcast(self, t: torch.Tensor, root: int) -> Pending:
        return self._pick("broadcast", t).broadcast(t, root)

    def all_to_all(self, src: torch.Tensor, out: torch.Tensor) -> Pending:
        return self._pick("all_to_all", src).all_to_all(src, out)

    def send(self, t: torch.Tensor, peer: int) -> Pending:
        return self._pick("send", t).send(t, peer)

    def recv(self, t: torch.Tensor, peer: int) -> Pending:
        return self._pick("recv", t).recv(t, peer)

    def batch(self, items: Sequence[SendRecv]) -> Pending:
        """Each item by its own size, as its partner routes the matching item; the large engine's items are
        posted first, then the small engine's run to completion."""
        small: list[SendRecv] = []
        large: list[SendRecv] = []
        for item in items:
            (small if self._pick("batch_send_recv", item.tensor) is self.small else large).append(item)
        if not small:
            return self.large.batch(items)
        started = self.large.batch(large) if large else Pending()
        done = self.small.batch(small)
        return Pending(started.works, started.then, done.waited)

    def barrier(self) -> Pending:
        return self.large.barrier()

    def exchange(self, op: str, out: torch.Tensor, inp: torch.Tensor, gather: bool) -> Pending:
        return self.small.exchange(op, out, inp, gather)

    def reduce_encoded(self, op: str, x: torch.Tensor, result: torch.Tensor, codec: BlockCodec) -> bool:
        return self.small.reduce_encoded(op, x, result, codec)

    def settle(self, op: str = "settle") -> None:
        self.small.settle(op)
        self.large.settle(op)

    def subgroup(self, name: str, table: Sequence[RankEntry], pg: Any = None) -> Communicator:
        large = self.large.subgroup(name, table, pg)
        if large.pg is None:
            return large
        return Router(self.small.subgroup(name, table, large.pg), large, self.max_bytes)

    def close(self) -> None:
        # Settle before the small engine closes: closing forgets its unsettled state, and a peer may still be
        # waiting for our side of the handshake.
        settle_all("destroy")
        self.small.close()
        self.large.close()
