"""The monitor's poll loop: build a :class:`Monitor` from what the user named, poll it every interval (or let the
exporter's scrapes poll it), record every sample, and say how it ended.

With an exporter every scrape reads the sources itself unless the last poll is under a second old (collect on
scrape); the loop polls only when nobody scraped for an interval, and ``polls`` counts the scrapes' polls too.
Ctrl-C and SIGTERM (raised as :class:`~tensorfabric.errors.Interrupted`) pass through after the server is
closed, so the shell sees 130/143: a supervisor that stopped the monitor must not read "exited 0, all clear".
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorfabric.errors import InputError
from tensorfabric.findings import Finding, exit_code_for
from tensorfabric.intake import ReadReport
from tensorfabric.samples import Alert
from tensorfabric.telemetry.engine import Monitor, PollResult

__all__ = ["LoopOptions", "LoopOutcome", "MonitorSetup", "Shown", "build_monitor", "read_reports", "watch"]

log = logging.getLogger("tensorfabric.monitor")

_NO_SOURCE = "monitor: give at least one --source KIND:ARG (e.g. --source ethtool:eth0)"


@dataclass(frozen=True, slots=True)
class MonitorSetup:
    """What to watch and how to judge it, in the user's words (source specs, detector names, ``--set`` items)."""

    sources: tuple[str, ...]
    host: str | None = None
    """Host label for local sources (None: this machine's name)."""
    detectors: tuple[str, ...] = ()
    """Detector names to run (empty: all)."""
    settings: tuple[str, ...] = ()
    """``KEY=VALUE`` threshold overrides."""
    links_path: str | None = None
    source_deadline_s: float | None = 5.0
    counters_allow: str | None = None
    counters_deny: str | None = None
    counters_max: int = 1024


@dataclass(frozen=True, slots=True)
class LoopOptions:
    """How long to watch and where the results go."""

    interval_s: float = 15.0
    polls: int | None = None
    """Stop after this many polls, the scrapes' included (None: until interrupted)."""
    once: bool = False
    """One poll, judged on its own as well (a single dump has no time series)."""
    record: str | None = None
    """Append every sample as a JSON line to this file (never through a symbolic link)."""
    listen: str | None = None
    """Serve Prometheus metrics on this HOST:PORT; the loop then shows nothing."""
    allow_remote: bool = False
    """Allow ``listen`` on a non-loopback address."""
    labels: tuple[str, ...] = ()
    """``KEY=VALUE`` constant labels added to every exported series."""


@dataclass(frozen=True, slots=True)
class Shown:
    """One poll the loop made, for a renderer."""

    monitor: Monitor
    result: PollResult
    poll_no: int
    findings: tuple[Finding, ...]
    """With ``once``: what the dump shows on its own."""
    reads: Mapping[str, ReadReport]
    """The read report of every source of pasted text, by source name."""


@dataclass(frozen=True, slots=True)
class LoopOutcome:
    """How the watch ended: exit code 1 when alerts stand, a source failed its last poll, or (``once``) the dump's
    own findings hold an error."""

    polls: int
    alerts: tuple[Alert, ...]
    failed: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def exit_code(self) -> int:
        return 1 if self.alerts or self.failed or exit_code_for(self.findings) else 0


def build_monitor(setup: MonitorSetup) -> Monitor:
    """Open every source (one poll clock for all: one detector run per poll) and the monitor judging them."""
    from tensorfabric.telemetry.clock import PollClock
    from tensorfabric.telemetry.detectors import load
    from tensorfabric.telemetry.monitor_inputs import read_links, source_spec, thresholds
    from tensorfabric.telemetry.sources import SourceContext, open_source
    from tensorfabric.telemetry.sources.base import CounterFilter

    if not setup.sources:
        raise InputError(_NO_SOURCE)
    clock = PollClock()
    counters = CounterFilter.parse(setup.counters_allow, setup.counters_deny, setup.counters_max)
    ctx = SourceContext(clock=clock, counters=counters) if setup.host is None else SourceContext(
        host=setup.host, clock=clock, counters=counters)
    opened = [open_source(source_spec(spec), ctx) for spec in setup.sources]
    detectors = load(setup.detectors)
    limits = thresholds(setup.settings, read_links(setup.links_path))
    return Monitor(opened, detectors=detectors, limits=limits, clock=clock, source_deadline_s=setup.source_deadline_s)


def read_reports(monitor: Monitor) -> dict[str, ReadReport]:
    """The read report of every source of pasted text, by source name."""
    reads = ((s.name, getattr(s, "last_read", None)) for s in monitor.sources)
    return {name: report for name, report in reads if isinstance(report, ReadReport)}


def watch(setup: MonitorSetup, options: LoopOptions, show: Callable[[Shown], None]) -> LoopOutcome:
    """Build the monitor and poll it until ``options`` say stop; ``show`` gets every poll the loop itself made
    (none with an exporter)."""
    from tensorfabric.telemetry.monitor_inputs import const_labels

    if not setup.sources:  # refused before anything is parsed, opened or bound
        raise InputError(_NO_SOURCE)
    endpoint = None
    if options.listen:
        from tensorfabric.telemetry.exporter import parse_listen

        endpoint = parse_listen(options.listen, allow_remote=options.allow_remote)
    labels = const_labels(options.labels)
    monitor = build_monitor(setup)
    server = None if endpoint is None else _serve(monitor, endpoint, options, labels)
    try:
        if options.record:
            _check_record(options.record)
        return _loop(monitor, options, show, server is not None)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()


def _serve(monitor: Monitor, endpoint: tuple[str, int], options: LoopOptions, labels: dict[str, str]) -> Any:
    from tensorfabric.telemetry.exporter import serve

    host, port = endpoint
    try:
        # no lock: concurrent scrapes and this loop share the poll in flight (Monitor.poll is single-flight)
        server, _ = serve(monitor, host, port, max_age_s=min(1.0, options.interval_s), const_labels=labels)
    except OSError as exc:  # busy port, address not on this host, unresolvable name: the user's to fix
        raise InputError(f"--serve {options.listen!r}: {exc.strerror or exc}; pick a free port and an address of "
                         "this host, e.g. 127.0.0.1:9108") from None
    log.info("serving Prometheus metrics on http://%s:%d/metrics", host, port)
    return server


def _loop(monitor: Monitor, options: LoopOptions, show: Callable[[Shown], None], serving: bool) -> LoopOutcome:
    total = 1 if options.once else options.polls
    interval = options.interval_s
    done = 0
    findings: tuple[Finding, ...] = ()

    def finished() -> bool:
        return total is not None and done >= total

    def on_poll(result: PollResult) -> None:  # every poll, the loop's or a scrape's (called with the lock held)
        nonlocal done
        if finished():
            return  # a scrape between the last counted poll and the server's shutdown
        done += 1
        if options.record:
            _append(options.record, "".join(s.to_json() + "\n" for s in result.samples))

    monitor.listeners.append(on_poll)
    while True:
        # with an exporter, scrapes poll; this loop fills in only when nobody scraped for an interval
        scraped = (serving and monitor.polled_at is not None and time.monotonic() - monitor.polled_at < interval)
        result = None if scraped else monitor.poll()
        if result is None:
            if finished():
                break
            time.sleep(min(interval, 1.0))
            continue
        if options.once:  # a single dump (a ticket) has no time series: judge what the counters show on their own
            from tensorfabric.telemetry.snapshot import snapshot_findings

            findings = tuple(snapshot_findings(result.samples))
        if not serving:
            show(Shown(monitor, result, done, findings, read_reports(monitor)))
        if finished():
            break
        until = time.monotonic() + interval
        while time.monotonic() < until and not finished():
            time.sleep(max(0.0, min(0.2, until - time.monotonic())))  # scrapes may reach the count meanwhile
        if finished():
            break
    failed = tuple(name for name, status in monitor.status.items() if not status.up)
    if failed:
        log.warning("source(s) failed their last poll: %s", ", ".join(failed))
    return LoopOutcome(done, monitor.alerts, failed, findings)


def _check_record(path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    if os.path.islink(path):  # refused before the first poll, not after it
        raise InputError(f"--record {path!r} is a symbolic link; give the file itself")


def _append(path: str, text: str) -> None:
    """Append to the record without following a symlink (O_NOFOLLOW): a link planted at the path must not
    redirect the samples into another file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"--record {path!r} is a symbolic link; give the file itself") from None
        raise
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(text)
