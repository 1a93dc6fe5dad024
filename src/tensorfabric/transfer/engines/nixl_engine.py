"""The NIXL engine: one-sided UCX writes plus a notification, for the small tensors that set decode speed.

Why: a 4 KiB Gloo all_reduce between two local processes costs 100-290 µs (two TCP message rounds through
Gloo's ring, with its own threads), the same exchange as a NIXL WRITE + notification costs 10-20 µs (see
docs/transfer.md for the measured table). NIXL is the engine vLLM, SGLang and Dynamo move KV blocks with; it
sits on UCX, which picks shared memory/CMA on one host, TCP between hosts and RDMA verbs on RoCE NICs.

Shape of one engine (one per :class:`~tensorfabric.transfer.group.Group` of two or more ranks):

* an agent per rank, created at ``nixl_connect.open_engine`` with **no progress thread** (this process
  polls; a progress thread would fight the rank for one of very few cores), the UCX backend only;
* a receive region registered once: ``slots`` slots of ``slot_bytes`` for every peer (the peer writes its
  k-th message into slot ``k % slots`` of the region reserved for it), and a send staging region of the same
  shape (UCX can only write from registered memory, and a copy of at most ``slot_bytes`` costs microseconds);
* metadata (agent blob + region address) exchanged over the group's existing process group, then every
  endpoint connected and one message sent both ways, because the first transfer to a peer pays 9-23 ms of
  connection set-up that must not land in anyone's first decode token;
* credit flow control: a sender never has more than ``slots`` unconsumed messages at a peer. Consumption is
  acknowledged by piggy-backing the count on every data notification and, only when a rank is about to block,
  by a standalone ``A<count>`` notification, so a blocked rank has always told everyone what it has freed.

Notification format (bytes): ``D<seq>,<nbytes>,<acked>`` after a WRITE into slot ``seq % slots``;
``I<seq>,<acked>,<payload>`` an inline message (the data rides in the notification, no slot);
``A<acked>`` credit only; ``S<acked>`` credit that closes an inline exchange. ``acked`` counts the messages of
the notified peer this rank has consumed.

Why data rides inside a notification only in the bulk exchanges of the compressed collectives. Over TCP an
inline message is one one-way trip where a WRITE is three: the WRITE completes only after the target's
acknowledgement, NIXL sends its notification after that, and on a shaped link both the acknowledgement and
the notification queue behind the data the ranks are sending each other (measured in the 2x1gbit lab at 4
KiB: 45 µs inline vs 226 µs; a 576 KiB int8 all_reduce on 3x1gbit: 2.4-2.6 ms against 2.9-3.2 ms). But a
standalone notification (``genNotif``) leaves this process only while the sender keeps progressing its
worker (UCX's TCP transport keeps what the socket does not take at once in its own buffer): a sender that
returns to compute, or to a torch collective, right after it could hold its peer until its next NIXL
call - a deadlock before a torch collective. A WRITE's own notification is delivered without that (tested
with a root that sleeps after posting, over shared memory and over the lab's TCP), so the small collectives
of decode keep WRITEs. An engine that has sent or received inline messages is *unsettled*; three rules make
that safe:

* a rank blocked in any engine also progresses every unsettled engine, so no wait of ours holds back inline
  bytes a peer waits for;
* before any torch.distributed call (:func:`settle_all`, which this module hands to
  :func:`tensorfabric.transfer.engines.base.on_settle`, so every engine's torch.distributed call and the
  teardown run it) each unsettled engine runs a closing handshake with every peer it exchanged inline messages
  with, after which that peer has consumed them and holds our credit. Per pair the lower rank sends its
  ``S`` first; the higher one waits for it and until the lower one has consumed all its messages, then
  answers with its own ``S``, into a stream with nothing else in it (the same situation as a WRITE's
  notification), and leaves; the lower one leaves on that answer, which also proves its own ``S`` arrived.
  Nobody sends to a peer that is not waiting for it, so a peer that has torn its engine down is never
  written to;
* compute is finite, so a peer waiting for our message meanwhile waits at most until our next call.

In the prefill loop the next layer's all_reduce carries the credit, so the handshake runs once, before the
first torch collective after it.

Failure: every wait is bounded by ``timeout_s``; a peer on this host whose process is gone is noticed within
``_LIVENESS_S`` and named; UCX errors on a transfer become TransferError. The backend runs with
``ucx_error_handling_mode=none`` by default: it lets UCX use shared-memory lanes between local ranks (the
``peer`` mode excludes them and falls back to TCP loopback, twice the latency), and failure detection does not
depend on UCX because of the checks above.

Bring-up (agent, regions, metadata, the first message each way) is
:mod:`~tensorfabric.transfer.engines.nixl_connect`'s; UCX's environment and log, and NIXL's logging,
:mod:`~tensorfabric.transfer.engines.nixl_ucx`'s.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import TransferError
from tensorfabric.host.ucx_log import UcxTransport, classify, parse_ucx_log
from tensorfabric.transfer.engines.base import on_settle
from tensorfabric.transfer.engines.nixl_ucx import available, prepare_ucx_env, read_ucx_log
from tensorfabric.transfer.failures import process_gone

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.records import RankEntry

# available, prepare_ucx_env and read_ucx_log live in nixl_ucx; tests and the disaggregated runner import them
# from here.
__all__ = ["DEFAULT_SLOTS", "ERROR_MODES", "NixlEngine", "available", "prepare_ucx_env", "read_ucx_log",
           "settle_all"]

DEFAULT_SLOTS = 8
"""Messages in flight per peer before a sender waits for credit: four collectives of recursive doubling or
eight pipelined sends without a round trip."""
ERROR_MODES = ("none", "peer")
_SPIN_S = 5e-3
"""Busy-poll (yielding the core between polls) this long before sleeping 20 µs between polls. Decode waits
are the peer's compute skew plus scheduling noise: in three same-run pairs of `tensorfabric run` (tp=2,
load 5-6) a 5 ms spin gave 104-218 tokens/s where a 200 µs spin gave 73-151, because a sleeping rank wakes
on a timer, ~60-100 µs late. Past 5 ms the peer is genuinely busy (a pipeline stage computing) and polling
would take CPU it may need."""
_LIVENESS_S = 0.2
"""How often a waiting rank checks that its local peers' processes still exist (a /proc read)."""


def _size_class(nbytes: int) -> int:
    """Bytes actually written for a message of ``nbytes``: eight classes per octave, at most 12.5 % extra, so
    a handful of cached transfer handles serve every decode shape."""
    if nbytes <= 256:
        return 256
    step = 1 << (nbytes.bit_length() - 4)
    return -(-nbytes // step) * step


class NixlEngine:
    """Point-to-point messages between the ranks of one group (group ranks, not global ones)."""

    def __init__(self, *, agent: Any, rank: int, peers: Sequence[str | None], table: Sequence[RankEntry],
                 host: str, recv: torch.Tensor, send: torch.Tensor, remote_recv: Sequence[int], slot_bytes: int,
                 slots: int, timeout_s: float, group: str, name: str, log_path: str | None) -> None:
        size = len(peers)
        self.agent, self.rank, self.size, self.group = agent, rank, size, group
        self.max_bytes, self.slots, self.timeout_s = slot_bytes, slots, timeout_s
        self._peers = list(peers)
        self._peer_of = {name: p for p, name in enumerate(peers) if name is not None}
        self._table, self._host = tuple(table), host
        self._recv, self._send, self._remote_recv = recv, send, list(remote_recv)
        self._sent = [0] * size       # messages posted to each peer
        self._credit = [0] * size     # of those, how many the peer has consumed (its last ack)
        self._taken = [0] * size      # messages consumed from each peer
        self._acked = [0] * size      # of those, how many we have told the peer about
        # peer -> seq -> nbytes in its slot, or the payload of an inline message
        self._arrived: list[dict[int, int | bytearray]] = [{} for _ in range(size)]
        self._inline_upto = [0] * size  # per peer: 1 + the sequence number of our last inline message
        self._inline_with: set[int] = set()  # peers we sent inline messages to or got some from, unsettled
        self._round = [0] * size  # closing handshakes begun with each peer
        self._settled = [0] * size  # closing handshake messages (S) received from each peer
        self._dlists: dict[tuple[int, int], tuple[Any, Any]] = {}
        self._handles: dict[tuple[int, int, int], Any] = {}
        self._inflight: list[tuple[int, Any]] = []
        self._scratch: dict[str, torch.Tensor] = {}
        self.name, self.log_path = name, log_path
        """The agent's name (UCX's worker name in its log) and where UCX logs (``%p``: the pid), if captured."""
        self.spin_s = _SPIN_S
        """How long a wait busy-polls before it sleeps between polls (see _SPIN_S; callers that move bulk data
        may shorten it, :mod:`tensorfabric.transfer.engines.nixl_bulk`)."""
        self.wait_s = 0.0
        """Seconds spent blocked for peers (their lateness plus wire latency) since the last reset."""
        self.inline_bulk = False
        """Whether bulk exchanges (:mod:`tensorfabric.transfer.engines.nixl_bulk`) send their bytes inline: set
        at ``nixl_connect.open_engine`` when UCX reports TCP, where an inline message is one trip instead of
        three (the module docstring). Over shared memory a 576 KiB int8 all_reduce on three local ranks took
        1.88 ms inline against 1.77 ms with WRITEs (``benchmarks/compressed_routes.py``, medians of 5)."""
        self.owned_dir: str | None = None
        """The directory of ``log_path`` when this (world) engine made it: removed at :meth:`close`."""

    # -- the two primitives -------------------------------------------------------------------------------
    def put(self, peer: int, data: torch.Tensor | Sequence[torch.Tensor], op: str, inline: bool = False) -> None:
        """Write ``data`` (a contiguous CPU tensor, or several sent back to back as one message; at most
        ``max_bytes`` in all) to ``peer``'s next slot; ``inline``: send it inside the notification instead,
        which leaves the engine unsettled until :meth:`settle` (:func:`settle_all`; module docstring)."""
        seq = self._sent[peer]
        if seq - self._credit[peer] >= self.slots:
            self._block(lambda: seq - self._credit[peer] < self.slots, op, peer)
        parts = (data,) if not isinstance(data, (list, tuple)) else data
        if inline:
            head = b"I%d,%d," % (seq, self._taken[peer])
            self._acked[peer] = self._taken[peer]
            self._notify(peer, b"".join([head, *(part.reshape(-1).view(_u8()).numpy().data for part in parts)]),
                         op, "an inline message")
            self._sent[peer] = seq + 1
            self._inline_upto[peer] = seq + 1
            self._inline_with.add(peer)
            _UNSETTLED.add(self)
            self._progress(op)
            return
        slot = seq % self.slots
        base = end = (peer * self.slots + slot) * self.max_bytes
        for part in parts:
            src = part.reshape(-1).view(_u8())
            self._send[end:end + src.numel()].copy_(src)
            end += src.numel()
        n = end - base
        handle, posted = self._handle(peer, slot, _size_class(n))
        if posted:
            self._settle(handle, op, peer)
        self._acked[peer] = self._taken[peer]
        try:
            status = self.agent.transfer(handle, b"D%d,%d,%d" % (seq, n, self._taken[peer]))
        except Exception as exc:  # noqa: BLE001 -- nixl raises its own nixlBackendError/RuntimeError types
            raise self._fail(op, peer, f"posting a write failed: {exc}") from exc
        if status == "ERR":
            raise self._fail(op, peer, "UCX reported an error posting the write")
        self._sent[peer] = seq + 1
        self._progress(op)
        if status != "DONE":
            self._inflight.append((peer, handle))

    def take(self, peer: int, op: str) -> torch.Tensor:
        """The next message from ``peer`` as a uint8 view into its slot; call :meth:`release` after copying."""
        seq = self._taken[peer]
        if seq not in self._arrived[peer]:
            self._poll()
            if seq not in self._arrived[peer]:
                self._block(lambda: seq in self._arrived[peer], op, peer)
        else:
            if self._credit[peer] < self._inline_upto[peer]:
                self._poll()  # progresses the worker, which sends what our inline messages left queued
            self._progress(op)
        got = self._arrived[peer].pop(seq)
        if isinstance(got, bytearray):
            import torch

            return torch.frombuffer(got, dtype=torch.uint8)
        base = (peer * self.slots + seq % self.slots) * self.max_bytes
        return self._recv[base:base + got]

    def release(self, peer: int) -> None:
        self._taken[peer] += 1

    def finish(self, op: str) -> None:
        """Drive this rank's own writes to completion (their notifications may already be delivered). Inline
        messages are left to :meth:`settle` (module docstring)."""
        while self._inflight:
            peer, handle = self._inflight.pop()
            self._settle(handle, op, peer)

    def settle(self, op: str = "settle") -> None:
        """The closing handshake after inline messages (module docstring): when it returns every peer we
        exchanged inline messages with has consumed ours and knows what we consumed of its. Collective over
        those peers (they call it too); a no-op on a settled engine."""
        if not self._inline_with:
            _UNSETTLED.discard(self)
            return
        self.finish(op)
        self._poll()  # an inline message polled only now still makes its sender a pair
        pairs = sorted(self._inline_with)
        for p in pairs:
            self._round[p] += 1
        lower = [p for p in pairs if p < self.rank]
        for p in pairs:
            if p > self.rank:
                self._send_settle(p, op)

        def done() -> bool:
            for p in list(lower):
                # Its S: everything of ours it will consume is consumed, so this S travels alone.
                if self._settled[p] >= self._round[p] and self._credit[p] >= self._sent[p]:
                    self._send_settle(p, op)
                    lower.remove(p)
            return not lower and all(self._settled[p] >= self._round[p] for p in pairs)

        if not done():
            self._block(done, op, pairs[0], acks=False)
        self._inline_with.clear()
        _UNSETTLED.discard(self)

    def _send_settle(self, peer: int, op: str) -> None:
        self._acked[peer] = self._taken[peer]
        self._notify(peer, b"S%d" % self._taken[peer], op, "the closing handshake")

    def _notify(self, peer: int, msg: bytes, op: str, what: str) -> None:
        try:
            self.agent.send_notif(self._peers[peer], msg)
        except Exception as exc:  # noqa: BLE001 -- nixl raises its own nixlBackendError/RuntimeError types
            raise self._fail(op, peer, f"sending {what} failed: {exc}") from exc

    def scratch(self, name: str, nbytes: int) -> torch.Tensor:
        """A uint8 buffer of ``nbytes`` kept under ``name`` for the next call: the compressed collectives run
        once per layer, and fresh buffers of tens of KiB cost allocator work and page faults every time."""
        import torch

        buf = self._scratch.get(name)
        if buf is None or buf.numel() < nbytes:
            buf = self._scratch[name] = torch.empty(nbytes, dtype=torch.uint8)
        return buf[:nbytes]

    # -- plumbing -----------------------------------------------------------------------------------------
    def _handle(self, peer: int, slot: int, nbytes: int) -> tuple[Any, bool]:
        """The cached WRITE handle for this slot and size class, and whether it was posted before (NIXL
        refuses a state query on a handle never posted)."""
        key = (peer, slot, nbytes)
        handle = self._handles.get(key)
        if handle is not None:
            return handle, True
        local, remote = self._dlist(peer, nbytes)
        handle = self._handles[key] = self.agent.make_prepped_xfer("WRITE", local, [slot], remote, [slot])
        return handle, False

    def _dlist(self, peer: int, nbytes: int) -> tuple[Any, Any]:
        key = (peer, nbytes)
        pair = self._dlists.get(key)
        if pair is None:
            send0 = self._send.data_ptr() + peer * self.slots * self.max_bytes
            recv0 = self._remote_recv[peer] + self.rank * self.slots * self.max_bytes
            local = [(send0 + s * self.max_bytes, nbytes, 0) for s in range(self.slots)]
            remote = [(recv0 + s * self.max_bytes, nbytes, 0) for s in range(self.slots)]
            pair = self._dlists[key] = (self.agent.prep_xfer_dlist("NIXL_INIT_AGENT", local, "DRAM"),
                                        self.agent.prep_xfer_dlist(self._peers[peer], remote, "DRAM"))
        return pair

    def _settle(self, handle: Any, op: str, peer: int) -> None:
        """Wait until a (possibly reused) transfer handle is idle."""
        if any(h is handle for _, h in self._inflight):
            self._inflight = [(p, h) for p, h in self._inflight if h is not handle]
        state = self.agent.check_xfer_state(handle)
        if state == "PROC":
            self._block(lambda: self._state(handle, op, peer) != "PROC", op, peer)
        elif state == "ERR":
            raise self._fail(op, peer, "UCX reported an error on a write")

    def _state(self, handle: Any, op: str, peer: int) -> str:
        state = str(self.agent.check_xfer_state(handle))
        if state == "ERR":
            raise self._fail(op, peer, "UCX reported an error on a write")
        return state

    def _progress(self, op: str) -> None:
        """Check our writes still in flight. NIXL sends a write's notification from the state check that sees
        the write complete, and there is no progress thread: a write's peer learns of it only when the writer
        next checks. So every put and take checks too, not only a blocked wait; otherwise a rank that finds
        its messages already there and goes on computing holds back the notifications of the writes it has
        just posted (3 ranks, 3x1gbit lab: a peer saw a 26 KB write 1.4 ms after it was posted)."""
        if self._inflight:
            self._inflight = [(p, h) for p, h in self._inflight if self._state(h, op, p) == "PROC"]

    def _poll(self) -> None:
        for name, msgs in self.agent.get_new_notifs().items():
            peer = self._peer_of.get(name)
            if peer is None:
                continue
            for msg in msgs:
                kind = msg[:1]
                if kind == b"D":
                    seq, n, acked = (int(x) for x in msg[1:].split(b","))
                    self._arrived[peer][seq] = n
                elif kind == b"I":
                    first = msg.index(b",", 1)
                    second = msg.index(b",", first + 1)
                    seq, acked = int(msg[1:first]), int(msg[first + 1:second])
                    self._arrived[peer][seq] = bytearray(memoryview(msg)[second + 1:])
                    self._inline_with.add(peer)  # the sender will settle with us
                    _UNSETTLED.add(self)
                elif kind == b"S":
                    acked = int(msg[1:])
                    self._settled[peer] += 1
                else:
                    acked = int(msg[1:])
                self._credit[peer] = max(self._credit[peer], acked)

    def _send_ack(self, peer: int) -> None:
        if self._taken[peer] > self._acked[peer]:
            self._acked[peer] = self._taken[peer]
            self._notify(peer, b"A%d" % self._taken[peer], "credit", "credit")

    def _flush_acks(self) -> None:
        for peer, name in enumerate(self._peers):
            if name is not None:
                self._send_ack(peer)

    def _block(self, ready: Callable[[], bool], op: str, peer: int, acks: bool = True) -> None:
        """Poll until ``ready()``; bounded by the timeout, watching the peer's process. ``acks``: first tell
        every peer what we have consumed (a blocked rank must not hold credit back); the closing handshake
        orders its credit itself. Other unsettled engines are progressed meanwhile."""
        if acks:
            self._flush_acks()
        others = [e for e in _UNSETTLED if e is not self]  # progressed, so our inline bytes there move
        t0 = time.perf_counter()
        deadline = t0 + self.timeout_s
        next_check = t0 + _LIVENESS_S
        try:
            while True:
                self._poll()
                self._progress(op)
                for e in others:
                    e._poll()
                if ready():
                    return
                now = time.perf_counter()
                if now >= next_check:
                    next_check = now + _LIVENESS_S
                    self._check_alive(op, peer)
                    if now >= deadline:
                        raise self._fail(op, peer, f"timed out after {self.timeout_s:g} s waiting for the peer")
                # Give the core away: with ranks x threads close to the core count the peer may be
                # waiting for this very CPU to make the progress we are spinning on.
                if now - t0 < self.spin_s:
                    os.sched_yield()
                else:
                    time.sleep(20e-6)
        finally:
            self.wait_s += time.perf_counter() - t0

    def _check_alive(self, op: str, peer: int) -> None:
        for p, entry in enumerate(self._table):
            if p != self.rank and entry.host == self._host and process_gone(entry.pid):
                raise self._fail(op, p, f"its process {entry.pid} exited")

    def _fail(self, op: str, peer: int, why: str) -> TransferError:
        who = self._table[peer].global_rank
        return TransferError(f"{op} on group {self.group!r} through nixl failed (timeout {self.timeout_s:g} s); "
                             f"suspect rank {who}: {why}", op=op, group=self.group, peer=who)

    def ucx_log(self) -> str:
        """UCX's log of this process so far ('' when it was not captured)."""
        return read_ucx_log(self.log_path)

    def transport(self) -> UcxTransport:
        """The data path UCX reports for this agent's endpoints."""
        return classify(parse_ucx_log(self.ucx_log(), worker=self.name))

    def close(self) -> None:
        """Release transfer handles and the agent's registrations (best effort: the peers may be gone)."""
        _UNSETTLED.discard(self)
        for handle in self._handles.values():
            try:
                handle.release()
            except Exception:  # noqa: BLE001,S110 -- teardown after a failed peer must not raise
                pass
        self._handles.clear()
        self._dlists.clear()
        if self.owned_dir is not None:
            import shutil

            shutil.rmtree(self.owned_dir, ignore_errors=True)
            self.owned_dir = None


_UNSETTLED: set[NixlEngine] = set()
"""This process's engines with inline messages not yet closed by a handshake (module docstring)."""


def settle_all(op: str = "settle") -> None:
    """Run the closing handshake on every unsettled engine of this process: call it before any
    torch.distributed call (its peers do the same, so the handshakes meet)."""
    for engine in sorted(_UNSETTLED, key=lambda e: e.group):
        engine.settle(op)


on_settle(settle_all)


def _u8() -> Any:
    import torch

    return torch.uint8
