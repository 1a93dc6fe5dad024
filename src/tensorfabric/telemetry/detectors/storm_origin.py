"""Storm origin versus victims (R4): the root sends pause continuously but receives none; victims receive it.

A storm is a tree: exactly the ports at its root pause without being paused. Naming the root keeps operators
from chasing the many victim ports the pause reached. A root is a port pausing at least ``origin_tx_fraction``,
paused itself at most ``origin_rx_max_fraction``, on a device not held on that priority (:func:`~.base.held`),
while somewhere on the same priority a port is held (the victims).
"""

from __future__ import annotations

from collections import defaultdict

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, held, held_promql, paused_fractions, without
from tensorfabric.telemetry.rules.promql import FABRIC_PRIO, HOST_PRIO, PRIO_PORT, AlertRule, Timing, paused
from tensorfabric.telemetry.window import Labels, Window, label_of, subject_of

__all__ = ["DETECTOR", "detect", "rules"]


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    rx = {without(labels, "direction"): f for labels, f in paused_fractions(window, "rx")}
    holding = held(window, limits)
    origins: dict[str, list[tuple[Labels, float]]] = defaultdict(list)
    for labels, fraction in paused_fractions(window, "tx"):
        key = without(labels, "direction")
        priority = label_of(labels, "priority") or ""
        if (fraction >= limits.origin_tx_fraction and rx.get(key, 0.0) <= limits.origin_rx_max_fraction
                and (label_of(labels, "host") or "", priority) not in holding):
            origins[priority].append((labels, fraction))
    alerts: list[Alert] = []
    for priority, roots in origins.items():
        victims = sorted(subject_of(k) for k, f in rx.items()
                         if f >= limits.origin_victim_rx_fraction and (label_of(k, "priority") or "") == priority)
        if not victims:
            continue
        for labels, fraction in roots:
            alerts.append(Alert("storm-origin", "critical", subject_of(labels, "priority"), window.end,
                                {"tx_paused_fraction": round(fraction, 4), "rx_paused_fraction": rx.get(
                                    without(labels, "direction"), 0.0), "victims": victims, "priority": priority},
                                f"Isolate this port (it is the root of a pause tree reaching {len(victims)} ports): "
                                "shut it or disable PFC on it, then fix the device behind it."))
    return alerts


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    victims = f'{paused("rx", timing)} >= {limits.origin_victim_rx_fraction:g}'
    return (
        AlertRule("RocePfcStormOrigin",
                  f"(\n  {paused('tx', timing)} >= {limits.origin_tx_fraction:g}\n"
                  f"    unless on ({PRIO_PORT})\n  {paused('rx', timing)} > {limits.origin_rx_max_fraction:g}\n"
                  f"    unless on ({HOST_PRIO})\n  {held_promql(limits, timing)}\n)\n"
                  f"  and on ({FABRIC_PRIO})\n(count by ({FABRIC_PRIO}) ({victims}) > 0)",
                  "critical", "storm-origin",
                  "{{ $labels.host }} {{ $labels.port }} prio {{ $labels.priority }} is the root of a pause tree",
                  for_s=30.0,
                  recommendation="Isolate this port (shut it or disable PFC on it), then fix the device behind it.",
                  comment="two polls before paging: the in-process detector names the root at once"),
    )


DETECTOR = Detector("storm-origin", 120.0, detect, rules=rules)
