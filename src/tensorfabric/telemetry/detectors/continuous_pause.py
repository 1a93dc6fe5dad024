"""Continuous-pause victim (R3): a port paused by its peer almost all the time, with no XON and no dequeue.

Transition and per-priority TX packet counters confirm the pause is unbroken; when a source lacks them the
paused share alone decides and the evidence says what was not checked. A victim is a warning wherever it sits:
the action is upstream, at the origin (storm-origin) or the cycle (deadlock).
"""

from __future__ import annotations

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, paused_fractions
from tensorfabric.telemetry.rules.promql import PRIO_PORT, AlertRule, Timing, moved, paused
from tensorfabric.telemetry.window import Window, subject_of

__all__ = ["DETECTOR", "detect", "rules"]

_ADVICE = ("This port is a victim: it is held by its peer. Follow the pause upstream to the origin (see "
           "storm-origin / deadlock) rather than acting on this port.")


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    alerts: list[Alert] = []
    for labels, fraction in paused_fractions(window, "rx"):
        if fraction < limits.victim_rx_fraction:
            continue
        evidence: dict[str, object] = {"rx_paused_fraction": round(fraction, 4)}
        transitions = window.with_labels("roce_pfc_pause_transitions_total", labels)
        if transitions is not None:
            got = window.increase("roce_pfc_pause_transitions_total", transitions)
            if got is not None and got[0] > 0:
                continue  # XON in between: heavy but not continuous pause
            evidence["xon_transitions"] = 0
        sent = window.with_labels("roce_packets_total", labels, direction="tx")
        if sent is not None:
            got = window.increase("roce_packets_total", sent)
            if got is not None and got[0] > 0:
                continue
            evidence["tx_packets"] = 0
        evidence["checked"] = sorted(k for k in ("xon_transitions", "tx_packets") if k in evidence)
        alerts.append(Alert("continuous-pause", "warning", subject_of(labels, "priority"), window.end, evidence,
                            _ADVICE))
    return alerts


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    xon = moved('roce_pfc_pause_transitions_total{direction="rx"}', timing)
    sending = moved('roce_packets_total{direction="tx"}', timing)
    return (
        AlertRule("RocePfcContinuousPauseVictim",
                  f"{paused('rx', timing)} >= {limits.victim_rx_fraction:g}\n"
                  f"  unless on ({PRIO_PORT})\n{xon} > 0\n"
                  f"  unless on ({PRIO_PORT})\n{sending} > 0",
                  "warning", "continuous-pause",
                  "{{ $labels.host }} {{ $labels.port }} prio {{ $labels.priority }} paused by its peer without XON",
                  for_s=60.0, recommendation="This port is a victim; follow the pause upstream to the origin.",
                  comment="fires within its for: of a storm's start: every interval of a storm is paused all the way"),
    )


DETECTOR = Detector("continuous-pause", 120.0, detect, rules=rules)
