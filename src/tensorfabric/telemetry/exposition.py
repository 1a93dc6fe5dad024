"""What one scrape exposes, as plain records, and a fast text renderer for the built-in HTTP server.

``snapshot`` turns a Monitor into metric families (the newest sample of every series, the active alerts,
source health, counter resets). Two renderers consume it: :class:`tensorfabric.telemetry.exporter.FabricCollector`
hands it to prometheus_client (for anyone embedding the collector in their own registry), and
:class:`TextRenderer` writes the Prometheus text format directly. The second exists for speed: 64 NICs x ~150
counters is ~9 000 series, and formatting each through the client's generic path costs ~100 us per series on
our hardware -- far over the 50 ms scrape budget -- while the label part of a series never changes between
scrapes and can be escaped once and cached. The tests check both renderers expose the same samples.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from tensorfabric.samples import Alert, Sample
from tensorfabric.telemetry.engine import Monitor, SourceStatus
from tensorfabric.telemetry.metrics import LABELS, METRICS

__all__ = ["RESERVED_LABELS", "Family", "TextRenderer", "snapshot"]

_BAD = re.compile(r"[^a-zA-Z0-9_:]")


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family of a scrape: ``name`` as exposed (counters end in ``_total``)."""

    name: str
    kind: str
    help: str
    labelnames: tuple[str, ...]
    rows: tuple[tuple[tuple[str, ...], float], ...]
    series_keys: tuple[object, ...] = ()
    """Stable identity of each row (for caching the rendered label text)."""


def _sample_families(monitor: Monitor) -> list[Family]:
    by_metric: dict[str, list[tuple[object, Sample]]] = defaultdict(list)
    for key, sample in monitor.latest_by_series().items():
        by_metric[sample.metric].append((key, sample))
    families: list[Family] = []
    for metric, group in sorted(by_metric.items()):
        entry = METRICS.get(metric)
        first = group[0][1]
        kind = entry.kind if entry else first.kind
        name = _BAD.sub("_", metric)
        if kind == "counter" and not name.endswith("_total"):
            name += "_total"
        keys = sorted({k for _, s in group for k in s.labels})
        labelnames = tuple(_BAD.sub("_", k) for k in keys)
        rows = tuple((tuple(s.labels.get(k, "") for k in keys), float(s.value)) for _, s in group)
        families.append(Family(name, kind, entry.help if entry else f"{metric} (from replay)", labelnames, rows,
                               tuple((key, labelnames) for key, _ in group)))
    return families


RESERVED_LABELS = frozenset((*LABELS, "version", "source", "detector", "severity", "subject", "metric", "kind",
                             "job", "instance"))
"""Label names a constant label (``monitor --label``) may not take: the catalogue's, those of the exporter's own
families below, and the two Prometheus sets on every scrape."""

VERSION = "1"
"""Exposition schema version in ``tensorfabric_exporter_info`` (bumped when metric names change)."""


def _own_families(alerts: Iterable[Alert], status: dict[str, SourceStatus], resets: dict[tuple[str, str], int],
                  samples: int) -> list[Family]:
    return [
        Family("tensorfabric_exporter_info", "gauge",
               "1 while a tensorfabric exporter serves (rules alert when it disappears)", ("version",),
               (((VERSION,), 1.0),)),
        Family("tensorfabric_source_recognised_samples", "gauge",
               "Canonical samples in the source's last reading; 0 while it reads counters = unknown driver",
               ("source",), tuple(((name,), float(max(st.recognised, 0))) for name, st in sorted(status.items())
                                  if st.recognised >= 0)),
        Family("tensorfabric_alert", "gauge", "1 for every active detector alert", ("detector", "severity", "subject"),
               tuple(((a.detector, a.severity, a.subject), 1.0) for a in alerts)),
        Family("tensorfabric_source_up", "gauge",
               "1 if the source answered its last poll cleanly; 0 when it failed, met errors or gave no answer by "
               "the deadline (then tensorfabric_source_stale_seconds says how old its served values are)", ("source",),
               tuple(((name,), 1.0 if st.up else 0.0) for name, st in sorted(status.items()))),
        Family("tensorfabric_source_stale_seconds", "gauge",
               "Age of the values served for the source when the last poll began: 0 when it answered, else "
               "seconds since it last did (its last good values stand in until they are forgotten)", ("source",),
               tuple(((name,), st.stale_s) for name, st in sorted(status.items()) if st.stale_s is not None)),
        Family("tensorfabric_source_errors_total", "counter",
               "Errors met by a source (failed polls, bad files or counters)", ("source",),
               tuple(((name,), float(st.errors_total)) for name, st in sorted(status.items()))),
        Family("tensorfabric_counter_resets_total", "counter",
               "Counters that went down between polls, by metric and kind (wrap or reset)", ("metric", "kind"),
               tuple(((metric, kind), float(count)) for (metric, kind), count in sorted(resets.items()))),
        Family("tensorfabric_poll_samples", "gauge", "Samples held from the latest polls", (), (((), float(samples)),)),
    ]


def _resets(monitor: Monitor) -> dict[tuple[str, str], int]:
    return dict(monitor.rates.event_counts)


def snapshot(monitor: Monitor, const_labels: dict[str, str] | None = None) -> list[Family]:
    """Every family one scrape exposes, each series with ``const_labels`` added. Call with the monitor's lock
    held."""
    sample_families = _sample_families(monitor)
    held = sum(len(f.rows) for f in sample_families)
    families = sample_families + _own_families(monitor.alerts, dict(monitor.status), _resets(monitor), held)
    if not const_labels:
        return families
    names, values = tuple(const_labels), tuple(const_labels.values())
    return [Family(f.name, f.kind, f.help, f.labelnames + names, tuple((row + values, v) for row, v in f.rows),
                   tuple((key, names) for key in f.series_keys)) for f in families]


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


class TextRenderer:
    """Prometheus text format 0.0.4, with each series' ``name{labels}`` prefix escaped once and reused."""

    def __init__(self, const_labels: dict[str, str] | None = None) -> None:
        self._const = "".join(f',{k}="{_escape(v)}"' for k, v in (const_labels or {}).items())
        """Labels added to every series (``monitor --label cluster=NAME``), escaped once."""
        self._prefix: dict[object, str] = {}
        self._labels: dict[str, tuple[str, ...]] = {}
        self._seen: dict[str, set[object]] = defaultdict(set)

    def render_monitor(self, monitor: Monitor) -> bytes:
        """One scrape of ``monitor`` (call with its lock held): samples straight from its latest-value table."""
        by_metric: dict[str, list[tuple[tuple[str, tuple[tuple[str, str], ...]], Sample]]] = defaultdict(list)
        for key, sample in monitor.latest_by_series().items():
            by_metric[key[0]].append((key, sample))
        out: list[str] = []
        cache = self._prefix
        held = 0
        for metric in sorted(by_metric):
            group = by_metric[metric]
            held += len(group)
            seen = self._seen[metric]
            keys = self._labels.get(metric, ())
            fresh = [key for key, _ in group if key not in seen]
            if fresh:  # a new series may bring a label the family has not had yet
                seen.update(fresh)
                keys = tuple(sorted(set(keys) | {name for key in fresh for name, _ in key[1]}))
                self._labels[metric] = keys
            entry = METRICS.get(metric)
            kind = entry.kind if entry else group[0][1].kind
            name = _BAD.sub("_", metric)
            if kind == "counter" and not name.endswith("_total"):
                name += "_total"
            doc = entry.help if entry else f"{metric} (from replay)"
            out.append(f"# HELP {name} {_escape(doc)}\n# TYPE {name} {kind}\n")
            for key, sample in group:
                prefix = cache.get((key, keys))
                if prefix is None:
                    found = dict(key[1])
                    labels = ",".join(f'{_BAD.sub("_", k)}="{_escape(found.get(k, ""))}"' for k in keys) + self._const
                    labels = labels.lstrip(",")
                    prefix = cache[(key, keys)] = f"{name}{{{labels}}} " if labels else f"{name} "
                out.append(prefix + _number(sample.value) + "\n")
        own = _own_families(monitor.alerts, dict(monitor.status), _resets(monitor), held)
        return "".join(out).encode() + self.render(own)

    def render(self, families: Iterable[Family]) -> bytes:
        out: list[str] = []
        cache = self._prefix
        for family in families:
            out.append(f"# HELP {family.name} {_escape(family.help)}\n# TYPE {family.name} {family.kind}\n")
            for index, (values, number) in enumerate(family.rows):
                key = family.series_keys[index] if family.series_keys else None
                prefix = cache.get(key) if key is not None else None
                if prefix is None:
                    labels = ",".join(f'{n}="{_escape(v)}"' for n, v in zip(family.labelnames, values, strict=True))
                    labels = (labels + self._const).lstrip(",")
                    prefix = f"{family.name}{{{labels}}} " if labels else f"{family.name} "
                    if key is not None:
                        cache[key] = prefix
                out.append(prefix + _number(number) + "\n")
        if len(cache) > 200_000:  # series churn (e.g. replayed files with changing labels): start over
            cache.clear()
        return "".join(out).encode()
