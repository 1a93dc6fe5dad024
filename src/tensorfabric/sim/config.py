"""SimConfig: everything one simulation run needs besides the fabric and the flows."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from tensorfabric.errors import InputError
from tensorfabric.sim.dcqcn import FirmwareDcqcn, PaperDcqcn
from tensorfabric.sim.ecn import EcnConfig
from tensorfabric.sim.engine import ENGINE_NAMES
from tensorfabric.sim.pfc import PfcConfig
from tensorfabric.sim.reaction import REACTION_POINTS

__all__ = ["MAX_STEP_BYTES", "MAX_STEP_S", "SimConfig"]

MAX_STEP_BYTES = 64 * 1024
"""A step may move at most this much per link: finer than a port's headroom (~37-87 KB at 100G), so pause
can react within a step, and finer than typical Kmin..Kmax ranges, so marking sees the queue grow."""
MAX_STEP_S = 10e-6
"""Explicit Euler on the DCQCN fluid model needs steps well below its 50-55 us timers."""

# The types spell the names for mypy; the registries hold them (tests/sim/test_sim_engines.py checks they agree).
CongestionControl = Literal["paper", "firmware", "none"]
EngineName = Literal["auto", "events", "stepped"]


@dataclass(frozen=True, slots=True)
class SimConfig:
    step_s: float = 1e-6
    duration_s: float = 10e-3
    dcqcn: CongestionControl = "firmware"
    paper: PaperDcqcn = field(default_factory=PaperDcqcn)
    firmware: FirmwareDcqcn = field(default_factory=FirmwareDcqcn)
    ecn: EcnConfig = field(default_factory=EcnConfig)
    pfc: PfcConfig = field(default_factory=PfcConfig)
    mtu: int = 4096
    """Packet size for packet counters and the headroom's in-flight MTUs."""
    header_bytes: int = 82
    """Wire bytes each MTU-sized packet carries besides its payload: Ethernet 14 + FCS 4, IPv4 20, UDP 8,
    BTH 12, ICRC 4, preamble and inter-frame gap 20. Links carry payload at rate x mtu / (mtu + header)."""
    ack_bytes: int = 0
    """Wire bytes of the acknowledgement each delivered packet sends back along the reverse path (0: ACKs
    coalesced away); they take that share of the reverse links' capacity."""
    nic_delay_s: float = 1e-6
    """Notification-to-reaction processing added to the path round trip in the DCQCN feedback delay."""
    seed: int = 0
    records: int = 400
    """Time-series samples kept over the run (queues, pause state, rates)."""
    counter_interval_s: float | None = None
    """Snapshot counters this often for the Sample stream; None keeps no counter stream."""
    stuck_nics: tuple[str, ...] = ()
    """Hosts whose NIC stops draining and sends XOFF without end (pause-storm source)."""
    failed_links: tuple[tuple[str, str], ...] = ()
    stop_when_idle: bool = True
    """End as soon as every flow has finished instead of running the whole duration."""
    engine: EngineName = "auto"
    """``stepped``: the time-stepped engine; ``events``: PFC steady state from flow event to flow event
    (:mod:`tensorfabric.sim.events`); ``auto``: events where :func:`tensorfabric.sim.events.applies` holds
    (no congestion control, no ECN, lossless static PFC, no head-of-line coupling), stepped otherwise."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.step_s) and self.step_s > 0):
            raise InputError(f"step: {self.step_s!r} must be a positive duration such as '1us'")
        if self.step_s > MAX_STEP_S:
            raise InputError(f"step: {self.step_s * 1e6:g} us is too coarse; DCQCN timers need a step of at most "
                             f"{MAX_STEP_S * 1e6:g} us (e.g. --step 1us)")
        if not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise InputError(f"duration: {self.duration_s!r} must be a positive duration such as '10ms'")
        if self.duration_s / self.step_s > 50_000_000:
            raise InputError(f"duration {self.duration_s}s / step {self.step_s}s is over 5e7 steps; use a shorter "
                             "duration or a coarser step")
        if self.engine not in ENGINE_NAMES:
            raise InputError(f"engine: {self.engine!r} is not one of {', '.join(ENGINE_NAMES)}")
        if self.dcqcn not in REACTION_POINTS:
            raise InputError(f"dcqcn: {self.dcqcn!r} is not one of {', '.join(REACTION_POINTS.names())}")
        if self.header_bytes < 0 or self.ack_bytes < 0:
            raise InputError(f"header {self.header_bytes!r} and ack {self.ack_bytes!r} bytes must not be negative")
        if self.mtu < 64 or self.records < 2:
            raise InputError(f"mtu {self.mtu!r} must be >= 64 bytes and records {self.records!r} >= 2")
        if self.counter_interval_s is not None and self.counter_interval_s < self.step_s:
            raise InputError(f"counter interval {self.counter_interval_s!r}s must be at least one step")

    def check_rate(self, rate_bps: float) -> None:
        """A step is too coarse for a link when one step moves more than MAX_STEP_BYTES over it."""
        per_step = rate_bps / 8 * self.step_s
        if per_step > MAX_STEP_BYTES:
            finest = MAX_STEP_BYTES * 8 / rate_bps
            raise InputError(
                f"step: {self.step_s * 1e6:g} us moves {per_step / 1024:.0f} KiB per step at {rate_bps / 1e9:g}G, "
                f"over the {MAX_STEP_BYTES // 1024} KiB limit; use --step {finest * 1e6:.2g}us or finer")
