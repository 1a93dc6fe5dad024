"""Congestion spreading (R5): ports that both receive and send pause are relaying congestion hop by hop.

Pause interval, not frame count, is the severity signal (Guo et al. 2016). The relay count is computed for each
of the last three intervals; a count that keeps growing is reported as critical.
"""

from __future__ import annotations

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, without
from tensorfabric.telemetry.window import Labels, Window, subject_of

__all__ = ["DETECTOR", "detect"]


def _relays(window: Window, limits: Thresholds, back: int) -> set[Labels]:
    """Ports relaying pause in the interval ``back`` steps before the last one."""
    shares: dict[str, dict[Labels, float]] = {"rx": {}, "tx": {}}
    for direction in shares:
        for labels, _ in window.series("roce_pfc_paused_seconds_total", direction=direction):
            steps = window.increases("roce_pfc_paused_seconds_total", labels, back + 1)
            if len(steps) > back:
                t0, t1, inc = steps[-1 - back]
                shares[direction][without(labels, "direction")] = inc / (t1 - t0) if t1 > t0 else 0.0
    return {k for k, f in shares["rx"].items()
            if f >= limits.spread_fraction and shares["tx"].get(k, 0.0) >= limits.spread_fraction}


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    counts = [len(_relays(window, limits, back)) for back in (2, 1, 0)]
    relays = _relays(window, limits, 0)
    if len(relays) < limits.spread_min_ports:
        return []
    growing = counts[0] < counts[1] < counts[2]
    devices = sorted({dict(k).get("host", "") for k in relays})
    return [Alert("congestion-spreading", "critical" if growing else "warning",
                  f"{len(relays)} ports on {len(devices)} devices", window.end,
                  {"relaying_ports": sorted(subject_of(k, "priority") for k in relays), "counts_last_3": counts,
                   "growing": growing, "devices": devices},
                  "Pause is propagating through the fabric: enable or tighten ECN (marking must start below "
                  "XOFF), find the congested egress at the edge of the tree, and check PFC headroom and alpha.")]


DETECTOR = Detector("congestion-spreading", 120.0, detect)
