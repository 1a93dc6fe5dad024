"""Connecting the KV agents of a disaggregated run (see :mod:`tensorfabric.transfer.kv.transfer` for the
protocol): create this rank's agent over its region, swap :class:`~tensorfabric.transfer.kv.transfer.KVPeer`
records, load the peers that share KV heads with it, and probe every pair before the first request."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import TransferError
from tensorfabric.transfer.kv.pool import KVLayout, Write
from tensorfabric.transfer.kv.transfer import KVPeer, KVReceiver, KVSender

if TYPE_CHECKING:
    import torch

__all__ = ["connect_kv"]


def _shares(a: KVLayout, b: KVLayout) -> bool:
    return max(a.head_start, b.head_start) < min(a.head_start + a.kv_heads, b.head_start + b.kv_heads)


def connect_kv(exchange: Callable[[Any], list[Any]], *, role: str, index: int, layout: KVLayout,
               region: torch.Tensor, timeout_s: float, slots: int = 2, blocks_per_slot: int = 1,
               chunks: int = 4, log_path: str | None = None) -> KVSender | KVReceiver:
    """Create this rank's agent over ``region`` (staging for prefill, pool for decode), swap :class:`KVPeer`
    records through ``exchange`` (an all_gather over every prefill and decode rank), connect to the peers it
    shares heads with and send one probe each way. Collective over all of them."""
    import socket

    try:
        from nixl_cu12 import nixl_agent, nixl_agent_config
    except ImportError as exc:
        raise TransferError(f"the KV transfer needs the NIXL wheel (nixl-cu12): {exc}", op="kv_init",
                            group="kv") from exc
    from tensorfabric.transfer.engines.nixl_ucx import route_nixl_logging

    route_nixl_logging()
    t0 = time.perf_counter()
    name = f"kv-{role}{index}-p{os.getpid()}"
    try:
        agent = nixl_agent(name, nixl_agent_config(enable_prog_thread=False, enable_listen_thread=False,
                                                   backends=[]))
        agent.create_backend("UCX", {"ucx_error_handling_mode": "none"})
        registration = agent.register_memory([region])
        me = KVPeer(role, index, socket.gethostname(), os.getpid(), name, agent.get_agent_metadata(),
                    region.data_ptr(), layout)
    except Exception as exc:  # noqa: BLE001
        raise TransferError(f"creating the KV NIXL agent failed: {exc}", op="kv_init", group="kv") from exc
    created_s = time.perf_counter() - t0
    everyone: list[KVPeer] = exchange(me)  # waits for the slowest rank: not part of the set-up cost
    t0 = time.perf_counter()
    other = "decode" if role == "prefill" else "prefill"
    peers = sorted((p for p in everyone if p.role == other and _shares(p.layout, layout)), key=lambda p: p.index)
    names: list[str] = []
    try:
        for p in peers:
            added = agent.add_remote_agent(p.meta)
            names.append(added.decode() if isinstance(added, bytes) else str(added))
            agent.make_connection(names[-1])
    except Exception as exc:  # noqa: BLE001
        raise TransferError(f"connecting KV agents failed: {exc}", op="kv_init", group="kv") from exc
    side: KVSender | KVReceiver
    if role == "prefill":
        side = KVSender(agent, me, peers, names, timeout_s, log_path, staging=region, slots=slots,
                        blocks_per_slot=blocks_per_slot, chunks=chunks)
    else:
        side = KVReceiver(agent, me, peers, names, timeout_s, log_path, pool=region)
    # The probe: prefill writes a few bytes into each pool's first block (no request lives there yet) with a
    # notification, decode notifies back, so the RMA lanes and remote keys are set up before request 0.
    if isinstance(side, KVSender):
        probe = [Write(0, 0, min(64, region.numel()))]
        handles = [(i, side._post(i, probe, b"P")) for i in range(len(peers))]
        side.wait(lambda: all(side._state(i, h) == "DONE" for i, h in handles), "connect")
        for _, h in handles:
            agent.release_xfer_handle(h)
    else:
        for n in names:
            agent.send_notif(n, b"P")
    counts = [0] * len(peers)

    def heard() -> bool:
        for i, notes in enumerate(side.notes):
            counts[i] += sum(1 for m in notes if m == b"P")
            notes[:] = [m for m in notes if m != b"P"]
        return all(c > 0 for c in counts)

    side.wait(heard, "connect")
    side.setup_s = created_s + time.perf_counter() - t0
    side.registration = registration
    return side
