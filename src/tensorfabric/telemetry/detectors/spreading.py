"""Congestion spreading (R5): ports that both receive and send pause are relaying congestion hop by hop.

Pause interval, not frame count, is the severity signal (Guo et al. 2016). Ports are counted per priority (a
pause on one priority holds only that priority's queues). The relay count is computed for each of the last three
intervals; a count that keeps growing is reported as critical.
"""

from __future__ import annotations

from collections import defaultdict

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, without
from tensorfabric.telemetry.rules.promql import FABRIC_PRIO, PRIO_PORT, AlertRule, Timing, paused
from tensorfabric.telemetry.window import Labels, Window, label_of, subject_of

__all__ = ["DETECTOR", "detect", "rules"]


def _relays_per_interval(window: Window, limits: Thresholds, intervals: int = 3) -> list[set[Labels]]:
    """Ports relaying pause in each of the last ``intervals`` intervals, oldest first."""
    shares: dict[str, list[dict[Labels, float]]] = {"rx": [{} for _ in range(intervals)],
                                                     "tx": [{} for _ in range(intervals)]}
    for direction, per_interval in shares.items():
        for labels, steps in window.recent_increases("roce_pfc_paused_seconds_total", intervals, direction=direction):
            port = without(labels, "direction")
            for back, (t0, t1, inc) in enumerate(reversed(steps)):
                per_interval[intervals - 1 - back][port] = min(inc / (t1 - t0), 1.0) if t1 > t0 else 0.0
    return [{k for k, f in rx.items() if f >= limits.spread_fraction and tx.get(k, 0.0) >= limits.spread_fraction}
            for rx, tx in zip(shares["rx"], shares["tx"], strict=True)]


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    by_priority: dict[str, list[set[Labels]]] = defaultdict(lambda: [set(), set(), set()])
    for index, relays in enumerate(_relays_per_interval(window, limits)):
        for port in relays:
            by_priority[label_of(port, "priority") or ""][index].add(port)
    alerts: list[Alert] = []
    for priority, history in sorted(by_priority.items()):
        relays = history[-1]
        if len(relays) < limits.spread_min_ports:
            continue
        counts = [len(r) for r in history]
        growing = counts[0] < counts[1] < counts[2]
        devices = sorted({label_of(k, "host") or "" for k in relays})
        alerts.append(Alert("congestion-spreading", "critical" if growing else "warning",
                            f"{len(relays)} ports on {len(devices)} devices prio {priority}", window.end,
                            {"relaying_ports": sorted(subject_of(k, "priority") for k in relays),
                             "counts_last_3": counts, "growing": growing, "devices": devices, "priority": priority},
                            "Pause is propagating through the fabric: enable or tighten ECN (marking must start below "
                            "XOFF), find the congested egress at the edge of the tree, and check PFC headroom and "
                            "alpha."))
    return alerts


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    return (
        AlertRule("RoceCongestionSpreading",
                  f"count by ({FABRIC_PRIO}) (\n  {paused('rx', timing)} >= {limits.spread_fraction:g}\n"
                  f"    and on ({PRIO_PORT})\n  {paused('tx', timing)} >= {limits.spread_fraction:g}\n"
                  f") >= {limits.spread_min_ports:g}",
                  "warning", "congestion-spreading",
                  "{{ $value }} ports relay pause on priority {{ $labels.priority }}"),
    )


DETECTOR = Detector("congestion-spreading", 120.0, detect, rules=rules)
