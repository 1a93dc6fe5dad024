"""Link health (R10): uncorrected symbol errors, FEC-corrected BER and its trend, flaps, CRC/symbol errors."""

from __future__ import annotations

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds
from tensorfabric.telemetry.metrics import spec
from tensorfabric.telemetry.rates import counter_delta
from tensorfabric.telemetry.rules.promql import PORT, AlertRule, Timing, moved
from tensorfabric.telemetry.window import Point, Window, subject_of

__all__ = ["DETECTOR", "detect", "rules"]

_RESEAT = "Clean or reseat the optics, then replace cable/transceiver; take the link out of ECMP meanwhile."


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    alerts: list[Alert] = []
    for labels, increase, seconds in window.last_increases("roce_phy_uncorrected_symbols_total"):
        if increase > 0:
            alerts.append(Alert("link-health", "critical", subject_of(labels), window.end - seconds,
                                {"signature": "uncorrected", "uncorrected_symbols": increase},
                                "FEC cannot correct errors on this link: traffic is lost. " + _RESEAT))
    for labels, points in window.series("roce_link_down_events_total"):
        recent = window.increase("roce_link_down_events_total", labels)
        if recent and recent[0] > 0:
            flaps = window.total_increase("roce_link_down_events_total", labels)
            alerts.append(Alert("link-health", "critical" if flaps >= limits.flaps_critical else "warning",
                                subject_of(labels), window.end - recent[1],
                                {"signature": "flap", "link_down_events": flaps, "window_s": points[-1][0] -
                                 points[0][0]}, "The link went down: check the peer, optics and cable. " + _RESEAT))
    for metric in ("roce_phy_symbol_errors_total", "roce_phy_crc_errors_total"):
        for labels, increase, seconds in window.last_increases(metric):
            if increase > 0:
                alerts.append(Alert("link-health", "warning", subject_of(labels), window.end - seconds,
                                    {"signature": metric.removeprefix("roce_phy_").removesuffix("_total"),
                                     "increase": increase}, _RESEAT))
    for labels, _ in window.series("roce_phy_corrected_bit_errors_total"):
        bits_labels = window.with_labels("roce_phy_received_bit_count_total", labels)
        if bits_labels is None:
            continue
        bers = _ber_ends(window.points("roce_phy_corrected_bit_errors_total", labels),
                         window.points("roce_phy_received_bit_count_total", bits_labels))
        if bers is None:
            continue
        first, last, three = bers
        rising = three and last > 10 * max(first, 1e-15) and last > limits.corrected_ber_max / 10
        if last > limits.corrected_ber_max or rising:
            alerts.append(Alert("link-health", "warning", subject_of(labels), window.end,
                                {"signature": "ber-rising" if rising else "ber-high", "corrected_ber": last,
                                 "first_ber_in_window": first, "threshold": limits.corrected_ber_max},
                                "Pre-FEC errors are high or rising: this link is degrading. " + _RESEAT))
    return alerts


def _ber_ends(corrected: list[Point], received: list[Point]) -> tuple[float, float, bool] | None:
    """(first, last, at least three) of the per-interval corrected BERs, pairing the two counters' intervals by
    position and skipping intervals with no received bits; None when there is none.

    Only the ends and the count decide the verdict, so only they are computed: a 25-minute window holds ~100
    intervals per link, and working out every one on every poll was most of this detector's cost.
    """
    intervals = min(len(corrected), len(received)) - 1
    wrap_c, wrap_r = _wrap("roce_phy_corrected_bit_errors_total"), _wrap("roce_phy_received_bit_count_total")

    def ber(i: int) -> float | None:
        bits = _step(received, i, wrap_r)
        return _step(corrected, i, wrap_c) / bits if bits > 0 else None

    found: list[float] = []
    for i in range(intervals):
        value = ber(i)
        if value is not None:
            found.append(value)
            if len(found) == 3:
                break
    if not found:
        return None
    for i in range(intervals - 1, -1, -1):
        value = ber(i)
        if value is not None:
            return found[0], value, len(found) >= 3
    return None  # unreachable: the forward scan found one


def _wrap(metric: str) -> float | None:
    entry = spec(metric)
    return entry.wrap if entry else None


def _step(points: list[Point], i: int, wrap: float | None) -> float:
    """Increase over interval ``i`` of a counter series (as Window.increases computes it)."""
    (_, v0), (_, v1) = points[i], points[i + 1]
    return v1 - v0 if v1 >= v0 else counter_delta(v0, v1, wrap)[0]


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    return (
        AlertRule("RoceLinkUncorrectedErrors", f"{moved('roce_phy_uncorrected_symbols_total', timing)} > 0",
                  "critical", "link-health", "{{ $labels.host }} {{ $labels.device }}: FEC cannot correct errors, "
                                             "traffic lost"),
        AlertRule("RoceLinkFlap", f"{moved('roce_link_down_events_total', timing)} > 0", "warning", "link-health",
                  "{{ $labels.host }} {{ $labels.device }}: link went down"),
        AlertRule("RoceLinkSymbolErrors", f"{moved('roce_phy_symbol_errors_total', timing)} > 0", "warning",
                  "link-health", "{{ $labels.host }} {{ $labels.device }}: symbol errors on the link"),
        AlertRule("RoceLinkCrcErrors", f"{moved('roce_phy_crc_errors_total', timing)} > 0", "warning",
                  "link-health", "{{ $labels.host }} {{ $labels.device }}: FCS (CRC) errors on the link"),
        AlertRule("RoceLinkCorrectedBerHigh",
                  f"{moved('roce_phy_corrected_bit_errors_total', timing)}\n  / on ({PORT})\n"
                  f"{moved('roce_phy_received_bit_count_total', timing)} > {limits.corrected_ber_max:g}",
                  "warning", "link-health",
                  '{{ $labels.host }} {{ $labels.device }}: corrected BER {{ printf "%.3g" $value }}', for_s=600.0),
    )


DETECTOR = Detector("link-health", 1500.0, detect, rules=rules)
