"""``tensorfabric monitor``: poll fabric counters, detect storms/deadlock/loss/trends, serve Prometheus metrics.

Without ``--serve`` it draws a live view (top ports by paused share, alerts) every ``--interval``; ``--once
--json`` prints one poll as ``{"samples": [...], "alerts": [...]}``; ``--record PATH`` appends every sample as
a JSON line (readable again with ``--source replay:PATH``). Exit code 1 when alerts are active at the end or a
source failed in the last poll.
"""

from __future__ import annotations

import dataclasses
import json
import logging
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
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
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


def _one_line(text: str) -> str:
    return " ".join(text.split())


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
                   "ethtool:eth0, replay:trace.jsonl.")
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
def cli(sources: tuple[str, ...], interval: float, listen: str | None, allow_remote: bool, once: bool,
        polls: int | None, as_json: bool, record: str | None, links_path: str | None,
        detector_names: tuple[str, ...], settings: tuple[str, ...], host_label: str | None) -> int:
    """Watch NIC and switch counters: live view, JSON, recording or a Prometheus exporter."""
    from tensorfabric.telemetry.clock import PollClock
    from tensorfabric.telemetry.detectors import load
    from tensorfabric.telemetry.engine import Monitor
    from tensorfabric.telemetry.sources import SourceContext, open_source

    if not sources:
        raise InputError("monitor: give at least one --source KIND:ARG (e.g. --source ethtool:eth0)")
    endpoint = None
    if listen:
        from tensorfabric.telemetry.exporter import parse_listen

        endpoint = parse_listen(listen, allow_remote=allow_remote)
    clock = PollClock()  # one time per poll for every source: one detector run per poll
    ctx = SourceContext(clock=clock) if host_label is None else SourceContext(host=host_label, clock=clock)
    opened = [open_source(spec, ctx) for spec in sources]
    monitor = Monitor(opened, detectors=load(detector_names), limits=_thresholds(settings, _links(links_path)),
                      clock=clock)
    total = 1 if once else polls
    lock = threading.Lock()
    server = None
    if endpoint is not None:
        from tensorfabric.telemetry.exporter import serve

        try:
            server, _ = serve(monitor, endpoint[0], endpoint[1], lock)
        except OSError as exc:  # busy port, address not on this host, unresolvable name: the user's to fix
            raise InputError(f"--serve {listen!r}: {exc.strerror or exc}; pick a free port and an address of "
                             "this host, e.g. 127.0.0.1:9108") from None
        log.warning("serving Prometheus metrics on http://%s:%d/metrics", *endpoint)
    con = console()
    if record:
        Path(record).parent.mkdir(parents=True, exist_ok=True)
    done = 0
    try:
        while True:
            with lock:
                result = monitor.poll()
            done += 1
            if record:
                with open(record, "a", encoding="utf-8") as handle:
                    handle.writelines(s.to_json() + "\n" for s in result.samples)
            if endpoint is None:
                _show(monitor, result, con, as_json=as_json, once=once, poll_no=done)
            if total is not None and done >= total:
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
    # 1: alerts are active, or a source failed its last read (its counters are missing, not healthy).
    return 1 if monitor.alerts or any(not status.up for status in monitor.status.values()) else 0


def _show(monitor: Any, result: Any, con: Any, *, as_json: bool, once: bool, poll_no: int) -> None:
    if as_json and once:
        emit_json({"samples": [s.to_dict() for s in result.samples], "alerts": [a.to_dict() for a in result.alerts],
                   "errors": {k: list(v) for k, v in result.errors.items()}})
        return
    if as_json:
        click.echo(json.dumps({"time": result.time, "alerts": [a.to_dict() for a in result.alerts],
                               "errors": {k: list(v) for k, v in result.errors.items()}}))
        return
    from tensorfabric.telemetry.view import render_view

    title = f"poll {poll_no}: {len(result.samples)} samples from {len(monitor.sources)} source(s)"
    if con.is_terminal and not once:
        con.clear()
    con.print(render_view(monitor.window(), result.alerts, errors=result.errors, title=title))
