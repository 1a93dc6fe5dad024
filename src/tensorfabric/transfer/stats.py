"""Per-group transfer statistics: what every collective moved and how long it took.

Recording sits on the hot path of every collective, so it is a dict lookup and four additions on a mutable
accumulator; readers take a frozen :class:`OpStat` snapshot. ``bytes`` counts the user's tensor (elements x
element size, what nccl-tests calls the size), ``wire_bytes`` the encoded form a codec puts on the wire
(payload + scales; equal to ``bytes`` without a codec). ``seconds`` is wall time from the call to completion
(for async calls: to the end of ``wait()``).

Listeners (``GroupStats.subscribe``) receive every record as it happens; this is how the telemetry exporter
and the inference report observe transfers without transfer importing either of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["GroupStats", "OpStat", "Listener"]

Listener = Callable[[str, str, int, int, float], None]
"""Called as ``listener(op, codec, nbytes, wire_bytes, seconds)`` after each recorded call."""


@dataclass(frozen=True)
class OpStat:
    """Totals for one (op, codec) pair of one group."""

    op: str
    """Collective name: ``all_reduce``, ``all_gather``, ``send`` ..."""
    codec: str
    """Codec name, ``none`` when uncompressed."""
    calls: int
    bytes: int
    """Sum of the user tensors' sizes in bytes."""
    wire_bytes: int
    """Sum of the encoded sizes in bytes (payload + scales); equals ``bytes`` without a codec."""
    seconds: float
    wait_seconds: float = 0.0
    """Of ``seconds``, the time blocked for peers' data (the slowest peer's lateness plus wire latency);
    measured by the NIXL engine only (0 for calls through torch.distributed, which does not expose it)."""
    nixl_calls: int = 0
    """How many of ``calls`` went through the NIXL engine."""

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "codec": self.codec, "calls": self.calls, "bytes": self.bytes,
                "wire_bytes": self.wire_bytes, "seconds": self.seconds, "wait_seconds": self.wait_seconds,
                "nixl_calls": self.nixl_calls}


class GroupStats:
    """Mutable accumulator owned by one :class:`~tensorfabric.transfer.group.Group`."""

    __slots__ = ("_totals", "_listeners", "_waits", "_calls")

    def __init__(self) -> None:
        # (op, codec) -> [calls, bytes, wire_bytes, seconds]; a list, not a dataclass, to keep record() cheap.
        self._totals: dict[tuple[str, str], list[Any]] = {}
        self._listeners: list[Listener] = []
        self._waits: dict[str, list[Any]] = {}  # op -> [nixl calls, seconds waited]
        self._calls: list[tuple[str, float]] | None = None  # (op, start) of every call, while tracking

    def track_calls(self, on: bool = True) -> None:
        """Keep (op, start time) of every call from now on (``time.perf_counter``, i.e. CLOCK_MONOTONIC on
        Linux): what :func:`tensorfabric.transfer.arrivals.lateness` compares across ranks."""
        self._calls = [] if on else None

    def calls(self) -> list[tuple[str, float]]:
        """The tracked (op, start) pairs in call order (empty when not tracking)."""
        return list(self._calls or ())

    def record(self, op: str, codec: str, nbytes: int, wire_bytes: int, seconds: float) -> None:
        entry = self._totals.get((op, codec))
        if entry is None:
            entry = self._totals[(op, codec)] = [0, 0, 0, 0.0]
        entry[0] += 1
        entry[1] += nbytes
        entry[2] += wire_bytes
        entry[3] += seconds
        if self._calls is not None:
            self._calls.append((op, time.perf_counter() - seconds))
        for listener in self._listeners:
            listener(op, codec, nbytes, wire_bytes, seconds)

    def record_wait(self, op: str, seconds: float) -> None:
        """Mark the last recorded ``op`` call as one through NIXL that waited ``seconds`` for peers."""
        entry = self._waits.get(op)
        if entry is None:
            entry = self._waits[op] = [0, 0.0]
        entry[0] += 1
        entry[1] += seconds

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def snapshot(self) -> list[OpStat]:
        """Frozen totals, sorted by op then codec."""
        return [self.get(op, codec) for op, codec in sorted(self._totals)]

    def get(self, op: str, codec: str = "none") -> OpStat:
        c, b, w, s = self._totals.get((op, codec), (0, 0, 0, 0.0))
        # Waits are only ever recorded for uncompressed calls (NIXL carries no codec).
        calls, waited = self._waits.get(op, (0, 0.0)) if codec == "none" else (0, 0.0)
        return OpStat(op, codec, int(c), int(b), int(w), float(s), float(waited), int(calls))

    def reset(self) -> None:
        self._totals.clear()
        self._waits.clear()
        if self._calls is not None:
            self._calls.clear()

    def to_dict(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.snapshot()]
