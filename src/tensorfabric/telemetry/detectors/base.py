"""What every detector shares: the Detector record, the thresholds and small helpers over a Window.

Thresholds come from the reference (telemetry.md section 6); those marked "proposal" there need tuning on real
data, which is why every one of them is a field here rather than a constant in a detector.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from tensorfabric import roce
from tensorfabric.samples import Alert
from tensorfabric.telemetry.window import Labels, Window
from tensorfabric.topology import Endpoint

__all__ = ["Detector", "Thresholds", "paused_fractions"]

DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every tunable of every detector, with the reference's defaults."""

    lossless_priorities: tuple[str, ...] = tuple(str(p) for p in roce.SONIC_LOSSLESS_PRIORITIES)
    storm_tx_fraction: float = 0.9
    """A port sending pause this share of an interval is storming (NIC watchdog acts at 100 ms of stall)."""
    victim_rx_fraction: float = 0.9
    """R3: paused by the peer this share of the interval, with no XON transitions and no dequeue."""
    origin_tx_fraction: float = 0.9
    origin_rx_max_fraction: float = 0.05
    origin_victim_rx_fraction: float = 0.5
    spread_fraction: float = 0.05
    """R5 theta: a port both receiving and sending pause above this share is relaying congestion."""
    spread_min_ports: int = 2
    deadlock_fraction: float = 0.99
    flap_restores: int = 10
    """R2: more watchdog restorations than this within ``flap_window_s`` is flapping (sonic-buildimage#29203)."""
    flap_window_s: float = 1200.0
    retrans_baseline_per_s: float = 1.0
    ecn_min_marks: float = 10.0
    pause_without_ecn_fraction: float = 0.05
    capacity_budget_fraction: float = 0.05
    """Pause-time fraction the operator accepts on a lossless priority (proposal)."""
    capacity_horizon_s: float = 14 * DAY_S
    capacity_min_history_s: float = 2 * DAY_S
    capacity_step_s: float = 3600.0
    corrected_ber_max: float = 1e-5
    flaps_critical: int = 3
    links: tuple[tuple[Endpoint, Endpoint], ...] = field(default=())
    """Cabling (device = the ``host`` label, port = the ``port`` label) for the deadlock cycle check."""


@dataclass(frozen=True, slots=True)
class Detector:
    """A named pure function from a window of samples to alerts. ``lookback_s`` is how much history it reads."""

    name: str
    lookback_s: float
    detect: Callable[[Window, Thresholds], list[Alert]]
    long_metrics: tuple[str, ...] = ()
    """Metrics this detector needs beyond the short window (kept downsampled by the engine)."""
    long_series: Callable[[Labels, Thresholds], bool] | None = None
    """Which series of ``long_metrics`` it reads (None: all of them); the engine keeps only those downsampled,
    since two weeks of points for series nobody reads cost memory and garbage-collector time on every poll."""
    every_s: float = 0.0
    """Re-run at most this often (a trend over days does not change between 15-second polls)."""


def paused_fractions(window: Window, direction: str, intervals: int = 1) -> list[tuple[Labels, float]]:
    """(labels, paused share of the last intervals) for every pause-duration series in ``direction``."""
    key = ("paused_fractions", direction, intervals)
    cached = window.memo.get(key)
    if cached is None:
        cached = []
        if intervals == 1:  # what every detector asks for: all series' last intervals, computed once
            for labels, increase, seconds in window.last_increases("roce_pfc_paused_seconds_total",
                                                                   direction=direction):
                if seconds > 0:  # a share of time: clamped to [0, 1] whatever the counter did
                    cached.append((labels, min(max(increase / seconds, 0.0), 1.0)))
        else:
            for labels, _ in window.series("roce_pfc_paused_seconds_total", direction=direction):
                fraction = window.rate("roce_pfc_paused_seconds_total", labels, intervals)
                if fraction is not None:
                    cached.append((labels, min(max(fraction, 0.0), 1.0)))
        window.memo[key] = cached
    return list(cached)


@lru_cache(maxsize=1 << 16)  # pure, and detectors ask it for the same label tuples on every poll
def without(labels: Labels, *keys: str) -> Labels:
    return tuple((k, v) for k, v in labels if k not in keys)
