"""Switch PFC watchdog (R2): a queue was declared stormed, or the watchdog flaps storm/restore.

Restorations are events: many of them in one incident (170 in 20 minutes in sonic-buildimage#29203) mean the
watchdog and the hardware disagree, not that the storm keeps recurring.
"""

from __future__ import annotations

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds
from tensorfabric.telemetry.rules.promql import AlertRule, Timing, duration, moved
from tensorfabric.telemetry.window import Window, subject_of

__all__ = ["DETECTOR", "detect", "rules"]


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    alerts: list[Alert] = []
    stormed: set[str] = set()
    for labels, increase, _ in window.last_increases("roce_pfcwd_storms_detected_total"):
        if increase > 0:
            stormed.add(subject_of(labels, "queue"))
    for labels, _ in window.series("roce_pfcwd_stormed"):
        if window.last("roce_pfcwd_stormed", labels) == 1.0:
            stormed.add(subject_of(labels, "queue"))
    for subject in sorted(stormed):
        alerts.append(Alert("pfc-watchdog", "critical", subject, window.end, {"state": "stormed"},
                            "The switch watchdog is dropping this lossless queue: find the device behind this port "
                            "that keeps sending pause (see storm-origin) and fix or isolate it."))
    for labels, _ in window.series("roce_pfcwd_storms_restored_total"):
        restores = sum(inc for _, t1, inc in window.increases("roce_pfcwd_storms_restored_total", labels)
                       if t1 > window.end - limits.flap_window_s)
        if restores > limits.flap_restores:
            alerts.append(Alert("pfc-watchdog", "warning", subject_of(labels, "queue"), window.end,
                                {"state": "flapping", "restores": restores, "window_s": limits.flap_window_s},
                                "The watchdog keeps restoring and re-detecting: check whether the ASIC stops counting "
                                "PFC frames while the queue is in storm state, and raise restoration_time."))
    return alerts


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    return (
        AlertRule("RoceSwitchPfcWatchdogStorm",
                  f"{moved('roce_pfcwd_storms_detected_total', timing)} > 0 or roce_pfcwd_stormed == 1",
                  "critical", "pfc-watchdog",
                  "{{ $labels.host }} {{ $labels.port }} queue {{ $labels.queue }}: PFC watchdog stormed"),
        AlertRule("RoceSwitchPfcWatchdogFlapping",
                  f"increase(roce_pfcwd_storms_restored_total[{duration(limits.flap_window_s)}]) > "
                  f"{limits.flap_restores:g}", "warning", "pfc-watchdog",
                  "{{ $labels.host }} {{ $labels.port }} queue {{ $labels.queue }}: watchdog flapping storm/restore"),
    )


DETECTOR = Detector("pfc-watchdog", 1500.0, detect, rules=rules)
