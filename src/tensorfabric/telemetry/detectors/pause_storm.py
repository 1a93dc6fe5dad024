"""NIC pause storm (R1): the NIC's storm prevention fired, or a port keeps sending pause for most of a poll.

``tx_pause_storm_error_events`` means pause transmission was disabled (drops possible); warning events mean the
device stalled past the warning watermark. A TX paused share above ``storm_tx_fraction`` catches NICs and
simulated hosts without the storm counters.
"""

from __future__ import annotations

from typing import Literal

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, paused_fractions
from tensorfabric.telemetry.window import Window, label_of, subject_of

__all__ = ["DETECTOR", "detect"]

Severity = Literal["critical", "warning"]

_ADVICE = ("Find why this host cannot drain its receive queue (PCIe stalls, a stuck receive pipeline, MTT cache "
           "misses); make sure NIC storm prevention is on (ethtool --set-tunable IF pfc-prevention-tout auto) and "
           "drain the host from the job until the pauses stop.")


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    alerts: list[Alert] = []
    storm_counters: tuple[tuple[str, Severity], ...] = (("roce_pause_storm_error_events_total", "critical"),
                                                         ("roce_pause_storm_warning_events_total", "warning"))
    for metric, severity in storm_counters:
        for labels, increase, seconds in window.last_increases(metric):
            if increase > 0:
                alerts.append(Alert("pause-storm", severity, subject_of(labels), window.end - seconds,
                                    {"counter": metric, "increase": increase, "seconds": seconds}, _ADVICE))
    # a device whose own ports are held by their peers is relaying pause (or deadlocked), not storming
    held = {label_of(k, "host") for k, f in paused_fractions(window, "rx") if f >= limits.origin_victim_rx_fraction}
    for labels, fraction in paused_fractions(window, "tx"):
        if fraction >= limits.storm_tx_fraction and label_of(labels, "host") not in held:
            alerts.append(Alert("pause-storm", "critical", subject_of(labels, "priority"), window.end,
                                {"tx_paused_fraction": round(fraction, 4), "threshold": limits.storm_tx_fraction},
                                _ADVICE))
    return alerts


DETECTOR = Detector("pause-storm", 120.0, detect)
