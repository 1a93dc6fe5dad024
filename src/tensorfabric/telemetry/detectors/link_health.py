"""Link health (R10): uncorrected symbol errors, FEC-corrected BER and its trend, flaps, CRC/symbol errors."""

from __future__ import annotations

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import Detector, Thresholds
from tensorfabric.telemetry.window import Window, subject_of

__all__ = ["DETECTOR", "detect"]

_RESEAT = "Clean or reseat the optics, then replace cable/transceiver; take the link out of ECMP meanwhile."


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    alerts: list[Alert] = []
    for labels, _ in window.series("roce_phy_uncorrected_symbols_total"):
        got = window.increase("roce_phy_uncorrected_symbols_total", labels)
        if got and got[0] > 0:
            alerts.append(Alert("link-health", "critical", subject_of(labels), window.end - got[1],
                                {"signature": "uncorrected", "uncorrected_symbols": got[0]},
                                "FEC cannot correct errors on this link: traffic is lost. " + _RESEAT))
    for labels, points in window.series("roce_link_down_events_total"):
        flaps = sum(inc for _, _, inc in window.increases("roce_link_down_events_total", labels))
        recent = window.increase("roce_link_down_events_total", labels)
        if recent and recent[0] > 0:
            alerts.append(Alert("link-health", "critical" if flaps >= limits.flaps_critical else "warning",
                                subject_of(labels), window.end - recent[1],
                                {"signature": "flap", "link_down_events": flaps, "window_s": points[-1][0] -
                                 points[0][0]}, "The link went down: check the peer, optics and cable. " + _RESEAT))
    for metric in ("roce_phy_symbol_errors_total", "roce_phy_crc_errors_total"):
        for labels, _ in window.series(metric):
            got = window.increase(metric, labels)
            if got and got[0] > 0:
                alerts.append(Alert("link-health", "warning", subject_of(labels), window.end - got[1],
                                    {"signature": metric.removeprefix("roce_phy_").removesuffix("_total"),
                                     "increase": got[0]}, _RESEAT))
    for labels, _ in window.series("roce_phy_corrected_bits_total"):
        bits_labels = window.with_labels("roce_phy_received_bits_total", labels)
        if bits_labels is None:
            continue
        corrected = window.increases("roce_phy_corrected_bits_total", labels)
        received = window.increases("roce_phy_received_bits_total", bits_labels)
        bers = [c[2] / r[2] for c, r in zip(corrected, received, strict=False) if r[2] > 0]
        if not bers:
            continue
        rising = len(bers) >= 3 and bers[-1] > 10 * max(bers[0], 1e-15) and bers[-1] > limits.corrected_ber_max / 10
        if bers[-1] > limits.corrected_ber_max or rising:
            alerts.append(Alert("link-health", "warning", subject_of(labels), window.end,
                                {"signature": "ber-rising" if rising else "ber-high", "corrected_ber": bers[-1],
                                 "first_ber_in_window": bers[0], "threshold": limits.corrected_ber_max},
                                "Pre-FEC errors are high or rising: this link is degrading. " + _RESEAT))
    return alerts


DETECTOR = Detector("link-health", 1500.0, detect)
