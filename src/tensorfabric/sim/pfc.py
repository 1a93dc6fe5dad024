"""PFC mechanics: pause timing, response delay, headroom requirement and XOFF/XON thresholds.

A switch accounts the bytes it buffers per ingress port (and lossless priority). Above XOFF it sends
PAUSE upstream; the upstream egress stops after the cable delay plus the IEEE 802.3 Annex 31B response
delay, so bytes keep arriving for that long: they land in the headroom, and only when the headroom
overflows are they dropped. Below XON (XOFF minus a hysteresis offset) it sends XON (pause time 0).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Literal

from tensorfabric import roce
from tensorfabric.errors import InputError

__all__ = [
    "PAUSE_FRAME_BYTES",
    "PfcConfig",
    "pause_duration_s",
    "required_headroom_bytes",
    "response_delay_s",
]

QUANTUM_BITS = roce.PAUSE_QUANTUM_BITS
"""One pause quantum is 512 bit times (802.1Qbb)."""
MAX_QUANTA = 65535
PAUSE_FRAME_BYTES = 84
"""64-byte PAUSE frame plus preamble and inter-frame gap: 672 bit times."""
PROPAGATION_S_PER_M = 5e-9
"""Light in fibre or copper: about 5 ns per metre."""

# Annex 31B.3.7 response delay in quanta, by link rate (as tabulated in sonic-mgmt #6223 and the SONiC Lua).
_RESPONSE_QUANTA = tuple((gbps * 1e9, quanta) for gbps, quanta in sorted(roce.PAUSE_QUANTA.items()) if gbps >= 10)
_RATES = [r for r, _ in _RESPONSE_QUANTA]


def pause_duration_s(quanta: int, rate_bps: float) -> float:
    """How long ``quanta`` pause quanta last at ``rate_bps`` (65535 at 100G = 335.5 us)."""
    return quanta * QUANTUM_BITS / rate_bps


def response_delay_s(rate_bps: float) -> float:
    """Worst-case time a port takes to honour a received PAUSE, from the Annex 31B table.

    Rates between table entries use the next faster entry's quanta (more quanta, so more conservative);
    rates above 400G use the 400G entry.
    """
    i = min(bisect.bisect_left(_RATES, rate_bps), len(_RATES) - 1)
    return pause_duration_s(_RESPONSE_QUANTA[i][1], rate_bps)


def required_headroom_bytes(rate_bps: float, cable_m: float, mtu: int, step_s: float,
                            response_s: float | None = None) -> float:
    """Bytes that can still arrive after XOFF is crossed: the headroom a lossless port needs here.

    Cable round trip + response delay (``response_s``, default the Annex 31B worst case) at line rate, one
    MTU in flight at each end, the PAUSE frame, plus one simulation step on each side because the simulator
    decides and applies pause at step boundaries.
    """
    prop = cable_m * PROPAGATION_S_PER_M
    response = response_delay_s(rate_bps) if response_s is None else response_s
    in_flight_s = 2 * prop + response + 2 * step_s
    return rate_bps / 8 * in_flight_s + 2 * mtu + PAUSE_FRAME_BYTES


@dataclass(frozen=True, slots=True)
class PfcConfig:
    """Per-ingress-port PFC on the lossless priority."""

    enabled: bool = True
    priority: int = roce.LOSSLESS_PRIORITY
    threshold: Literal["static", "dynamic"] = "static"
    xoff_bytes: float = 100_000.0
    """Static XOFF per ingress port; set above Kmax/N so ECN acts before PFC."""
    xon_offset_bytes: float = 18_432.0
    """XON = XOFF minus this (two 9216-byte MTUs of hysteresis)."""
    dynamic_alpha: float = 0.125
    """Dynamic threshold: XOFF = alpha * free shared buffer (Choudhury-Hahne; HPCC sim shift 3)."""
    buffer_bytes: float = 32 * 1024 * 1024
    """Shared buffer per switch, for the dynamic threshold."""
    headroom_bytes: float | None = None
    """Headroom per ingress port; None sizes each port from :func:`required_headroom_bytes`."""
    pause_quanta: int = MAX_QUANTA
    """Pause time carried by each XOFF frame; a paused port refreshes it at half this interval."""
    response_s: float | None = None
    """How long a port goes on sending after a PAUSE reaches it; None: the Annex 31B worst case for its
    rate (2 us at 100G). A port that only finishes the frame it is sending takes one MTU's wire time."""

    def __post_init__(self) -> None:
        if self.threshold not in ("static", "dynamic"):
            raise InputError(f"pfc threshold: {self.threshold!r} is not one of static, dynamic")
        if self.xoff_bytes <= 0:
            raise InputError(f"xoff: {self.xoff_bytes!r} bytes must be positive")
        if self.xon_offset_bytes < 0 or self.xon_offset_bytes >= self.xoff_bytes:
            raise InputError(f"xon offset: {self.xon_offset_bytes!r} bytes must be in [0, XOFF)")
        if self.headroom_bytes is not None and self.headroom_bytes < 0:
            raise InputError(f"headroom: {self.headroom_bytes!r} bytes must not be negative")
        if not 0 < self.dynamic_alpha <= 16:
            raise InputError(f"dynamic alpha: {self.dynamic_alpha!r} must be in (0, 16]")
        if not 0 <= self.priority <= 7:
            raise InputError(f"priority: {self.priority!r} must be 0..7")
        if self.response_s is not None and not (math.isfinite(self.response_s) and 0 <= self.response_s <= 1e-3):
            raise InputError(f"pause response: {self.response_s!r} s must be in [0, 1 ms]")
        if not 1 <= self.pause_quanta <= MAX_QUANTA:
            raise InputError(f"pause quanta: {self.pause_quanta!r} must be 1..{MAX_QUANTA}")
