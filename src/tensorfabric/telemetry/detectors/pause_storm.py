"""NIC pause storm (R1): the NIC's storm prevention fired, or a port keeps sending pause for most of a poll.

``tx_pause_storm_error_events`` means pause transmission was disabled (drops possible); warning events mean the
device stalled past the warning watermark. A TX paused share above ``storm_tx_fraction`` catches NICs and
simulated hosts without the storm counters -- unless the device is itself held by its peer on that priority
(:func:`~.base.held`), in which case it relays pause rather than starting it.
"""

from __future__ import annotations

from typing import Literal

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, storm_roots, storm_roots_promql
from tensorfabric.telemetry.rules.promql import AlertRule, Timing, moved
from tensorfabric.telemetry.window import Window, subject_of

__all__ = ["DETECTOR", "detect", "rules"]

Severity = Literal["critical", "warning"]

_ADVICE = ("Find why this host cannot drain its receive queue (PCIe stalls, a stuck receive pipeline, MTT cache "
           "misses); make sure NIC storm prevention is on (ethtool --set-tunable IF pfc-prevention-tout auto) and "
           "drain the host from the job until the pauses stop.")
_STORM_COUNTERS: tuple[tuple[str, Severity], ...] = (("roce_pause_storm_error_events_total", "critical"),
                                                      ("roce_pause_storm_warning_events_total", "warning"))


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    alerts: list[Alert] = []
    for metric, severity in _STORM_COUNTERS:
        for labels, increase, seconds in window.last_increases(metric):
            if increase > 0:
                alerts.append(Alert("pause-storm", severity, subject_of(labels), window.end - seconds,
                                    {"counter": metric, "increase": increase, "seconds": seconds}, _ADVICE))
    for labels, fraction in storm_roots(window, limits):
        alerts.append(Alert("pause-storm", "critical", subject_of(labels, "priority"), window.end,
                            {"tx_paused_fraction": round(fraction, 4), "threshold": limits.storm_tx_fraction},
                            _ADVICE))
    return alerts


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    return (
        AlertRule("RoceNicPauseStormError", f"{moved('roce_pause_storm_error_events_total', timing)} > 0",
                  "critical", "pause-storm",
                  "{{ $labels.host }} {{ $labels.device }}: NIC storm prevention disabled pause transmission",
                  recommendation="Find why the host cannot drain its receive queue; keep pfc-prevention-tout on; "
                                 "drain the host."),
        AlertRule("RoceNicPauseStormWarning", f"{moved('roce_pause_storm_warning_events_total', timing)} > 0",
                  "warning", "pause-storm",
                  "{{ $labels.host }} {{ $labels.device }}: NIC stalled past the pause-storm warning watermark"),
        AlertRule("RocePortPausingContinuously", storm_roots_promql(limits, timing), "critical", "pause-storm",
                  "{{ $labels.host }} {{ $labels.port }} prio {{ $labels.priority }} sends pause "
                  "{{ $value | humanizePercentage }} of the time", for_s=60.0,
                  comment="a device whose own ports are held by their peers on the priority relays pause (or is "
                          "deadlocked); it is not storming"),
    )


DETECTOR = Detector("pause-storm", 120.0, detect, rules=rules)
