"""What every detector shares: the Detector record, the thresholds and small helpers over a Window.

Thresholds come from the reference (telemetry.md section 6); those marked "proposal" there need tuning on real
data, which is why every one of them is a field here rather than a constant in a detector. The Prometheus rules
are generated from the same fields (``telemetry/rules``), so a threshold changed here changes both.

Every alert carries the age of its evidence (``evidence["age_s"]``, seconds since the newest sample it rests on,
and ``evidence["seen_at"]``, that sample's time). Detectors only read fresh series (see
:data:`~tensorfabric.telemetry.window.STALE_INTERVALS`), so at detection the age is 0; :func:`aged` grows it while
no new sample arrives and drops the alert once the evidence has stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from tensorfabric import roce
from tensorfabric.samples import Alert
from tensorfabric.telemetry.rules.promql import HOST_PRIO, Timing, paused
from tensorfabric.telemetry.window import STALE_INTERVALS, Labels, Window, label_of
from tensorfabric.topology import Endpoint

if TYPE_CHECKING:
    from tensorfabric.telemetry.rules.promql import AlertRule

__all__ = ["Detector", "Thresholds", "aged", "held", "held_promql", "paused_fractions", "storm_roots",
           "storm_roots_promql"]

DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every tunable of every detector, with the reference's defaults."""

    lossless_priorities: tuple[str, ...] = tuple(str(p) for p in roce.SONIC_LOSSLESS_PRIORITIES)
    lossless_queue_names: tuple[str, ...] = ("no-loss", "fcoe")
    """Queues named by forwarding class that are lossless by default (Junos' no-loss and fcoe classes); numbered
    queues (``3``, ``voq3``) are lossless when their number is a lossless priority."""
    storm_tx_fraction: float = 0.9
    """A port sending pause this share of an interval is storming (NIC watchdog acts at 100 ms of stall)."""
    victim_rx_fraction: float = 0.9
    """R3: paused by the peer this share of the interval, with no XON transitions and no dequeue."""
    origin_tx_fraction: float = 0.9
    origin_rx_max_fraction: float = 0.05
    origin_victim_rx_fraction: float = 0.5
    spread_fraction: float = 0.05
    """R5 theta: a port both receiving and sending pause above this share is relaying congestion."""
    spread_min_ports: int = 2
    deadlock_fraction: float = 0.99
    flap_restores: int = 10
    """R2: more watchdog restorations than this within ``flap_window_s`` is flapping (sonic-buildimage#29203)."""
    flap_window_s: float = 1200.0
    retrans_baseline_per_s: float = 1.0
    ecn_min_marks: float = 10.0
    pause_without_ecn_fraction: float = 0.05
    capacity_budget_fraction: float = 0.05
    """Pause-time fraction the operator accepts on a lossless priority (proposal)."""
    capacity_horizon_s: float = 14 * DAY_S
    capacity_min_history_s: float = 2 * DAY_S
    capacity_step_s: float = 3600.0
    corrected_ber_max: float = 1e-5
    flaps_critical: int = 3
    links: tuple[tuple[Endpoint, Endpoint], ...] = field(default=())
    """Cabling (device = the ``host`` label, port = the ``port`` label) for the deadlock cycle check."""


Detect = Callable[[Window, Thresholds], list[Alert]]


def _dated(detect: Detect) -> Detect:
    """``detect`` with the evidence's time and age (0: it rests on this window's newest poll) in every alert."""

    def run(window: Window, limits: Thresholds) -> list[Alert]:
        found = detect(window, limits)
        if not found:
            return found
        stamp = {"seen_at": window.end, "age_s": 0.0, "poll_interval_s": window.poll_interval()}
        return [Alert(a.detector, a.severity, a.subject, a.since, {**a.evidence, **stamp}, a.recommendation)
                for a in found]

    run.__wrapped__ = detect  # type: ignore[attr-defined]
    return run


def aged(alerts: Iterable[Alert], idle_s: float) -> tuple[Alert, ...]:
    """The alerts of the last evaluation still standing ``idle_s`` seconds after it (no sample arrived since), each
    with its evidence's age (``idle_s``: calling it again with a longer idle time is not cumulative).

    An alert whose evidence missed more than :data:`STALE_INTERVALS` of the pace it arrived at
    (``evidence["poll_interval_s"]``) is dropped: the source that showed it ended or stopped answering, and a
    verdict nothing supports any more must resolve (a replay read to its end must not fire for ever). Alerts
    without an interval (made outside a Detector) keep standing. This is what the engine applies on a poll that
    brought no new sample, when it cannot run the detectors on anything new.
    """
    out: list[Alert] = []
    for alert in alerts:
        interval = float(alert.evidence.get("poll_interval_s", 0.0) or 0.0)
        age = max(idle_s, 0.0)
        if interval > 0 and age > STALE_INTERVALS * interval:
            continue
        out.append(Alert(alert.detector, alert.severity, alert.subject, alert.since,
                         {**alert.evidence, "age_s": round(age, 3)}, alert.recommendation))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class Detector:
    """A named pure function from a window of samples to alerts. ``lookback_s`` is how much history it reads.

    ``detect`` is the module's function with the evidence's time and age added to every alert's evidence."""

    name: str
    lookback_s: float
    detect: Detect
    long_metrics: tuple[str, ...] = ()
    """Metrics this detector needs beyond the short window (kept downsampled by the engine)."""
    long_series: Callable[[Labels, Thresholds], bool] | None = None
    """Which series of ``long_metrics`` it reads (None: all of them); the engine keeps only those downsampled,
    since two weeks of points for series nobody reads cost memory and garbage-collector time on every poll."""
    every_s: float = 0.0
    """Re-run at most this often (a trend over days does not change between 15-second polls)."""
    rules: Callable[[Thresholds, Timing], tuple[AlertRule, ...]] | None = None
    """Its Prometheus alerting rules, written from the same thresholds beside the Python that judges them (the
    rules package renders them into ``roce.rules.yml``)."""

    def __post_init__(self) -> None:
        if not hasattr(self.detect, "__wrapped__"):
            object.__setattr__(self, "detect", _dated(self.detect))


def paused_fractions(window: Window, direction: str, intervals: int = 1) -> list[tuple[Labels, float]]:
    """(labels, paused share of the last intervals) for every pause-duration series in ``direction``."""
    key = ("paused_fractions", direction, intervals)
    cached = window.memo.get(key)
    if cached is None:
        cached = []
        if intervals == 1:  # what every detector asks for: all series' last intervals, computed once
            for labels, increase, seconds in window.last_increases("roce_pfc_paused_seconds_total",
                                                                   direction=direction):
                if seconds > 0:  # a share of time: clamped to [0, 1] whatever the counter did
                    cached.append((labels, min(max(increase / seconds, 0.0), 1.0)))
        else:
            for labels, _ in window.series("roce_pfc_paused_seconds_total", direction=direction):
                fraction = window.rate("roce_pfc_paused_seconds_total", labels, intervals)
                if fraction is not None:
                    cached.append((labels, min(max(fraction, 0.0), 1.0)))
        window.memo[key] = cached
    return list(cached)


@lru_cache(maxsize=1 << 16)  # pure, and detectors ask it for the same label tuples on every poll
def without(labels: Labels, *keys: str) -> Labels:
    return tuple((k, v) for k, v in labels if k not in keys)


# A storm is a tree: its root pauses its peer without being paused itself. A device with a port held by its peer
# on a priority relays that pause (or is deadlocked) on the priority; it is not a root. pause-storm, storm-origin
# and deadlock share these two definitions, in Python and in PromQL.

def held(window: Window, limits: Thresholds) -> set[tuple[str, str]]:
    """(host, priority) pairs with a port paused by its peer at least ``origin_victim_rx_fraction`` of the last
    interval."""
    key = ("held", limits.origin_victim_rx_fraction)
    found = window.memo.get(key)
    if found is None:
        found = window.memo[key] = {(label_of(k, "host") or "", label_of(k, "priority") or "")
                                    for k, f in paused_fractions(window, "rx")
                                    if f >= limits.origin_victim_rx_fraction}
    return set(found)


def storm_roots(window: Window, limits: Thresholds) -> list[tuple[Labels, float]]:
    """TX pause series at or above ``storm_tx_fraction`` on a (host, priority) that is not :func:`held`."""
    holding = held(window, limits)
    return [(k, f) for k, f in paused_fractions(window, "tx") if f >= limits.storm_tx_fraction
            and (label_of(k, "host") or "", label_of(k, "priority") or "") not in holding]


def held_promql(limits: Thresholds, timing: Timing) -> str:
    """:func:`held` in PromQL: one series per (exporter, host, priority) that is held."""
    return f'max by ({HOST_PRIO}) ({paused("rx", timing)}) >= {limits.origin_victim_rx_fraction:g}'


def storm_roots_promql(limits: Thresholds, timing: Timing) -> str:
    """:func:`storm_roots` in PromQL."""
    return (f'{paused("tx", timing)} >= {limits.storm_tx_fraction:g}\n'
            f'  unless on ({HOST_PRIO})\n{held_promql(limits, timing)}')
