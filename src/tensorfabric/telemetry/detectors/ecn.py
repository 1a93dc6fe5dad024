"""ECN / congestion-control misconfiguration (R8).

Three signatures: CNPs arrive at QPs without congestion control (``rp_cnp_ignored`` rising); CE marks arrive but
the notification point sends no CNPs; or a NIC is paused heavily while it sees no ECN marks at all, which means
marking starts above the PFC XOFF point (ECN must act first).
"""

from __future__ import annotations

from functools import lru_cache

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, paused_fractions
from tensorfabric.telemetry.window import Labels, Window, label_of, subject_of

__all__ = ["DETECTOR", "detect"]


@lru_cache(maxsize=1 << 16)  # pure, and asked about the same label tuples on every poll
def _port(labels: Labels) -> Labels:
    return tuple((k, v) for k, v in labels if k in ("host", "device", "port"))


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    alerts: list[Alert] = []
    for labels, increase, _ in window.last_increases("roce_cnp_ignored_total"):
        if increase > 0:
            alerts.append(Alert("ecn-misconfig", "warning", subject_of(labels), window.end,
                                {"signature": "cnp-ignored", "cnp_ignored": increase},
                                "CNPs reach QPs without RoCE congestion control: enable DCQCN on this adapter "
                                "(roce_cc / ECN settings for the priority) or stop marking this traffic."))
    marks: dict[Labels, float] = {}
    for labels, increase, _ in window.last_increases("roce_ecn_marked_packets_total"):
        if label_of(labels, "queue") is None:
            port = _port(labels)
            marks[port] = marks.get(port, 0.0) + increase
    for labels, increase, _ in window.last_increases("roce_cnp_sent_total"):
        seen = marks.get(_port(labels), 0.0)
        if increase == 0 and seen >= limits.ecn_min_marks:
            alerts.append(Alert("ecn-misconfig", "warning", subject_of(labels), window.end,
                                {"signature": "marks-without-cnp", "ce_marked": seen, "cnp_sent": 0},
                                "CE-marked packets arrive but no CNPs are sent: enable the notification point "
                                "(ECN/CNP generation) for the RoCE priority on this NIC."))
    for labels, fraction in paused_fractions(window, "rx"):
        port = _port(labels)
        # above the victim threshold nothing flows at all: a storm or deadlock victim, not an ECN setting
        heavy_not_frozen = limits.pause_without_ecn_fraction <= fraction < limits.victim_rx_fraction
        if heavy_not_frozen and port in marks and marks[port] == 0:
            alerts.append(Alert("ecn-misconfig", "warning", subject_of(labels, "priority"), window.end,
                                {"signature": "pause-without-ecn", "rx_paused_fraction": round(fraction, 4),
                                 "ce_marked": 0},
                                "The fabric pauses this port but never marks ECN: the switch ECN threshold (Kmin) "
                                "is above XOFF, so PFC acts first. Lower Kmin/Kmax below the XOFF threshold."))
    return alerts


DETECTOR = Detector("ecn-misconfig", 120.0, detect)
