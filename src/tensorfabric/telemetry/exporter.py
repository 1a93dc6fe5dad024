"""Prometheus exporter: a custom Collector that builds every metric family fresh on each scrape.

Nothing is held in prometheus_client's stateful metric objects: the collector renders the monitor's newest
sample per series, the active alerts (``tensorfabric_alert{detector,severity,subject} 1``), per-source health
(``tensorfabric_source_up``, ``tensorfabric_source_errors_total``) and counter resets/wraps seen by the rate
tracker. A source that fails is reported there while every other source's metrics keep being served.
prometheus_client is imported only in this module.
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from tensorfabric.errors import InputError
from tensorfabric.samples import Sample
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.metrics import METRICS

__all__ = ["FabricCollector", "exported_names", "parse_listen", "render", "serve"]

_BAD = re.compile(r"[^a-zA-Z0-9_:]")
_LOOPBACK = ("127.", "::1", "localhost")

_OWN = {
    "tensorfabric_alert": "gauge",
    "tensorfabric_source_up": "gauge",
    "tensorfabric_source_errors_total": "counter",
    "tensorfabric_counter_resets_total": "counter",
    "tensorfabric_poll_samples": "gauge",
}


def exported_names() -> set[str]:
    """Every metric name the exporter can emit (catalogue plus its own), as they appear on the wire."""
    return set(METRICS) | set(_OWN)


def _family(kind: str, name: str, doc: str, labels: list[str]) -> Any:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    if kind == "counter":
        # the client appends _total to counter families itself
        return CounterMetricFamily(name.removesuffix("_total"), doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


class FabricCollector:
    """Renders a Monitor. With ``poll_on_scrape`` every scrape polls the sources first (no background thread)."""

    def __init__(self, monitor: Monitor, *, poll_on_scrape: bool = False, lock: threading.Lock | None = None) -> None:
        self.monitor = monitor
        self.poll_on_scrape = poll_on_scrape
        self._lock = lock or threading.Lock()

    def describe(self) -> list[Any]:
        return []  # no fixed description: families depend on what the sources found

    def collect(self) -> Iterator[Any]:
        with self._lock:
            if self.poll_on_scrape:
                self.monitor.poll()
            samples = self.monitor.latest()
            alerts = self.monitor.alerts
            status = dict(self.monitor.status)
            events = list(self.monitor.counter_events)
        yield from self._samples(samples)
        alert = _family("gauge", "tensorfabric_alert", "1 for every active detector alert",
                        ["detector", "severity", "subject"])
        for a in alerts:
            alert.add_metric([a.detector, a.severity, a.subject], 1.0)
        yield alert
        up = _family("gauge", "tensorfabric_source_up", "1 if the source's last poll read anything", ["source"])
        errors = _family("counter", "tensorfabric_source_errors_total",
                         "Errors met by a source (failed polls, bad files or counters)", ["source"])
        for name, st in sorted(status.items()):
            up.add_metric([name], 1.0 if st.up else 0.0)
            errors.add_metric([name], float(st.errors_total))
        yield up
        yield errors
        resets = _family("counter", "tensorfabric_counter_resets_total",
                         "Counters that went down between polls, by metric and kind (wrap or reset)",
                         ["metric", "kind"])
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for event in events:
            counts[(event.metric, event.kind)] += 1
        for (metric, kind), count in sorted(counts.items()):
            resets.add_metric([metric, kind], float(count))
        yield resets
        polled = _family("gauge", "tensorfabric_poll_samples", "Samples held from the latest polls", [])
        polled.add_metric([], float(len(samples)))
        yield polled

    @staticmethod
    def _samples(samples: list[Sample]) -> Iterator[Any]:
        by_metric: dict[str, list[Sample]] = defaultdict(list)
        for s in samples:
            by_metric[s.metric].append(s)
        for metric, group in sorted(by_metric.items()):
            name = _BAD.sub("_", metric)
            entry = METRICS.get(metric)
            kind = entry.kind if entry else group[0].kind
            if kind == "counter" and not name.endswith("_total"):
                name += "_total"
            labels = sorted({k for s in group for k in s.labels})
            family = _family(kind, name, entry.help if entry else f"{metric} (from replay)",
                             [_BAD.sub("_", k) for k in labels])
            for s in group:
                family.add_metric([s.labels.get(k, "") for k in labels], s.value)
            yield family


def render(monitor: Monitor, *, poll: bool = False) -> bytes:
    """The exposition text of one scrape (what GET /metrics returns)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(FabricCollector(monitor, poll_on_scrape=poll))  # type: ignore[arg-type]
    return bytes(generate_latest(registry))


def parse_listen(text: str, *, allow_remote: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); only loopback unless ``allow_remote`` (the exporter has no auth)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--serve {text!r}: expected HOST:PORT such as 127.0.0.1:9108")
    if not allow_remote and not host.startswith(_LOOPBACK):
        raise InputError(f"--serve {text!r}: {host} is not a loopback address; pass --allow-remote to expose "
                         "the exporter beyond this machine")
    return host, int(port)


def serve(monitor: Monitor, host: str, port: int, lock: threading.Lock) -> tuple[Any, threading.Thread]:
    """Start the HTTP exporter in a daemon thread; returns (server, thread). Call server.shutdown() to stop."""
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(FabricCollector(monitor, lock=lock))  # type: ignore[arg-type]
    server, thread = start_http_server(port, addr=host, registry=registry)
    return server, thread
