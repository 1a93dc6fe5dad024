"""Congestion spreading (R5): ports that both receive and send pause are relaying congestion hop by hop.

Pause interval, not frame count, is the severity signal (Guo et al. 2016). The relay count is computed for each
of the last three intervals; a count that keeps growing is reported as critical.
"""

from __future__ import annotations

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, without
from tensorfabric.telemetry.window import Labels, Window, subject_of

__all__ = ["DETECTOR", "detect"]


def _relays_per_interval(window: Window, limits: Thresholds, intervals: int = 3) -> list[set[Labels]]:
    """Ports relaying pause in each of the last ``intervals`` intervals, oldest first."""
    shares: dict[str, list[dict[Labels, float]]] = {"rx": [{} for _ in range(intervals)],
                                                     "tx": [{} for _ in range(intervals)]}
    for direction, per_interval in shares.items():
        for labels, steps in window.recent_increases("roce_pfc_paused_seconds_total", intervals, direction=direction):
            port = without(labels, "direction")
            for back, (t0, t1, inc) in enumerate(reversed(steps)):
                per_interval[intervals - 1 - back][port] = inc / (t1 - t0) if t1 > t0 else 0.0
    return [{k for k, f in rx.items() if f >= limits.spread_fraction and tx.get(k, 0.0) >= limits.spread_fraction}
            for rx, tx in zip(shares["rx"], shares["tx"], strict=True)]


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    history = _relays_per_interval(window, limits)
    relays = history[-1]
    if len(relays) < limits.spread_min_ports:
        return []
    counts = [len(r) for r in history]
    growing = counts[0] < counts[1] < counts[2]
    devices = sorted({dict(k).get("host", "") for k in relays})
    return [Alert("congestion-spreading", "critical" if growing else "warning",
                  f"{len(relays)} ports on {len(devices)} devices", window.end,
                  {"relaying_ports": sorted(subject_of(k, "priority") for k in relays), "counts_last_3": counts,
                   "growing": growing, "devices": devices},
                  "Pause is propagating through the fabric: enable or tighten ECN (marking must start below "
                  "XOFF), find the congested egress at the edge of the tree, and check PFC headroom and alpha.")]


DETECTOR = Detector("congestion-spreading", 120.0, detect)
