"""KV blocks from prefill ranks into decode ranks' pools: NIXL WRITEs of descriptor lists, one notification each.

Roles: a **decode** rank registers its pool (:mod:`~tensorfabric.transfer.kv.pool` layout, its KV heads only)
once; a **prefill** rank registers a staging area of the same layout for one request. At connection time every
rank publishes a :class:`KVPeer` (agent metadata, region address, layout, pid), each prefill rank loads the
decode ranks it shares heads with and vice versa, and one probe write + reply crosses every pair, so UCX picks
(and logs) its lanes and the first request pays no connection set-up (:attr:`KVSender.setup_s`).

Per request a prefill rank packs its cache into staging, then for each chunk of layers and each decode peer
posts one WRITE of the planned descriptors with the notification::

    K<req>,<chunk>,<chunks>,<tokens>,<first token>,<block>:<block>:...[,<sampler state hex>]

NIXL delivers a transfer's notification only after its data has landed, so a decode rank treats a request as
present when every chunk of every prefill peer it expects has notified, and reads nothing of it before. Pool
blocks are reused: request ``r`` goes to slot ``r % slots`` (``blocks_per_slot`` blocks each), and a prefill
rank waits for the decode rank's ``F<req>`` (blocks copied out) before it overwrites a slot. The slot rule is
deterministic, so several prefill ranks agree on the block table without talking to each other.

Failure: every wait is bounded by ``timeout_s`` and checks every ``_LIVENESS_S`` that the peer processes on
this host still exist; a UCX error state on a write, a dead peer or the timeout raise TransferError naming the
peer and, on the decode side, how many chunks had landed (none of which was used).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import TransferError
from tensorfabric.transfer.failures import process_gone
from tensorfabric.transfer.kv.pool import KVLayout, Write, blocks_for, pack, plan_writes, unpack

if TYPE_CHECKING:
    import torch

__all__ = ["KVPeer", "KVReceived", "KVReceiver", "KVSendRecord", "KVSender", "layer_chunks"]

_LIVENESS_S = 0.2


@dataclass(frozen=True)
class KVPeer:
    """What one rank publishes at connection time (picklable)."""

    role: str  # "prefill" | "decode"
    index: int  # rank within its side
    host: str
    pid: int
    name: str
    meta: bytes
    base: int
    layout: KVLayout


@dataclass(frozen=True)
class KVSendRecord:
    """One request as a prefill rank sent it."""

    request: int
    tokens: int
    blocks: int
    nbytes: int
    descriptors: int
    writes: int
    pack_s: float
    credit_wait_s: float
    write_s: float
    """From packing the first chunk to the last WRITE complete (data landed, notifications sent); packing
    overlaps the writes of earlier chunks and is also counted alone in ``pack_s``."""


@dataclass
class KVReceived:
    """One request as a decode rank took it out of its pool."""

    request: int
    tokens: int
    first_token: int
    blocks: tuple[int, ...]
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    wait_s: float
    unpack_s: float
    sampler_state: bytes = b""
    nbytes: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def layer_chunks(layers: int, chunks: int) -> list[range]:
    chunks = max(1, min(chunks, layers))
    step = -(-layers // chunks)
    return [range(a, min(a + step, layers)) for a in range(0, layers, step)]


class _Side:
    """Agent plumbing shared by both roles."""

    def __init__(self, agent: Any, me: KVPeer, peers: Sequence[KVPeer], names: Sequence[str], timeout_s: float,
                 log_path: str | None) -> None:
        self.agent, self.me, self.peers, self.names = agent, me, list(peers), list(names)
        self.timeout_s, self.log_path = timeout_s, log_path
        self._by_name = {n: i for i, n in enumerate(names)}
        self.notes: list[list[bytes]] = [[] for _ in peers]
        self.registration: Any = None
        self.setup_s = 0.0
        """Seconds of agent creation, registration, connection and the probe (not the wait for peers)."""

    def poll(self) -> None:
        for name, msgs in self.agent.get_new_notifs().items():
            i = self._by_name.get(name)
            if i is not None:
                self.notes[i].extend(msgs)

    def wait(self, ready: Callable[[], bool], what: str, on_fail: Callable[[str], str] | None = None) -> float:
        """Poll until ``ready()``; the seconds waited. TransferError on timeout or a dead peer process."""
        t0 = time.perf_counter()
        deadline, next_check = t0 + self.timeout_s, t0 + _LIVENESS_S
        while True:
            self.poll()
            if ready():
                return time.perf_counter() - t0
            now = time.perf_counter()
            if now >= next_check:
                next_check = now + _LIVENESS_S
                for p in self.peers:
                    if p.host == self.me.host and process_gone(p.pid):
                        raise self.fail(what, p, f"its process {p.pid} exited", on_fail)
                if now >= deadline:
                    raise self.fail(what, None, f"timed out after {self.timeout_s:g} s", on_fail)
            if now - t0 < 200e-6:
                os.sched_yield()
            else:
                time.sleep(20e-6)

    def fail(self, what: str, peer: KVPeer | None, why: str, on_fail: Callable[[str], str] | None = None
             ) -> TransferError:
        who = f"{peer.role} rank {peer.index}" if peer is not None else \
            "/".join(f"{p.role} rank {p.index}" for p in self.peers)
        text = f"KV {what} ({self.me.role} rank {self.me.index}, timeout {self.timeout_s:g} s): {who}: {why}"
        if on_fail is not None:
            text = on_fail(text)
        return TransferError(text, op=f"kv_{what}", group="kv")

    def close_agent(self) -> None:
        """Deregister this rank's region (best effort: the peers may be gone). Call when no peer writes."""
        if self.registration is not None:
            try:
                self.agent.deregister_memory(self.registration)
            except Exception:  # noqa: BLE001,S110 -- teardown must not raise
                pass
            self.registration = None

    def ucx_log(self) -> str:
        from tensorfabric.transfer.engines.nixl_engine import read_ucx_log

        return read_ucx_log(self.log_path)

    def transport(self) -> str:
        """The lanes UCX chose for this agent's endpoints, e.g. ``nixl/tcp(tcp/veth0)``."""
        from tensorfabric.host.ucx_log import classify, parse_ucx_log

        return classify(parse_ucx_log(self.ucx_log(), worker=self.me.name)).label()


class KVSender(_Side):
    """A prefill rank's end: stages its heads of a request's cache and writes them into the decode pools."""

    def __init__(self, *args: Any, staging: torch.Tensor, slots: int, blocks_per_slot: int, chunks: int,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.staging, self.slots, self.blocks_per_slot, self.chunks = staging, slots, blocks_per_slot, chunks
        self._freed: set[tuple[int, int]] = set()  # (peer, request)
        self._sent: list[int] = []
        self.after_chunk: Callable[[int, int], None] | None = None
        """Called as ``after_chunk(request, chunk)`` once a chunk's writes are posted (fault-injection tests);
        :meth:`settle` inside it waits until they have landed and notified."""
        self._posted: list[tuple[int, Any]] = []

    def _take_frees(self) -> None:
        for i, notes in enumerate(self.notes):
            for msg in notes:
                if msg[:1] == b"F":
                    self._freed.add((i, int(msg[1:])))
            notes.clear()

    def relayout(self, mine: KVLayout, theirs: Sequence[KVLayout], blocks_per_slot: int) -> None:
        """Reinterpret the registered regions with other layouts (the benchmark sweeps block sizes over one
        registration); every rank must switch alike between requests."""
        self.me = replace(self.me, layout=mine)
        self.peers = [replace(p, layout=lay) for p, lay in zip(self.peers, theirs, strict=True)]
        self.blocks_per_slot = blocks_per_slot

    def await_release(self, request: int) -> float:
        """Wait until every decode peer released ``request`` (read it out of its pool); the seconds waited."""
        return self._await_free(request)

    def _await_free(self, request: int) -> float:
        def ready() -> bool:
            self._take_frees()
            return all((i, request) in self._freed for i in range(len(self.peers)))

        return self.wait(ready, "credit", lambda t: f"{t} (decode never released request {request}'s blocks)")

    def send(self, request: int, keys: Sequence[torch.Tensor], values: Sequence[torch.Tensor], tokens: int,
             first_token: int, sampler_state: bytes = b"", block_table: Sequence[int] | None = None
             ) -> KVSendRecord:
        """Write this rank's heads of ``tokens`` cache slots (per-layer ``[heads, >= tokens, head_dim]``).
        ``block_table``: the pool blocks, in order, within the request's slot (default: the slot's first ones)."""
        layout = self.me.layout
        nb = blocks_for(tokens, layout.block_tokens)
        if nb > self.blocks_per_slot:
            raise TransferError(f"request {request}: {tokens} tokens need {nb} KV blocks, a pool slot holds "
                                f"{self.blocks_per_slot}", op="kv_send", group="kv")
        credit = self._await_free(request - self.slots) if request >= self.slots else 0.0
        slot = request % self.slots
        first_block = slot * self.blocks_per_slot
        order = list(block_table) if block_table is not None else list(range(nb))
        if len(order) != nb or not all(0 <= b < self.blocks_per_slot for b in order):
            raise TransferError(f"request {request}: block table {order[:8]} is not {nb} blocks of a "
                                f"{self.blocks_per_slot}-block slot", op="kv_send", group="kv")
        dst_blocks = [first_block + b for b in order]
        chunks = layer_chunks(layout.layers, self.chunks)
        table = b":".join(b"%d" % b for b in dst_blocks)
        handles: list[tuple[int, Any]] = []
        self._posted = handles
        nbytes = descriptors = 0
        pack_s = 0.0
        t1 = time.perf_counter()
        try:
            for c, layers in enumerate(chunks):
                # Pack chunk c while chunk c-1 drains from the socket or NIC: the staging copy overlaps the wire.
                t0 = time.perf_counter()
                pack(keys, values, tokens, self.staging, layout, layers)
                pack_s += time.perf_counter() - t0
                for i, h in handles:
                    self._state(i, h)  # progress the writes already posted (no progress thread)
                for i, peer in enumerate(self.peers):
                    writes = plan_writes(layout, peer.layout, list(range(nb)), dst_blocks, layers)
                    note = b"K%d,%d,%d,%d,%d,%s" % (request, c, len(chunks), tokens, first_token, table)
                    if sampler_state:
                        note += b"," + sampler_state.hex().encode()
                    handles.append((i, self._post(i, writes, note)))
                    nbytes += sum(w.nbytes for w in writes)
                    descriptors += len(writes)
                if self.after_chunk is not None:
                    self.after_chunk(request, c)
            pending = list(handles)

            def done() -> bool:
                nonlocal pending
                pending = [(i, h) for i, h in pending if self._state(i, h) != "DONE"]
                return not pending

            self.wait(done, "write")
        finally:
            for _, h in handles:
                try:
                    self.agent.release_xfer_handle(h)
                except Exception:  # noqa: BLE001,S110 -- a failed write's handle may refuse release
                    pass
        write_s = time.perf_counter() - t1
        self._sent.append(request)
        return KVSendRecord(request, tokens, nb, nbytes, descriptors, len(handles), pack_s, credit, write_s)

    def settle(self) -> None:
        """Wait until every write posted so far for the current request is complete."""
        self.wait(lambda: all(self._state(i, h) == "DONE" for i, h in self._posted), "write")

    def _post(self, i: int, writes: Sequence[Write], note: bytes) -> Any:
        peer = self.peers[i]
        base = self.staging.data_ptr()
        local = [(base + w.src, w.nbytes, 0) for w in writes]
        remote = [(peer.base + w.dst, w.nbytes, 0) for w in writes]
        try:
            handle = self.agent.initialize_xfer("WRITE", self.agent.get_xfer_descs(local, "DRAM"),
                                                self.agent.get_xfer_descs(remote, "DRAM"), self.names[i], note)
            status = self.agent.transfer(handle)
        except Exception as exc:  # noqa: BLE001 -- nixl raises several unrelated types
            raise self.fail("write", peer, f"posting the write failed: {exc}") from exc
        if status == "ERR":
            raise self.fail("write", peer, "UCX reported an error posting the write")
        return handle

    def _state(self, i: int, handle: Any) -> str:
        state = str(self.agent.check_xfer_state(handle))
        if state == "ERR":
            raise self.fail("write", self.peers[i], "UCX reported an error on the write")
        return state

    def drain(self) -> float:
        """Wait until the decode ranks have released every request sent (they have used all of it)."""
        def ready() -> bool:
            self._take_frees()
            return all((i, r) in self._freed for r in self._sent for i in range(len(self.peers)))

        return self.wait(ready, "drain")


class KVReceiver(_Side):
    """A decode rank's end: its registered pool and the notifications that say which blocks are complete."""

    def __init__(self, *args: Any, pool: torch.Tensor, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pool = pool
        self._chunks: dict[int, dict[tuple[int, int], list[bytes]]] = {}  # request -> (peer, chunk) -> fields
        self.used_blocks = 0
        """Blocks read out of the pool so far: only ever those of complete requests."""

    def _sort(self) -> None:
        for i, notes in enumerate(self.notes):
            for msg in notes:
                if msg[:1] == b"K":
                    parts = msg[1:].split(b",")
                    self._chunks.setdefault(int(parts[0]), {})[(i, int(parts[1]))] = parts
            notes.clear()

    def _complete(self, request: int) -> bool:
        got = self._chunks.get(request, {})
        if not got:
            return False
        total = int(next(iter(got.values()))[2])
        return all((i, c) in got for i in range(len(self.peers)) for c in range(total))

    def wait_complete(self, request: int) -> float:
        """Block until every chunk of ``request`` from every prefill peer has notified; the seconds waited.
        Nothing of the request is read before this returns."""
        def ready() -> bool:
            self._sort()
            return self._complete(request)

        def describe(text: str) -> str:
            got = self._chunks.get(request, {})
            return (f"{text}; request {request}: {len(got)} chunk notification(s) had arrived, the request was "
                    f"incomplete and none of its blocks was used ({self.used_blocks} blocks used in all)")

        return self.wait(ready, "receive", describe)

    def release(self, request: int) -> None:
        """Tell the prefill peers ``request``'s blocks may be overwritten."""
        self._chunks.pop(request, None)
        for name in self.names:
            self.agent.send_notif(name, b"F%d" % request)

    def receive(self, request: int, dtype: torch.dtype) -> KVReceived:
        """:meth:`wait_complete`, copy the request's KV out of the pool, :meth:`release` its blocks."""
        wait_s = self.wait_complete(request)
        first = next(iter(self._chunks[request].values()))
        tokens, token = int(first[3]), int(first[4])
        blocks = tuple(int(b) for b in first[5].split(b":"))
        state = bytes.fromhex(first[6].decode()) if len(first) > 6 else b""
        t0 = time.perf_counter()
        keys, values = unpack(self.pool, self.me.layout, blocks, tokens, dtype)
        unpack_s = time.perf_counter() - t0
        self.used_blocks += len(blocks)
        self.release(request)
        return KVReceived(request, tokens, token, blocks, keys, values, wait_s, unpack_s, state,
                          nbytes=len(blocks) * self.me.layout.block_bytes)
