"""Prometheus exporter: a custom Collector that builds every metric family fresh on each scrape, and the server.

Nothing is held in prometheus_client's stateful metric objects: each scrape takes a :func:`snapshot` of the
monitor -- newest sample per series, ``tensorfabric_alert{detector,severity,subject} 1`` for active alerts,
``tensorfabric_source_up`` / ``tensorfabric_source_errors_total`` per source, counter resets and wraps -- so
a source that fails is reported while every other source keeps being served. :class:`FabricCollector` plugs
into any prometheus_client registry; the built-in server renders the same snapshot with the cached
:class:`TextRenderer` (see exposition.py for why). prometheus_client is imported only in this module.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tensorfabric.errors import InputError
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.exposition import Family, TextRenderer, snapshot
from tensorfabric.telemetry.metrics import METRICS

__all__ = ["FabricCollector", "exported_names", "parse_listen", "render", "render_fast", "serve"]

_LOOPBACK = ("127.", "::1", "localhost")
_OWN = ("tensorfabric_alert", "tensorfabric_source_up", "tensorfabric_source_errors_total",
        "tensorfabric_counter_resets_total", "tensorfabric_poll_samples")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def exported_names() -> set[str]:
    """Every metric name the exporter can emit (catalogue plus its own), as they appear on the wire."""
    return set(METRICS) | set(_OWN)


def _client_family(family: Family) -> Any:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    if family.kind == "counter":
        # the client appends _total to counter families itself
        built: Any = CounterMetricFamily(family.name.removesuffix("_total"), family.help,
                                         labels=list(family.labelnames))
    else:
        built = GaugeMetricFamily(family.name, family.help, labels=list(family.labelnames))
    for values, number in family.rows:
        built.add_metric(list(values), number)
    return built


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
            families = snapshot(self.monitor)
        for family in families:
            yield _client_family(family)


def render(monitor: Monitor, *, poll: bool = False) -> bytes:
    """One scrape through prometheus_client's own exposition code."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(FabricCollector(monitor, poll_on_scrape=poll))  # type: ignore[arg-type]
    return bytes(generate_latest(registry))


def render_fast(monitor: Monitor, renderer: TextRenderer, *, poll: bool = False) -> bytes:
    """One scrape through the cached text renderer (what the built-in server sends)."""
    if poll:
        monitor.poll()
    return renderer.render_monitor(monitor)


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


def serve(monitor: Monitor, host: str, port: int, lock: threading.Lock) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Serve ``/metrics`` in a daemon thread; returns (server, thread). Call server.shutdown() to stop."""
    renderer = TextRenderer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 -- the http.server API
            if self.path.split("?")[0] not in ("/", "/metrics"):
                self.send_error(404, "only /metrics is served")
                return
            with lock:
                body = renderer.render_monitor(monitor)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- keep scrapes out of stderr
            return

    server_class = ThreadingHTTPServer
    if ":" in host:
        import socket

        class V6Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6

        server_class = V6Server
    server = server_class((host, port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="tensorfabric-exporter", daemon=True)
    thread.start()
    return server, thread
