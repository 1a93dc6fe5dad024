"""The Grafana dashboard and the rules query only metrics the exporter emits."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tensorfabric.telemetry.exporter import exported_names

from .telemetry_support import DASHBOARD, RULES

_FUNCTIONS = {
    "rate", "irate", "increase", "sum", "max", "min", "avg", "count", "by", "without", "on", "ignoring", "and", "or",
    "unless", "group_left", "group_right", "predict_linear", "deriv", "label_replace", "label_values", "time",
    "timestamp", "min_over_time", "max_over_time", "count_over_time", "topk", "bottomk", "group", "abs", "bool",
    "offset", "histogram_quantile", "humanizePercentage", "clamp", "absent", "last_over_time",
}


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, labels, strings or ranges."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"#[^\n]*", "", text)  # PromQL comments
    text = re.sub(r"label_values\(([^,()]+),\s*\w+\)", r"\1", text)  # Grafana: label_values(metric, label)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)  # label lists
    text = re.sub(r"\$\w+", "", text)  # Grafana variables
    text = re.sub(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", "", text)  # numbers such as 1e-5
    names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text))
    return {n for n in names if n not in _FUNCTIONS and not re.fullmatch(r"\d+[smhdwy]|e\d+", n)}


def _exprs(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            # template variables' "query" is PromQL too (label_values(...)); a datasource's is just a type name
            if isinstance(value, str) and (key == "expr" or (key == "query" and "(" in value)):
                found.append(value)
            else:
                found += _exprs(value)
    elif isinstance(node, list):
        for item in node:
            found += _exprs(item)
    return found


def test_dashboard_queries_use_only_exported_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = _exprs(dashboard)
    assert len(exprs) >= 20
    used = set().union(*(metric_names(e) for e in exprs))
    assert used, "no metric found: the extractor is broken"
    assert used <= exported_names(), f"not exported: {sorted(used - exported_names())}"
    for needed in ("roce_pfc_paused_seconds_total", "roce_ecn_marked_packets_total", "roce_cnp_sent_total",
                   "roce_discards_total", "roce_retransmissions_total", "tensorfabric_alert"):
        assert needed in used


def test_dashboard_panels_cover_the_issue() -> None:
    titles = " ".join(p["title"].lower() for p in json.loads(DASHBOARD.read_text())["panels"])
    for word in ("pause-time fraction", "ecn", "discards", "retransmissions", "alerts"):
        assert word in titles


def test_rules_use_only_exported_and_recorded_metrics() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    recorded = {r["record"] for g in groups for r in g["rules"] if "record" in r}
    used = set().union(*(metric_names(r["expr"]) for g in groups for r in g["rules"]))
    # up is Prometheus' own per-target series (the exporter-down rule reads it)
    assert used - recorded <= exported_names() | {"ALERTS", "up"}, sorted(used - recorded - exported_names())
    assert {r["labels"]["detector"] for g in groups for r in g["rules"] if "labels" in r} >= {
        "pause-storm", "pfc-watchdog", "continuous-pause", "storm-origin", "congestion-spreading", "deadlock",
        "lossless-loss", "ecn-misconfig", "capacity-trend", "link-health"}


def test_extractor_sees_through_promql() -> None:
    expr = ('sum by (host) (rate(roce_cnp_sent_total{host=~"$host"}[$__rate_interval])) / on (host) '
            'label_replace(increase(roce_queue_packets_total[1m]) > 0, "priority", "$1", "queue", "(.*)")')
    assert metric_names(expr) == {"roce_cnp_sent_total", "roce_queue_packets_total"}


def test_every_join_in_rules_and_dashboard_carries_the_exporter_identity() -> None:
    """on()/by() clauses name job and instance (per-port joins) or cluster (fabric-wide counts): two exporters
    whose host names collide must never be matched many-to-many."""
    groups = yaml.safe_load(RULES.read_text())["groups"]
    exprs = [r["expr"] for g in groups for r in g["rules"]]
    exprs += re.findall(r'"expr": "((?:[^"\\]|\\.)*)"', DASHBOARD.read_text())
    clauses = [c for e in exprs for c in re.findall(r"\b(?:on|by) \(([^)]*)\)", e)]
    assert clauses
    for clause in clauses:
        names = {n.strip() for n in clause.split(",")}
        assert {"job", "instance"} <= names or names == {"cluster", "priority"} or names == {"job", "instance"}, clause
