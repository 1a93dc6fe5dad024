"""The router and the engine choice, in one process: which engine each message takes, and which engine ``init``
would open, without a process group (the spawned-rank tests check the bytes)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import torch

from tensorfabric.errors import InputError
from tensorfabric.transfer.engines import ENGINE_CHOICES, ENGINES, select
from tensorfabric.transfer.engines.base import Communicator, Pending
from tensorfabric.transfer.engines.router import Router
from tensorfabric.transfer.records import RankEntry, SendRecv

TABLE = (RankEntry(0, 0, 0, "h1", 11), RankEntry(1, 1, 1, "h1", 12))


class Recording(Communicator):
    """Records the calls it is given; the small one accepts CPU float tensors only, as NIXL does."""

    def __init__(self, label: str, picky: bool, calls: list[tuple[str, str]]) -> None:
        super().__init__(pg=None, table=TABLE, rank=0, group="g", timeout_s=5.0, backend="gloo", transport=label)
        self.label, self.picky, self.calls = label, picky, calls

    def accepts(self, op: str, t: torch.Tensor, reduce_op: str = "sum") -> bool:
        return not self.picky or (t.dtype == torch.float32 and reduce_op != "avg")

    def _note(self, op: str) -> Pending:
        self.calls.append((op, self.label))
        return Pending(waited=0.001) if self.picky else Pending()

    def all_reduce(self, t: torch.Tensor, op: str) -> Pending:
        return self._note("all_reduce")

    def all_gather(self, src: torch.Tensor, out: torch.Tensor) -> Pending:
        return self._note("all_gather")

    def reduce_scatter(self, src: torch.Tensor, out: torch.Tensor, op: str) -> Pending:
        return self._note("reduce_scatter")

    def send(self, t: torch.Tensor, peer: int) -> Pending:
        return self._note("send")

    def batch(self, items: Sequence[SendRecv]) -> Pending:
        return self._note(f"batch{len(items)}")

    def barrier(self) -> Pending:
        return self._note("barrier")

    def exchange(self, op: str, out: torch.Tensor, inp: torch.Tensor, gather: bool) -> Pending:
        return self._note("exchange")


def _router(max_bytes: int = 1024) -> tuple[Router, list[tuple[str, str]]]:
    calls: list[tuple[str, str]] = []
    return Router(Recording("small", True, calls), Recording("large", False, calls), max_bytes), calls


def test_messages_up_to_the_threshold_that_the_small_engine_accepts_take_it() -> None:
    router, calls = _router()
    router.all_reduce(torch.zeros(256), "sum")            # 1024 bytes: at the threshold
    router.all_reduce(torch.zeros(257), "sum")            # one element over
    router.all_reduce(torch.zeros(8), "avg")              # small, but not an op the small engine has
    router.all_reduce(torch.zeros(8, dtype=torch.int64), "sum")  # small, a dtype it refuses
    router.all_reduce(torch.zeros(0), "sum")              # empty: nothing for the small engine to write
    router.all_gather(torch.zeros(4), torch.zeros(8))
    router.send(torch.zeros(4), 1)
    assert calls == [("all_reduce", "small"), ("all_reduce", "large"), ("all_reduce", "large"),
                     ("all_reduce", "large"), ("all_reduce", "large"), ("all_gather", "small"), ("send", "small")]


def test_ops_the_small_engine_lacks_and_byte_exchanges_have_fixed_routes() -> None:
    router, calls = _router()
    router.barrier()
    router.exchange("all_reduce", torch.zeros(10_000, dtype=torch.uint8), torch.zeros(5_000, dtype=torch.uint8), True)
    # exchanges take the small engine whatever their size: it cuts them into slot-sized pieces itself
    assert calls == [("barrier", "large"), ("exchange", "small")]


def test_a_batch_is_split_by_item_and_reports_the_small_engines_wait() -> None:
    router, calls = _router()
    items = [SendRecv("send", torch.zeros(4), 1), SendRecv("recv", torch.zeros(1000), 1),
             SendRecv("recv", torch.zeros(4), 1)]
    done = router.batch(items)
    assert calls == [("batch1", "large"), ("batch2", "small")] and done.waited == 0.001
    calls.clear()
    assert router.batch(items[1:2]).waited is None and calls == [("batch1", "large")]


def test_the_router_reports_both_transports_and_the_small_engines_name() -> None:
    router, _ = _router()
    assert router.transport == "small+large" and router.name == "torch"  # Recording keeps the default name


def test_engine_choice_is_one_registry_lookup() -> None:
    assert ENGINE_CHOICES == ("auto", *ENGINES.names()) and {"torch", "nixl"} <= set(ENGINES.names())
    assert select("torch", "gloo", 4).name == "torch"
    assert select("auto", "nccl", 4).name == "torch"  # NIXL carries host memory; NCCL tensors live on the GPU
    assert select("auto", "gloo", 1).name == "torch"  # a world of one opens no engine at all
    with pytest.raises(InputError, match=r"'ucx' is not one of auto, torch, nixl"):
        select("ucx", "gloo", 2)
