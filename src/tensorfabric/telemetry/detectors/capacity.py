"""Capacity trend (R9): is the paused share of the lossless priorities rising towards the budget?

A counter rising linearly is a steady load; exhaustion is a *rising rate*. The detector buckets each RX pause
series into hourly paused fractions, then fits a robust (Theil-Sen) slope using only pairs of buckets a whole
number of days apart, so the daily load cycle cancels out instead of posing as a trend. With less than
``capacity_min_history_s`` of history no trend is claimed; only a level already over budget is reported.

The recommendation depends on where the pause sits: a few hot ports carrying most of it point to placement
(rebalance TP/PP groups or ECMP), a fabric-wide rise points to too little capacity (resize the topology).
"""

from __future__ import annotations

import statistics
from itertools import pairwise

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import DAY_S, Detector, Thresholds
from tensorfabric.telemetry.metrics import spec
from tensorfabric.telemetry.rates import counter_delta
from tensorfabric.telemetry.rules.promql import PRIO_PORT, AlertRule, Timing, duration
from tensorfabric.telemetry.window import Labels, Window, label_of, subject_of

__all__ = ["DETECTOR", "buckets", "detect", "rules", "seasonal_slope"]


def buckets(window: Window, labels: Labels, step_s: float) -> dict[int, float]:
    """Paused fraction per ``step_s`` bucket (keyed by bucket index) of one paused-seconds series."""
    paused: dict[int, float] = {}
    elapsed: dict[int, float] = {}
    # Points are time-sorted, so each bucket's intervals are consecutive: sum them in locals and store once
    # (the same additions in the same order as one dict update per interval; two weeks are ~4000 intervals
    # per series, and this runs for every lossless RX series each hour).
    metric = "roce_pfc_paused_seconds_total"
    entry = spec(metric)
    wrap = entry.wrap if entry else None
    current: int | None = None
    run_paused = run_elapsed = 0.0
    for (t0, v0), (t1, v1) in pairwise(window.points(metric, labels)):
        index = int(t1 // step_s)
        if index != current:
            if current is not None:
                paused[current], elapsed[current] = run_paused, run_elapsed
            current, run_paused, run_elapsed = index, 0.0, 0.0
        run_paused += v1 - v0 if v1 >= v0 else counter_delta(v0, v1, wrap)[0]
        run_elapsed += t1 - t0
    if current is not None:
        paused[current], elapsed[current] = run_paused, run_elapsed
    return {i: min(paused[i] / elapsed[i], 1.0) for i in paused if elapsed[i] > 0}


def seasonal_slope(values: dict[int, float], period: int) -> tuple[float, float]:
    """(median slope per bucket, share of positive slopes) over pairs a whole number of periods apart."""
    # only the partners a whole number of periods later: O(buckets x days), not O(buckets^2)
    last = max(values, default=0)
    slopes = [(values[j] - values[i]) / (j - i) for i in values for j in range(i + period, last + 1, period)
              if j in values]
    if not slopes:
        return 0.0, 0.0
    return statistics.median(slopes), sum(s > 0 for s in slopes) / len(slopes)


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    step = limits.capacity_step_s
    period = max(1, round(DAY_S / step))
    levels: dict[Labels, float] = {}
    trends: dict[Labels, tuple[float, float, float]] = {}
    for labels, points in window.series("roce_pfc_paused_seconds_total"):
        if not _reads(labels, limits):
            continue
        values = buckets(window, labels, step)
        if not values:
            continue
        recent = [values[i] for i in sorted(values)[-period:]]
        levels[labels] = statistics.fmean(recent)
        if points[-1][0] - points[0][0] >= limits.capacity_min_history_s:
            slope, positive = seasonal_slope(values, period)
            trends[labels] = (slope / step, positive, levels[labels])
    if not levels:
        return []
    median_level = statistics.median(levels.values())
    hot = sorted(k for k, v in levels.items()
                 if v >= max(2 * median_level, limits.capacity_budget_fraction / 4))
    concentrated = 0 < len(hot) <= max(1, len(levels) // 4)
    advice = (f"Pause is concentrated on {len(hot)} of {len(levels)} ports ({', '.join(subject_of(k) for k in hot)}): "
              "rebalance the model's parallelism -- keep TP groups inside a node or rail, move PP stage boundaries "
              "off these links, spread flows across ECMP paths -- before buying capacity." if concentrated else
              "Pause is rising across the fabric: resize the topology (more spine uplinks, lower oversubscription, "
              "faster links) or cut the lossless load; rebalancing alone will not hold the budget.")
    alerts: list[Alert] = []
    budget = limits.capacity_budget_fraction
    for labels, level in sorted(levels.items()):
        evidence: dict[str, object] = {"level_fraction": round(level, 5), "budget_fraction": budget,
                                       "hot_ports": len(hot), "ports": len(levels)}
        trend = trends.get(labels)
        if level >= budget:
            alerts.append(Alert("capacity-trend", "critical", subject_of(labels, "priority"), window.end,
                                {**evidence, "state": "over-budget"}, advice))
            continue
        if trend is None or trend[0] <= 0 or trend[1] < 0.7:
            continue
        eta_s = (budget - level) / trend[0]
        if eta_s <= limits.capacity_horizon_s:
            alerts.append(Alert("capacity-trend", "critical" if eta_s < 2 * DAY_S else "warning",
                                subject_of(labels, "priority"), window.end,
                                {**evidence, "state": "trending", "slope_per_day": trend[0] * DAY_S,
                                 "positive_pairs": round(trend[1], 3),
                                 "budget_crossed_in_days": round(eta_s / DAY_S, 2),
                                 "budget_crossed_at": window.end + eta_s}, advice))
    return alerts


def _reads(labels: Labels, limits: Thresholds) -> bool:
    """The series this detector reads: time paused by the peer (RX) on a lossless priority."""
    return label_of(labels, "direction") == "rx" and (label_of(labels, "priority") or "") in limits.lossless_priorities


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    hourly = f'roce:pfc_paused_fraction:rate1h{{direction="rx", priority=~"{"|".join(limits.lossless_priorities)}"}}'
    budget = f"{limits.capacity_budget_fraction:g}"
    history = duration(limits.capacity_min_history_s)
    return (
        AlertRule("RocePauseBudgetForecast",
                  f"predict_linear({hourly}[{history}], {limits.capacity_horizon_s:.0f}) > {budget}\n"
                  f"  and on ({PRIO_PORT})\n"
                  f"(time() - min_over_time(timestamp({hourly})[{history}:1h])\n"
                  f"  > {0.75 * limits.capacity_min_history_s:.0f})",
                  "warning", "capacity-trend",
                  "{{ $labels.host }} {{ $labels.port }}: paused share forecast over the "
                  f"{limits.capacity_budget_fraction:.0%} budget within {limits.capacity_horizon_s / DAY_S:g} days",
                  for_s=3600.0,
                  recommendation="Hot ports only -> rebalance TP/PP placement or ECMP; fabric-wide -> resize the "
                                 "topology.",
                  comment="a long extrapolation of a young series amplifies its start-up noise: it needs three "
                          "quarters of the detector's minimum history"),
        AlertRule("RocePauseOverBudget", f"{hourly} > {budget}", "critical", "capacity-trend",
                  "{{ $labels.host }} {{ $labels.port }}: paused {{ $value | humanizePercentage }} over the last hour",
                  for_s=1800.0),
    )


DETECTOR = Detector("capacity-trend", 14 * DAY_S, detect, long_metrics=("roce_pfc_paused_seconds_total",),
                    every_s=3600.0, long_series=_reads, rules=rules)
