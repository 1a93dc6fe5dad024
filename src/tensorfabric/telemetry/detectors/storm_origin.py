"""Storm origin versus victims (R4): the root sends pause continuously but receives none; victims receive it.

A storm is a tree: exactly the ports at its root pause without being paused. Naming the root keeps operators
from chasing the many victim ports the pause reached.
"""

from __future__ import annotations

from collections import defaultdict

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, paused_fractions, without
from tensorfabric.telemetry.window import Labels, Window, label_of, subject_of

__all__ = ["DETECTOR", "detect"]


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    rx = {without(labels, "direction"): f for labels, f in paused_fractions(window, "rx")}
    # a device with any port held by its peer is relaying pause (or deadlocked), not the root of a tree
    held_devices = {label_of(k, "host") for k, f in rx.items() if f >= limits.origin_victim_rx_fraction}
    origins: dict[str, list[tuple[Labels, float]]] = defaultdict(list)
    for labels, fraction in paused_fractions(window, "tx"):
        key = without(labels, "direction")
        if (fraction >= limits.origin_tx_fraction and rx.get(key, 0.0) <= limits.origin_rx_max_fraction
                and label_of(labels, "host") not in held_devices):
            origins[label_of(labels, "priority") or ""].append((labels, fraction))
    alerts: list[Alert] = []
    for priority, roots in origins.items():
        victims = sorted(subject_of(k) for k, f in rx.items()
                         if f >= limits.origin_victim_rx_fraction and dict(k).get("priority", "") == priority)
        if not victims:
            continue
        for labels, fraction in roots:
            alerts.append(Alert("storm-origin", "critical", subject_of(labels, "priority"), window.end,
                                {"tx_paused_fraction": round(fraction, 4), "rx_paused_fraction": rx.get(
                                    without(labels, "direction"), 0.0), "victims": victims, "priority": priority},
                                f"Isolate this port (it is the root of a pause tree reaching {len(victims)} ports): "
                                "shut it or disable PFC on it, then fix the device behind it."))
    return alerts


DETECTOR = Detector("storm-origin", 120.0, detect)
