"""``tensorfabric monitor``: poll fabric counters, detect storms/deadlock/loss/trends, serve Prometheus metrics.

Without ``--serve`` it draws a live view (top ports by paused share, alerts) every ``--interval``; ``--once
--json`` prints one poll as ``{"samples": [...], "alerts": [...]}``; ``--record PATH`` appends every sample as
a JSON line (readable again with ``--source replay:PATH``). Exit code 1 when alerts are active at the end or
a source failed its last poll; 2 for unusable input (a source spec that cannot be opened, a busy port); 130 on
Ctrl-C and 143 on SIGTERM (the exporter closed first), as for every verb.
With ``--serve`` every scrape reads the sources itself unless the last poll is under a second old (collect
on scrape); the background loop polls only when nobody scraped for ``--interval``.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import click
import yaml

from tensorfabric.cli._common import DURATION, console, emit_json
from tensorfabric.cli._options import OUTPUT_FILE, RegistryChoice, count, json_option
from tensorfabric.errors import InputError
from tensorfabric.telemetry.detectors import DETECTORS
from tensorfabric.telemetry.sources import SOURCES
from tensorfabric.topology import Endpoint

log = logging.getLogger("tensorfabric.monitor")


def _links(path: str | None) -> tuple[tuple[Endpoint, Endpoint], ...]:
    """``--links FILE``: a YAML/JSON list of ``"dev:port dev:port"`` strings or ``[a, b]`` pairs."""
    if path is None:
        return ()
    from tensorfabric.fsutil import read_input

    raw = read_input(path, "--links")
    try:
        # libyaml's loader caps nesting depth; the pure-Python one recurses until RecursionError
        data = yaml.load(raw.decode("utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    except RecursionError:
        raise InputError(f"--links {path!r}: nested too deeply; give a flat YAML or JSON list of links such as "
                         "'leaf0:Ethernet0 h0:1'") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"--links {path!r}: not UTF-8 text (byte {exc.start}); give a YAML or JSON list of "
                         "links such as 'leaf0:Ethernet0 h0:1'") from None
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"--links {path!r}: cannot read: {_one_line(str(exc))}") from None
    if not isinstance(data, list):
        raise InputError(f"--links {path!r}: expected a list of links such as 'leaf0:Ethernet0 h0:1'")
    pairs = []
    for index, item in enumerate(data):
        ends = item.split() if isinstance(item, str) else item
        if not isinstance(ends, list) or len(ends) != 2 or not all(isinstance(e, str) for e in ends):
            raise InputError(f"--links {path!r}: item {index} {item!r} is not two endpoints like "
                             "'leaf0:Ethernet0 h0:1'")
        what = f"links[{index}]"
        pairs.append((Endpoint.parse(ends[0], what=what), Endpoint.parse(ends[1], what=what)))
    return tuple(pairs)


def _append(path: str, text: str) -> None:
    """Append to the --record file without following a symlink (O_NOFOLLOW): a link planted at the path must not
    redirect the samples into another file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"--record {path!r} is a symbolic link; give the file itself") from None
        raise
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(text)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _spec(spec: str) -> str:
    """``--source PATH`` (no KIND, an existing file) is ``file:PATH``: the format is sniffed from the text."""
    kind, sep, _ = spec.partition(":")
    if (not sep or kind not in SOURCES) and Path(spec).is_file():
        return f"file:{spec}"
    return spec


def _reads(monitor: Any) -> dict[str, Any]:
    """The read report of every source of pasted text, by source name."""
    return {s.name: s.last_read for s in monitor.sources if getattr(s, "last_read", None) is not None}


def _thresholds(settings: tuple[str, ...], links: tuple[tuple[Endpoint, Endpoint], ...]) -> Any:
    from tensorfabric.telemetry.detectors import Thresholds

    fields = {f.name: f for f in dataclasses.fields(Thresholds) if f.name != "links"}
    values: dict[str, Any] = {"links": links}
    for item in settings:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in fields:
            raise InputError(f"--set {item!r}: expected KEY=VALUE with KEY one of {', '.join(sorted(fields))}")
        if key == "lossless_priorities":
            values[key] = tuple(p.strip() for p in text.split(",") if p.strip())
            continue
        try:
            number = float(text)
        except ValueError as exc:
            raise InputError(f"--set {item!r}: {text!r} is not a number") from exc
        values[key] = int(number) if fields[key].type in ("int", int) else number
    return Thresholds(**values)


@click.command("monitor")
@click.option("--source", "sources", multiple=True, metavar="KIND:ARG",
              help=f"Counter source (repeatable), KIND one of {', '.join(SOURCES.names())}; e.g. sysfs:/sys, "
                   "ethtool:eth0, replay:trace.jsonl, file:paste.txt (any pasted counter output, format sniffed; "
                   "a bare existing PATH means file:PATH).")
@click.option("--interval", type=DURATION, default="15s", show_default=True, help="Time between polls.")
@click.option("--serve", "listen", metavar="HOST:PORT", help="Serve Prometheus metrics, e.g. 127.0.0.1:9108.")
@click.option("--allow-remote", is_flag=True, help="Allow --serve on a non-loopback address.")
@click.option("--once", is_flag=True, help="Poll once, print, exit.")
@click.option("--polls", type=count(1, None), help="Stop after this many polls.")
@json_option("Machine output (with --once: one JSON document).")
@click.option("--record", type=OUTPUT_FILE, help="Append every sample as a JSON line to PATH.")
@click.option("--links", "links_path", type=click.Path(dir_okay=False), help="Cabling for the deadlock cycle check.")
@click.option("--detector", "detector_names", multiple=True, type=RegistryChoice(DETECTORS), metavar="NAME",
              help=f"Run only this detector (repeatable): {', '.join(DETECTORS.names())}.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Override a detector threshold.")
@click.option("--host", "host_label", help="Host label for local sources (default: this machine's name).")
@click.option("--label", "const_labels", multiple=True, metavar="KEY=VALUE",
              help="Add a label to every exported series, e.g. --label cluster=prod-a (repeatable).")
@click.option("--source-deadline", type=DURATION, default="5s", show_default=True,
              help="Longest a poll waits for its sources, read in parallel; one that has not answered is "
                   "reported down and its last values are served, marked stale.")
@click.option("--counters-allow", metavar="REGEX", help="Export only these counters without a canonical name.")
@click.option("--counters-deny", metavar="REGEX", help="Never export these counters without a canonical name.")
@click.option("--counters-max", type=click.IntRange(min=0), default=1024, show_default=True,
              help="Most generic (roce_nic_stat_total) series one source may create.")
def cli(sources: tuple[str, ...], interval: float, listen: str | None, allow_remote: bool, once: bool,
        polls: int | None, as_json: bool, record: str | None, links_path: str | None,
        detector_names: tuple[str, ...], settings: tuple[str, ...], host_label: str | None,
        const_labels: tuple[str, ...], source_deadline: float, counters_allow: str | None,
        counters_deny: str | None, counters_max: int) -> int:
    """Watch NIC and switch counters: live view, JSON, recording or a Prometheus exporter."""
    from tensorfabric.telemetry.clock import PollClock
    from tensorfabric.telemetry.detectors import load
    from tensorfabric.telemetry.engine import Monitor
    from tensorfabric.telemetry.sources import SourceContext, open_source
    from tensorfabric.telemetry.sources.base import CounterFilter

    if not sources:
        raise InputError("monitor: give at least one --source KIND:ARG (e.g. --source ethtool:eth0)")
    endpoint = None
    if listen:
        from tensorfabric.telemetry.exporter import parse_listen

        endpoint = parse_listen(listen, allow_remote=allow_remote)
    extra = _const_labels(const_labels)
    clock = PollClock()  # one time per poll for every source: one detector run per poll
    counters = CounterFilter.parse(counters_allow, counters_deny, counters_max)
    ctx = SourceContext(clock=clock, counters=counters) if host_label is None else SourceContext(
        host=host_label, clock=clock, counters=counters)
    opened = [open_source(_spec(spec), ctx) for spec in sources]
    monitor = Monitor(opened, detectors=load(detector_names), limits=_thresholds(settings, _links(links_path)),
                      clock=clock, source_deadline_s=source_deadline)
    total = 1 if once else polls
    lock = threading.Lock()
    server = None
    if endpoint is not None:
        from tensorfabric.telemetry.exporter import serve

        try:
            # no lock: concurrent scrapes and this loop share the poll in flight (Monitor.poll is single-flight)
            server, _ = serve(monitor, endpoint[0], endpoint[1], max_age_s=min(1.0, interval), const_labels=extra)
        except OSError as exc:  # busy port, address not on this host, unresolvable name: the user's to fix
            raise InputError(f"--serve {listen!r}: {exc.strerror or exc}; pick a free port and an address of "
                             "this host, e.g. 127.0.0.1:9108") from None
        log.info("serving Prometheus metrics on http://%s:%d/metrics", *endpoint)
    con = console()
    if record:
        Path(record).parent.mkdir(parents=True, exist_ok=True)
        if os.path.islink(record):  # refused before the first poll, not after it
            raise InputError(f"--record {record!r} is a symbolic link; give the file itself")
    done = 0
    snapshot: list[Any] = []

    def on_poll(result: Any) -> None:  # every poll, the loop's or a scrape's (called with the lock held)
        nonlocal done
        if total is not None and done >= total:
            return  # a scrape between the last counted poll and the server's shutdown
        done += 1
        if record:
            _append(record, "".join(s.to_json() + "\n" for s in result.samples))

    monitor.listeners.append(on_poll)
    try:
        while True:
            with lock:
                scraped = (server is not None and monitor.polled_at is not None
                           and time.monotonic() - monitor.polled_at < interval)
                # with --serve, scrapes poll; this loop fills in only when nobody scraped for an interval
                result = None if scraped else monitor.poll()
            if result is None:
                if total is not None and done >= total:
                    break
                time.sleep(min(interval, 1.0))
                continue
            if once:  # a single dump (a ticket) has no time series: judge what the counters show on their own
                from tensorfabric.telemetry.snapshot import snapshot_findings

                snapshot = snapshot_findings(result.samples)
            if endpoint is None:
                _show(monitor, result, con, as_json=as_json, once=once, poll_no=done, findings=snapshot)
            if total is not None and done >= total:
                break
            until = time.monotonic() + interval
            while time.monotonic() < until and not (total is not None and done >= total):
                time.sleep(max(0.0, min(0.2, until - time.monotonic())))  # scrapes may reach --polls meanwhile
            if total is not None and done >= total:
                break
    finally:
        # Ctrl-C and SIGTERM (raised as Interrupted by the CLI) pass on after the server is closed, so the shell
        # sees 130/143: a supervisor that stopped the monitor must not read "exited 0, all clear".
        if server is not None:
            server.shutdown()
            server.server_close()
    failed = [name for name, status in monitor.status.items() if not status.up]
    if failed:
        log.warning("source(s) failed their last poll: %s", ", ".join(failed))
    from tensorfabric.findings import exit_code_for

    return 1 if monitor.alerts or failed or (once and exit_code_for(snapshot)) else 0


def _const_labels(items: tuple[str, ...]) -> dict[str, str]:
    """``--label KEY=VALUE`` pairs; a key the exporter itself uses, or one Prometheus reserves, is refused."""
    import re

    from tensorfabric.telemetry.exposition import RESERVED_LABELS

    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]{0,99}", key) is None or key.startswith("__"):
            raise InputError(f"--label {item!r}: expected KEY=VALUE with KEY a label name such as cluster")
        if key in RESERVED_LABELS:
            raise InputError(f"--label {item!r}: {key!r} is a label the exporter or Prometheus sets itself; "
                             "choose another name (e.g. cluster, site)")
        out[key] = value
    return out


_LAST_SHOWN: dict[int, Any] = {}
"""What the last table showed, per monitor: polls that add nothing print one line instead of the same tables."""


def _show(monitor: Any, result: Any, con: Any, *, as_json: bool, once: bool, poll_no: int,
          findings: list[Any]) -> None:
    reads = _reads(monitor)
    if as_json and once:
        emit_json({"samples": [s.to_dict() for s in result.samples], "alerts": [a.to_dict() for a in result.alerts],
                   "errors": {k: list(v) for k, v in result.errors.items()},
                   "findings": [f.to_dict() for f in findings],
                   "read": {name: report.to_dict() for name, report in reads.items()}})
        return
    for report in reads.values():
        log.info("%s", report.summary())
        for warning in report.warnings[:5]:
            log.warning("%s: %s", report.source, warning)
    if as_json:
        click.echo(json.dumps({"time": result.time, "alerts": [a.to_dict() for a in result.alerts],
                               "errors": {k: list(v) for k, v in result.errors.items()}}))
        return
    from tensorfabric.telemetry.view import render_view

    title = f"poll {poll_no}: {len(result.samples)} samples from {len(monitor.sources)} source(s)"
    seen = (tuple((a.detector, a.severity, a.subject) for a in result.alerts),
            tuple(sorted((k, tuple(v)) for k, v in result.errors.items())))
    if poll_no > 1 and not result.samples and seen == _LAST_SHOWN.get(id(monitor)):
        # a replay read to its end, a source with nothing new: a line, not the same tables again
        con.print(f"{title}: nothing new", markup=False)
        return
    _LAST_SHOWN[id(monitor)] = seen
    if con.is_terminal and not once:
        con.clear()
    con.print(render_view(monitor.window(), result.alerts, errors=result.errors, title=title))
    if once:
        from tensorfabric.cli._common import render_findings

        render_findings(findings, as_json=False, title="What this dump shows on its own")
