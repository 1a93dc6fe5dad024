"""Loss in the lossless class (R7): any drop on a lossless priority or queue, retries exhausted, retransmissions
above baseline.

Normally no RDMA packet is dropped (Guo et al. 2016), so the threshold for drops is "more than zero". Discard
counters without a priority (``rx_discards_phy``, the watchdog's drops) count too; a switch port's
``IF_IN_DISCARDS`` mixes all classes and is left to other tools.
"""

from __future__ import annotations

import re
from functools import lru_cache

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds
from tensorfabric.telemetry.rules.promql import AlertRule, Timing, moved
from tensorfabric.telemetry.window import Labels, Window, label_of, subject_of

__all__ = ["DETECTOR", "detect", "lossless_queue", "rules"]

_MIXED_CLASSES = ("port", "eth_no_buffer", "eth_wred")
"""Discard reasons that mix every traffic class (port-level totals) or count Ethernet, not RoCE, receive drops."""


_QUEUE = re.compile(r"(?:uc|voq)?(\d{1,2})")
"""A numbered queue as the switch readers label it: ``3`` (SONiC UC3, EOS TC3), ``voq3`` (a VOQ chassis)."""


def _lossless(labels: Labels, limits: Thresholds) -> bool:
    return _lossless_for(labels, tuple(limits.lossless_priorities), tuple(limits.lossless_queue_names))


@lru_cache(maxsize=1 << 16)  # pure, and asked about the same label tuples on every poll
def _lossless_for(labels: Labels, lossless_priorities: tuple[str, ...], queue_names: tuple[str, ...]) -> bool:
    info = dict(labels)
    if info.get("reason") in _MIXED_CLASSES:
        return False
    if "priority" in info and info["priority"] not in lossless_priorities:
        return False
    if "queue" in info:
        numbered = _QUEUE.fullmatch(info["queue"])
        return info["queue"] in queue_names or (numbered is not None and numbered.group(1) in lossless_priorities)
    return True


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    alerts: list[Alert] = []
    for labels, increase, seconds in window.last_increases("roce_discards_total"):
        if increase > 0 and _lossless(labels, limits):
            alerts.append(Alert("lossless-loss", "critical", subject_of(labels, "priority", "queue", "reason"),
                                window.end - seconds, {"discards": increase, "seconds": seconds,
                                                       "reason": label_of(labels, "reason") or ""},
                                "Lossless traffic is being dropped: check PFC is enabled on this priority end to end, "
                                "headroom covers cable length and MTU, and the watchdog is not dropping a stormed "
                                "queue."))
    for labels, increase, seconds in window.last_increases("roce_retries_exceeded_total"):
        if increase > 0:
            alerts.append(Alert("lossless-loss", "critical", subject_of(labels, "kind"), window.end - seconds,
                                {"retries_exceeded": increase},
                                "QPs went to error after exhausting retries: the job saw the loss. Find the drop "
                                "point (discards, link health) before restarting."))
    for labels, increase, seconds in window.last_increases("roce_retransmissions_total"):
        rate = increase / seconds if seconds > 0 else None
        if rate is not None and rate > limits.retrans_baseline_per_s:
            alerts.append(Alert("lossless-loss", "warning", subject_of(labels, "kind"), window.end,
                                {"per_second": round(rate, 3), "baseline_per_s": limits.retrans_baseline_per_s},
                                "Retransmissions above baseline mean packets are lost or reordered on the path: "
                                "look for discards and PHY errors along it."))
    return alerts


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    classes = "|".join(limits.lossless_priorities)
    queues = "|".join(["", f"(uc|voq)?({classes})", *limits.lossless_queue_names])
    discards = (f'roce_discards_total{{reason!~"{"|".join(_MIXED_CLASSES)}", priority=~"|{classes}", '
                f'queue=~"{queues}"}}')
    return (
        AlertRule("RoceLosslessDiscards", f"{moved(discards, timing)} > 0", "critical", "lossless-loss",
                  "{{ $labels.host }} {{ $labels.port }} drops lossless packets ({{ $labels.reason }})",
                  comment="reasons port and eth_* mix every class or count Ethernet drops"),
        AlertRule("RoceRetriesExceeded", f"{moved('roce_retries_exceeded_total', timing)} > 0", "critical",
                  "lossless-loss", "{{ $labels.host }} {{ $labels.device }}: QPs exhausted {{ $labels.kind }} retries"),
        AlertRule("RoceRetransmissionsAboveBaseline",
                  f"{moved('roce_retransmissions_total', timing)} > {limits.retrans_baseline_per_s:g}", "warning",
                  "lossless-loss", "{{ $labels.host }} {{ $labels.device }}: {{ $labels.kind }} at {{ $value }}/s"),
    )


def lossless_queue(labels: Labels, limits: Thresholds) -> bool:
    """Whether a discard series counts lossless traffic (its priority or queue is a lossless one, and its reason
    does not mix every class)."""
    return _lossless(labels, limits)


DETECTOR = Detector("lossless-loss", 120.0, detect, rules=rules)
