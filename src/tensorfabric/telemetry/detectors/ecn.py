"""ECN / congestion-control misconfiguration (R8).

Three signatures: CNPs arrive at QPs without congestion control (``rp_cnp_ignored`` rising); CE marks arrive but
the notification point sends no CNPs; or a NIC is paused heavily while it sees no ECN marks at all, which means
marking starts above the PFC XOFF point (ECN must act first). The last is not said of a storm's victims: a port
paused all the time has nothing to mark, and while a storm root pauses a priority (:func:`~.base.storm_roots`) the
pause its victims see on the way up or down says nothing about ECN.
"""

from __future__ import annotations

from functools import lru_cache

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import (
    Detector,
    Thresholds,
    paused_fractions,
    storm_roots,
    storm_roots_promql,
)
from tensorfabric.telemetry.rules.promql import FABRIC_PRIO, PORT, AlertRule, Timing, moved, paused
from tensorfabric.telemetry.window import Labels, Window, label_of, subject_of

__all__ = ["DETECTOR", "detect", "rules"]


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
    stormed = {label_of(k, "priority") for k, _ in storm_roots(window, limits)}
    for labels, fraction in paused_fractions(window, "rx"):
        port = _port(labels)
        # above the victim threshold nothing flows at all: a storm or deadlock victim, not an ECN setting
        heavy_not_frozen = limits.pause_without_ecn_fraction <= fraction < limits.victim_rx_fraction
        if heavy_not_frozen and port in marks and marks[port] == 0 and label_of(labels, "priority") not in stormed:
            alerts.append(Alert("ecn-misconfig", "warning", subject_of(labels, "priority"), window.end,
                                {"signature": "pause-without-ecn", "rx_paused_fraction": round(fraction, 4),
                                 "ce_marked": 0},
                                "The fabric pauses this port but never marks ECN: the switch ECN threshold (Kmin) "
                                "is above XOFF, so PFC acts first. Lower Kmin/Kmax below the XOFF threshold."))
    return alerts


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    unqueued = 'roce_ecn_marked_packets_total{queue=""}'  # the NIC's marks (a switch queue's have a queue)
    marks = f"sum by ({PORT}) ({moved(unqueued, timing)})"
    roots = storm_roots_promql(limits, timing).replace("\n", "\n  ")
    return (
        AlertRule("RoceCnpIgnored", f"{moved('roce_cnp_ignored_total', timing)} > 0", "warning", "ecn-misconfig",
                  "{{ $labels.host }} {{ $labels.device }}: CNPs reach QPs without congestion control"),
        # marks per interval: the per-second rate over the last interval times the interval
        AlertRule("RoceEcnMarksWithoutCnp",
                  f"{marks} * {timing.scrape_s:g} >= {limits.ecn_min_marks:g}\n  and on ({PORT})\n"
                  f"{moved('roce_cnp_sent_total', timing)} == 0",
                  "warning", "ecn-misconfig", "{{ $labels.host }} {{ $labels.device }}: CE marks arrive but no CNPs "
                                              "are sent"),
        AlertRule("RocePauseWithoutEcn",
                  f"({paused('rx', timing)} >= {limits.pause_without_ecn_fraction:g}) < "
                  f"{limits.victim_rx_fraction:g}\n  and on ({PORT})\n{marks} == 0\n"
                  f"  unless on ({FABRIC_PRIO})\ncount by ({FABRIC_PRIO}) (\n  {roots}\n)",
                  "warning", "ecn-misconfig",
                  "{{ $labels.host }} {{ $labels.device }} is paused but sees no ECN marks (Kmin above XOFF?)",
                  for_s=120.0,
                  comment="at or above the victim share nothing flows: a storm or deadlock victim, which other rules "
                          "name; and while a storm root pauses the priority its victims' pause says nothing about "
                          "ECN (the detector skips both, interval by interval)"),
    )


DETECTOR = Detector("ecn-misconfig", 120.0, detect, rules=rules)
