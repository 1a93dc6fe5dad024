"""``tensorfabric fleet``: every host of a cluster in one job -- the doctor on each, the reports compared across
hosts, and the data path tested pair by pair; ``tensorfabric fleet check FILE|DIR ...``: the same cross-host rules
over ``doctor --json`` reports collected any other way.

Exit codes: 0 every host agrees and every pair is within bounds; 1 a host or link fails a rule, or a rank did not
answer (the report still lists the hosts that did); 2 bad input (no report among the files, a bad flag). With
``--format npd`` the exit status is Node Problem Detector's: 0 OK, 1 NonOK, 2 Unknown.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from tensorfabric.cli._common import RATE, SIZE, console, emit_json, render_findings
from tensorfabric.cli._options import count, json_option, timeout_option
from tensorfabric.errors import InputError
from tensorfabric.transfer.engines import ENGINE_CHOICES

if TYPE_CHECKING:
    from tensorfabric.fleet.check import FleetReport

__all__ = ["cli"]

_FORMATS = ("table", "json", "npd")
_TABLE_HOSTS = 40
"""Hosts shown row by row; beyond this only hosts with something to say are, and the rest is counted."""


def _format_options(fn: click.decorators.FC) -> click.decorators.FC:
    fn = click.option("--max-length", type=count(16, 4096), default=80, show_default=True,
                      help="--format npd: cut the message at this many characters (NPD's max_output_length).")(fn)
    fn = click.option("--host", "npd_host", default=None, metavar="NAME",
                      help="--format npd: the node whose condition to print (default: every host, one line each). "
                           "In a DaemonSet pass the node name (spec.nodeName through the downward API).")(fn)
    fn = click.option("--format", "fmt", type=click.Choice(_FORMATS), default="table", show_default=True,
                      help="table for people, json (as --json), npd: Node Problem Detector custom-plugin output.")(fn)
    return json_option("Machine output: hosts, findings, pairs, per-host figures, timings (as --format json).")(fn)


def _parse_host_env(items: tuple[str, ...]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for item in items:
        host, sep, assignment = item.partition(":")
        name, eq, value = assignment.partition("=")
        if not sep or not eq or not host or not name:
            raise InputError(f"--host-env {item!r} must be HOST:VAR=VALUE, e.g. h3:NCCL_IB_GID_INDEX=5")
        out.setdefault(host, {})[name] = value
    return out


@click.group("fleet", invoke_without_command=True)
@click.option("--pairs", type=click.Choice(["all", "ring", "none"]), default="all", show_default=True,
              help="Pairs the data-path test measures: all (N-1 rounds, every pair), ring (N pairs: for big fleets), "
                   "none (only compare the reports).")
@click.option("--line-rate", type=RATE, default=None, metavar="RATE",
              help="Judge pair bandwidth against this wire rate (e.g. 400G) instead of the fleet's own median.")
@click.option("--bytes", "bulk_bytes", type=SIZE, default="8MiB", show_default=True,
              help="Bulk transfer per direction of each pair.")
@click.option("--pings", type=count(1, 10_000), default=20, show_default=True,
              help="Timed small-message round trips per pair (twice: before and after the bulk transfers).")
@click.option("--repeats", type=count(1, 100), default=2, show_default=True,
              help="Timed bulk transfers per direction of each pair; the best counts.")
@timeout_option("120s", "How long any step may wait for a peer (rendezvous, the reports, each exchange); a rank "
                        "that misses it is named and the hosts that answered are reported.")
@click.option("--engine", type=click.Choice(ENGINE_CHOICES), default="auto", show_default=True,
              help="Small messages through NIXL (auto: when installed) or Gloo; bulk always through Gloo.")
@click.option("-g", "--nproc", type=count(1, 256), default=None,
              help="Rehearse with this many local ranks on this machine (not under a launcher).")
@click.option("--lab", "lab_spec", default=None, metavar="SPEC",
              help="Run one rank per host of a fresh network-namespace lab, e.g. 8x1gbit (root).")
@click.option("--lab-name", default=None, metavar="NAME",
              help="Run one rank per host of the existing lab NAME (`tensorfabric lab up NAME`); with --lab, the "
                   "name of the lab it builds.")
@click.option("--host-env", "host_env", multiple=True, metavar="HOST:VAR=VALUE",
              help="Lab only: set VAR in one host's rank (rehearse a misconfigured host). Repeatable.")
@click.option("--sysfs-root", default="/", show_default=True, help="The tree each rank's doctor reads.")
@_format_options
@click.pass_context
def cli(ctx: click.Context, pairs: str, line_rate: float | None, bulk_bytes: int, pings: int, repeats: int,
        timeout_s: float,
        engine: str, nproc: int | None, lab_spec: str | None, lab_name: str | None, host_env: tuple[str, ...],
        sysfs_root: str, as_json: bool, fmt: str, npd_host: str | None, max_length: int) -> int | None:
    """Check every host of a cluster in one job: the doctor on each, the reports compared across hosts (majority
    vote names the odd one out), then the data path between every pair of hosts, in rounds.

    \b
    One process per host, under the launcher you already use:
      torchrun --nnodes 8 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint $HEAD:29500 -m tensorfabric fleet
      srun -N 8 --ntasks-per-node 1 tensorfabric fleet     (export MASTER_ADDR, MASTER_PORT first)
      tensorfabric fleet --lab-name lab1                    (a lab made by `tensorfabric lab up`; root)
    Collected reports instead: tensorfabric fleet check /shared/reports/
    """
    if ctx.invoked_subcommand is not None:
        return None
    from tensorfabric.cli._common import progress
    from tensorfabric.fleet.launch import run_fleet
    from tensorfabric.fleet.online import FleetConfig
    from tensorfabric.fleet.schedule import schedule
    from tensorfabric.transfer.launch import placement

    config = FleetConfig(pairs=pairs, bulk_bytes=bulk_bytes, pings=pings, repeats=repeats, timeout_s=timeout_s,
                         engine=engine, line_rate_bps=line_rate, sysfs_root=sysfs_root)
    envs = _parse_host_env(host_env)
    if envs and lab_spec is None and lab_name is None:
        raise InputError("--host-env sets a variable in one lab host's rank: use it with --lab or --lab-name")
    # --lab-name alone is a lab already up (`tensorfabric lab up NAME`); with --lab, the name of the one it builds.
    where = placement(os.environ, ranks=nproc or 1, lab=lab_spec, lab_name=lab_name,
                      running_lab=lab_name if lab_spec is None else None)
    rounds = len(schedule(where.ranks, pairs).rounds)
    with progress("fleet rounds", rounds, enabled=None if where.rank == 0 else False) as advance:
        report = run_fleet(config, where, host_env=envs, on_round=lambda: advance(1))
    if report is None:
        return 0  # rank 0 reports for everyone
    return _render(report, as_json, fmt, npd_host, max_length)


@cli.command("check")
@click.argument("paths", nargs=-1, metavar="FILE|DIR ...")
@_format_options
def check(paths: tuple[str, ...], as_json: bool, fmt: str, npd_host: str | None, max_length: int) -> int:
    """Compare `tensorfabric doctor --json` reports collected any way: one file per host (a DaemonSet's shared
    volume, Ansible), JSON lines, or a paste of many hosts (pdsh, kubectl logs --prefix, srun -l). `-` reads stdin.
    """
    import sys

    from tensorfabric.fleet.check import check_fleet
    from tensorfabric.fleet.reports import read_reports

    found = read_reports(list(paths), stdin=sys.stdin.buffer)
    report = check_fleet(found.hosts, read=found)
    return _render(report, as_json, fmt, npd_host, max_length)


def _render(report: FleetReport, as_json: bool, fmt: str, npd_host: str | None, max_length: int) -> int:
    if fmt == "npd":
        from tensorfabric.fleet.npd import npd_all, npd_condition

        if npd_host is not None:
            code, message = npd_condition(report, npd_host, max_length=max_length)
            click.echo(message)
            return code
        code, lines = npd_all(report, max_length=max_length)
        click.echo("\n".join(lines))
        return code
    if as_json or fmt == "json":
        emit_json(report.to_dict())
        return report.exit_code
    con = console()
    for line in _read_lines(report):
        con.print(line, markup=False, highlight=False)
    con.print(_hosts_table(report))
    if report.pairs:
        con.print(_pairs_table(report))
    render_findings(report.findings, as_json=False, title="Fleet findings")
    if report.error:
        con.print(f"[red]fleet: {report.error}[/]")
    return report.exit_code


def _read_lines(report: FleetReport) -> Iterator[str]:
    if report.read is not None:
        yield report.read.summary()
        for read in report.read.reads:
            if read.not_understood or read.warnings or read.envelopes or read.skipped:
                yield "  " + read.summary()
                yield from (f"    {w}" for w in read.warnings[:5])
        for path, why in report.read.skipped:
            yield f"  skipped {path}: {why}"
        yield from (f"  {w}" for w in report.read.warnings)
    shared = report.shared_doctor_rules
    if shared:
        yield ("in common to most hosts (not a fleet difference; see `tensorfabric doctor` on one): "
               + ", ".join(f"{rule} on {n}" for rule, n in shared.items()))
    if report.timings:
        shown = {k: v for k, v in report.timings.items() if not (k.startswith("round") and k[5:6].isdigit())}
        yield "timings: " + ", ".join(f"{k.removesuffix('_s')} {v:.2f}s" for k, v in shown.items())


def _hosts_table(report: FleetReport) -> object:
    from rich.table import Table

    columns = [c for _, c in report.rules]
    table = Table(title=f"{len(report.hosts)} hosts x {len(columns)} checks", show_lines=False)
    table.add_column("host")
    for column in columns:
        table.add_column(column)
    colour = {"ok": "green", "-": "dim", "warn": "yellow", "link": "yellow", "FAIL": "red"}
    shown = 0
    index = report.index()
    measured = {h for p in report.pairs for h in (p.a, p.b)}
    for host in report.hosts:
        cells = report.cells(host.host, index, measured)
        if len(report.hosts) > _TABLE_HOSTS and all(v in ("ok", "-") for v in cells.values()):
            continue
        shown += 1
        table.add_row(host.host, *(f"[{colour[cells[c]]}]{cells[c]}[/]" for c in columns))
    for missing in report.missing:
        table.add_row(missing, *(["[red]no answer[/]"] + [""] * (len(columns) - 1)))
    if shown < len(report.hosts):
        table.caption = f"{len(report.hosts) - shown} other hosts agree on every check"
    return table


def _pairs_table(report: FleetReport) -> object:
    from rich.table import Table

    from tensorfabric.units import format_rate

    figures = report.figures()
    flagged = {h for f in report.findings if f.rule == "fleet.datapath" for h in f.evidence.get("hosts", ())}
    table = Table(title=f"data path: {len(report.pairs)} pairs in "
                        f"{len(report.schedule.rounds) if report.schedule else '?'} rounds over {report.engine}")
    for column in ("host", "pairs", "best", "median", "worst", "best latency"):
        table.add_column(column)

    def rate(v: float | None) -> str:
        return "?" if v is None else format_rate(v)

    for host in figures:
        fig = figures[host]
        if len(figures) > _TABLE_HOSTS and host not in flagged:
            continue
        name = f"[red]{host}[/]" if host in flagged else host
        latency = "?" if fig.best_latency_s is None else f"{fig.best_latency_s * 1e6:.0f} us"
        table.add_row(name, str(fig.pairs), rate(fig.best_bps), rate(fig.median_bps), rate(fig.worst_bps), latency)
    return table
