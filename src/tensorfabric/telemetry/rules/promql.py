"""The pieces a detector's Prometheus rule is written with: the timing it is generated for, the rule records, and
the PromQL terms every rule shares.

The in-process detectors judge the *last poll interval* of each series (the increase between its two newest
points); the rules judge the same interval with ``irate()`` (the two newest scraped samples), not an average over
minutes. With the exporter collecting on scrape, a scrape is a poll, so both see the same two readings and reach
the same verdict at the same evaluation -- the rule's ``for:`` only delays *firing*, the alert is pending exactly
when the detector reports. A verdict on the last interval also resolves one scrape after the evidence stops,
where an ``increase(...[5m])`` held an alert for five minutes after a stream ended.

Windows are written in scrapes and ``for:`` in seconds at the reference 15 s scrape, so :class:`Timing` can
generate the same rules for another scrape interval (a test's 1 s scrapes) without touching their logic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["HOST_PRIO", "PORT", "PRIO_PORT", "AlertRule", "RecordRule", "Timing", "duration", "moved", "paused"]

REFERENCE_SCRAPE_S = 15.0
"""The scrape and evaluation interval the shipped rules are written for (the exporter's default poll)."""

# Every join carries the exporter's identity (job, instance and the cluster label `monitor --label` adds), so two
# exporters reporting the same host names are never matched many-to-many.
PORT = "cluster, job, instance, host, device, port"
PRIO_PORT = f"{PORT}, priority"
HOST_PRIO = "cluster, job, instance, host, priority"
FABRIC_PRIO = "cluster, priority"


def duration(seconds: float) -> str:
    """A Prometheus duration: ``1m``, ``15s``, ``4s``, ``250ms``, ``1h``, ``2d``."""
    ms = round(seconds * 1000)
    if ms <= 0:
        return "0s"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


@dataclass(frozen=True, slots=True)
class Timing:
    """The scrape (= rule evaluation) interval the rules are generated for.

    Last-interval windows span :attr:`lookback_scrapes` scrapes (``irate`` reads the newest two samples in it, so
    one missed scrape does not blank a verdict); ``for:`` durations are scaled from the reference 15 s scrape.
    """

    scrape_s: float = REFERENCE_SCRAPE_S
    lookback_scrapes: int = 4

    @property
    def scale(self) -> float:
        return self.scrape_s / REFERENCE_SCRAPE_S

    @property
    def lookback(self) -> str:
        """The range of every last-interval term (``1m`` at 15 s scrapes)."""
        return duration(self.lookback_scrapes * self.scrape_s)

    def hold(self, reference_s: float) -> str:
        """A ``for:`` written for 15 s scrapes, at this timing."""
        return duration(reference_s * self.scale)


def paused(direction: str, timing: Timing) -> str:
    """The paused share of the last interval, per pause-duration series in ``direction`` (the detectors'
    ``paused_fractions``): clamped to [0, 1] as they clamp it."""
    return f'clamp(irate(roce_pfc_paused_seconds_total{{direction="{direction}"}}[{timing.lookback}]), 0, 1)'


def moved(selector: str, timing: Timing) -> str:
    """The per-second increase of a counter over its last interval (``> 0``: it moved in the last poll)."""
    return f"irate({selector}[{timing.lookback}])"


Severity = Literal["critical", "warning", "info"]


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One alerting rule. ``for_s`` is written for the reference 15 s scrape; :class:`Timing` scales it."""

    name: str
    expr: str
    severity: Severity
    detector: str
    summary: str
    for_s: float = 0.0
    recommendation: str = ""
    comment: str = ""
    """Why the rule is written as it is (rendered as a YAML comment above it)."""


@dataclass(frozen=True, slots=True)
class RecordRule:
    record: str
    expr: str
