"""Prometheus exporter: a custom Collector that builds every metric family fresh on each scrape, and the server.

Nothing is held in prometheus_client's stateful metric objects: each scrape takes a :func:`snapshot` of the
monitor -- newest sample per series, ``tensorfabric_alert{detector,severity,subject} 1`` for active alerts,
``tensorfabric_source_up`` / ``tensorfabric_source_stale_seconds`` / ``tensorfabric_source_errors_total`` per
source, counter resets and wraps -- so a source that fails is reported while every other source keeps being
served, and one that does not answer keeps its last values, marked stale. :class:`FabricCollector` plugs
into any prometheus_client registry; the built-in server renders the same snapshot with the cached
:class:`TextRenderer` (see exposition.py for why). prometheus_client is imported only in this module.
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tensorfabric.errors import InputError
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.exposition import Family, TextRenderer, snapshot
from tensorfabric.telemetry.metrics import METRICS

__all__ = ["FabricCollector", "exported_names", "parse_listen", "render", "render_fast", "serve"]

log = logging.getLogger(__name__)

_OWN = ("tensorfabric_exporter_info", "tensorfabric_source_recognised_samples",
        "tensorfabric_alert", "tensorfabric_source_up", "tensorfabric_source_stale_seconds",
        "tensorfabric_source_errors_total",
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
    """Renders a Monitor. With ``poll_on_scrape`` every scrape polls the sources first (no background thread);
    concurrent scrapes share the poll in flight. ``lock``, when given, is held while the snapshot is taken (for
    a caller that changes the monitor outside ``poll``/``ingest``)."""

    def __init__(self, monitor: Monitor, *, poll_on_scrape: bool = False, lock: threading.Lock | None = None) -> None:
        self.monitor = monitor
        self.poll_on_scrape = poll_on_scrape
        self._lock = lock

    def describe(self) -> list[Any]:
        return []  # no fixed description: families depend on what the sources found

    def collect(self) -> Iterator[Any]:
        if self.poll_on_scrape:
            self.monitor.poll()
        with self._lock or nullcontext(), self.monitor.lock:
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
    with monitor.lock:
        return renderer.render_monitor(monitor)


Resolver = Callable[[str, int], list[str]]


def _resolve(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"--serve {host}:{port}: cannot resolve {host!r}: {exc.strerror or exc}") from exc
    return sorted({str(info[4][0]) for info in infos})


def parse_listen(text: str, *, allow_remote: bool = False, resolve: Resolver = _resolve) -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port); only loopback unless ``allow_remote`` (the exporter has no auth).

    Loopback is judged by the address the name *resolves* to, every one of them: ``127.evil.example`` may
    resolve anywhere, ``localhost`` is fine wherever it points at 127.0.0.0/8 or ::1.
    """
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--serve {text!r}: expected HOST:PORT such as 127.0.0.1:9108")
    if not allow_remote:
        addresses = resolve(host, int(port))
        remote = [a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback]
        if remote or not addresses:
            raise InputError(f"--serve {text!r}: {host} resolves to {', '.join(remote or ['nothing'])}, not a "
                             "loopback address; pass --allow-remote to expose the exporter beyond this machine")
    return host, int(port)


def serve(monitor: Monitor, host: str, port: int, lock: threading.Lock | None = None, *,
          max_age_s: float | None = None, const_labels: dict[str, str] | None = None, idle_timeout_s: float = 30.0,
          backlog: int = 128) -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Serve ``/metrics`` (GET and HEAD) in a daemon thread; returns (server, thread). Call server.shutdown().

    With ``max_age_s`` a scrape polls the sources itself when the last poll finished longer ago than that
    (collect on scrape, as the Prometheus exporter guide asks: the values are read when Prometheus stamps them,
    so scrape-to-scrape deltas are the real elapsed time). Scrapes never queue for polls of their own: one that
    arrives while a poll runs waits for that poll (at most the source deadline), and every scrape of one poll's
    result is sent the same rendered body. ``lock``, when given, is held while rendering (for a caller that
    changes the monitor outside ``poll``/``ingest``). A busy port raises InputError.
    """
    renderer = TextRenderer(const_labels)
    rendered: list[tuple[int, bytes]] = []  # (monitor.generation, body) of the last render

    def body() -> bytes:
        with lock or nullcontext(), monitor.lock:
            generation = monitor.generation
            if rendered and rendered[0][0] == generation:
                return rendered[0][1]
            text = renderer.render_monitor(monitor)
            rendered[:] = [(generation, text)]
            return text

    class Handler(BaseHTTPRequestHandler):
        timeout = idle_timeout_s  # a client that connects and says nothing is dropped after this

        def _body(self) -> bytes | None:
            if self.path.split("?")[0] not in ("/", "/metrics"):
                self.send_error(404, "only /metrics is served")
                return None
            collected = monitor.collected_at
            if max_age_s is not None and (collected is None or time.monotonic() - collected >= max_age_s):
                monitor.poll()  # joins the poll in flight, if there is one
            return body()

        def _send(self, head_only: bool) -> None:
            body = self._body()
            if body is None:
                return
            try:
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head_only:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError, TimeoutError) as exc:
                log.warning("scrape from %s ended early: %s", self.client_address[0], exc)

        def do_GET(self) -> None:  # noqa: N802 -- the http.server API
            self._send(head_only=False)

        def do_HEAD(self) -> None:  # noqa: N802
            self._send(head_only=True)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 -- keep scrapes out of stderr
            return

    class Server(ThreadingHTTPServer):
        request_queue_size = backlog
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        def handle_error(self, request: Any, client_address: Any) -> None:
            # one line, not http.server's traceback: a client that vanished is not the exporter's failure
            log.warning("client %s: %s", client_address[0] if client_address else "?", sys.exc_info()[1])

    try:
        server = Server((host, port), Handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise InputError(f"--serve {host}:{port}: the port is already in use (another exporter?); "
                             "pick another with --serve HOST:PORT") from exc
        raise InputError(f"--serve {host}:{port}: cannot listen: {exc.strerror or exc}") from exc
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="tensorfabric-exporter", daemon=True)
    thread.start()
    return server, thread
