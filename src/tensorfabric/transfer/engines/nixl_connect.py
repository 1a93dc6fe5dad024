"""Bring a :class:`~tensorfabric.transfer.engines.nixl_engine.NixlEngine` up: this rank's agent (no progress
thread, the UCX backend only), its receive and send regions registered once, the metadata swapped over the group,
every endpoint connected and one message sent each way (the first transfer to a peer pays 9-23 ms of connection
set-up that must not land in anyone's first decode token)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import TransferError
from tensorfabric.transfer.engines.nixl_engine import DEFAULT_SLOTS, NixlEngine
from tensorfabric.transfer.engines.nixl_ucx import route_nixl_logging

if TYPE_CHECKING:
    from tensorfabric.transfer.records import RankEntry

__all__ = ["open_engine"]


def open_engine(exchange: Callable[[Any], list[Any]], *, rank: int, size: int, table: Sequence[RankEntry],
                host: str, group: str, timeout_s: float, slot_bytes: int, slots: int = DEFAULT_SLOTS,
                error_mode: str = "none", log_path: str | None = None) -> NixlEngine:
    """Create this rank's agent, register its regions, swap metadata through ``exchange`` (an all_gather of
    one picklable object per rank, in group-rank order) and connect to every peer. Collective."""
    import torch

    try:
        from nixl_cu12 import nixl_agent, nixl_agent_config
    except ImportError as exc:
        raise TransferError("engine 'nixl' needs the NIXL wheel: pip install 'tensorfabric[nixl]' "
                            f"(nixl-cu12) ({exc})", op="init", group=group) from exc
    route_nixl_logging()
    name = f"{group}-r{rank}-p{os.getpid()}"
    try:
        agent = nixl_agent(name, nixl_agent_config(enable_prog_thread=False, enable_listen_thread=False,
                                                   backends=[]))
        agent.create_backend("UCX", {"ucx_error_handling_mode": error_mode})
        # Touch every page now, so no write ever lands on a page the kernel has yet to fault in.
        recv = torch.zeros(size * slots * slot_bytes, dtype=torch.uint8)
        send = torch.zeros(size * slots * slot_bytes, dtype=torch.uint8)
        agent.register_memory([recv, send])
        mine = (agent.get_agent_metadata(), recv.data_ptr())
    except Exception as exc:  # noqa: BLE001 -- nixl_cu12 raises several unrelated types
        raise TransferError(f"creating the NIXL agent failed: {exc}", op="init", group=group) from exc
    everyone = exchange(mine)
    peers: list[str | None] = [None] * size
    try:
        for p, (blob, _) in enumerate(everyone):
            if p != rank:
                added = agent.add_remote_agent(blob)
                remote = added.decode() if isinstance(added, bytes) else str(added)
                agent.make_connection(remote)
                peers[p] = remote
    except Exception as exc:  # noqa: BLE001
        raise TransferError(f"connecting NIXL agents failed: {exc}", op="init", group=group) from exc

    engine = NixlEngine(agent=agent, rank=rank, peers=peers, table=table, host=host, recv=recv, send=send,
                        remote_recv=[ptr for _, ptr in everyone], slot_bytes=slot_bytes, slots=slots,
                        timeout_s=timeout_s, group=group, name=name, log_path=log_path)
    # One message each way, so the lanes are chosen (and logged) and the first-transfer cost is paid here.
    probe = torch.zeros(1, dtype=torch.uint8)
    for p in range(size):
        if p != rank:
            engine.put(p, probe, "init")
    for p in range(size):
        if p != rank:
            engine.take(p, "init")
            engine.release(p)
    engine.finish("init")
    engine.wait_s = 0.0
    # Inline only pays over TCP: shared memory and RDMA complete a WRITE without the peer's software.
    engine.inline_bulk = engine.transport().kind == "tcp"
    return engine
