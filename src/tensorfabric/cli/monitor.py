"""``tensorfabric monitor``: poll fabric counters, detect storms/deadlock/loss/trends, serve Prometheus metrics.

Without ``--serve`` it draws a live view (top ports by paused share, alerts) every ``--interval``; ``--once
--json`` prints one poll as ``{"samples": [...], "alerts": [...]}``; ``--record PATH`` appends every sample as
a JSON line (readable again with ``--source replay:PATH``). Exit code 1 when alerts are active at the end or
a source failed its last poll; 2 for unusable input (a source spec that cannot be opened, a busy port); 130 on
Ctrl-C and 143 on SIGTERM (the exporter closed first), as for every verb. The loop itself is
``telemetry/poll_loop.py``; this module reads the options and draws what each poll shows.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import click

from tensorfabric.cli._common import DURATION, console, emit_json
from tensorfabric.cli._options import OUTPUT_FILE, RegistryChoice, count, json_option
from tensorfabric.telemetry.detectors import DETECTORS
from tensorfabric.telemetry.sources import SOURCES

if TYPE_CHECKING:
    from rich.console import Console

    from tensorfabric.telemetry.poll_loop import Shown

log = logging.getLogger("tensorfabric.monitor")


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
    from tensorfabric.telemetry.poll_loop import LoopOptions, MonitorSetup, watch

    setup = MonitorSetup(sources, host=host_label, detectors=detector_names, settings=settings,
                         links_path=links_path, source_deadline_s=source_deadline, counters_allow=counters_allow,
                         counters_deny=counters_deny, counters_max=counters_max)
    options = LoopOptions(interval_s=interval, polls=polls, once=once, record=record, listen=listen,
                          allow_remote=allow_remote, labels=const_labels)
    return watch(setup, options, _View(console(), as_json=as_json, once=once)).exit_code


class _View:
    """Draws each poll: one JSON document (``--once --json``), a JSON line per poll, or the tables, which are drawn
    again only when something changed (a poll that adds nothing prints one line)."""

    def __init__(self, con: Console, *, as_json: bool, once: bool) -> None:
        self.con, self.as_json, self.once = con, as_json, once
        self.seen: object = None

    def __call__(self, shown: Shown) -> None:
        result = shown.result
        errors = {k: list(v) for k, v in result.errors.items()}
        if self.as_json and self.once:
            emit_json({"samples": [s.to_dict() for s in result.samples],
                       "alerts": [a.to_dict() for a in result.alerts], "errors": errors,
                       "findings": [f.to_dict() for f in shown.findings],
                       "read": {name: report.to_dict() for name, report in shown.reads.items()}})
            return
        for report in shown.reads.values():
            log.info("%s", report.summary())
            for warning in report.warnings[:5]:
                log.warning("%s: %s", report.source, warning)
        if self.as_json:
            click.echo(json.dumps({"time": result.time, "alerts": [a.to_dict() for a in result.alerts],
                                   "errors": errors}))
            return
        self._tables(shown)

    def _tables(self, shown: Shown) -> None:
        from tensorfabric.telemetry.view import render_view

        result, con = shown.result, self.con
        title = f"poll {shown.poll_no}: {len(result.samples)} samples from {len(shown.monitor.sources)} source(s)"
        seen = (tuple((a.detector, a.severity, a.subject) for a in result.alerts),
                tuple(sorted((k, tuple(v)) for k, v in result.errors.items())))
        if shown.poll_no > 1 and not result.samples and seen == self.seen:
            # a replay read to its end, a source with nothing new: a line, not the same tables again
            con.print(f"{title}: nothing new", markup=False)
            return
        self.seen = seen
        if con.is_terminal and not self.once:
            con.clear()
        con.print(render_view(shown.monitor.window(), result.alerts, errors=result.errors, title=title))
        if self.once:
            from tensorfabric.cli._common import render_findings

            render_findings(shown.findings, as_json=False, title="What this dump shows on its own")
