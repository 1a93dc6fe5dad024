"""``tensorfabric simulate SCENARIO``: run a fluid PFC/ECN/DCQCN simulation and report or save its outcome.

``tensorfabric simulate sweep SPEC.yaml``: many scenarios of one fabric (grid or random search) on a process pool
or Ray, with a Pareto plot and the setting that meets a budget (sim/sweep.py).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from tensorfabric.cli._common import DURATION, RATE, SIZE, console, emit_json, progress
from tensorfabric.cli._options import (
    OUTPUT_DIR,
    OUTPUT_FILE,
    RegistryChoice,
    count,
    fabric_option,
    force_option,
    json_option,
    refuse_existing,
)
from tensorfabric.errors import InputError
from tensorfabric.sim.engine import ENGINE_NAMES

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from tensorfabric.fabric.sim_inputs import SimInputs
    from tensorfabric.sim.report import SimulateReport
    from tensorfabric.sim.results import SimResult
    from tensorfabric.sim.sweep import SweepPlan
    from tensorfabric.sim.sweep_report import Summary as SweepSummary
    from tensorfabric.sim.sweep_spec import SweepSpec

__all__ = ["cli", "dcqcn_error_line", "render"]

DEFAULT_COUNTER_INTERVAL_S = 100e-6


def _load_fabric(path: str) -> SimInputs:
    try:
        from tensorfabric.fabric.sim_inputs import sim_inputs
    except ImportError as exc:
        raise InputError(f"--fabric {path}: fabric spec support (tensorfabric.fabric.spec) is not installed") from exc
    return sim_inputs(path)


class _WithSweep(click.Command):
    """``simulate SCENARIO`` and ``simulate sweep SPEC.yaml``: the word ``sweep`` hands the rest to :func:`sweep`."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        if args and args[0] == "sweep":
            return sweep.make_context(f"{info_name} sweep", args[1:], parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        return ctx.command.invoke(ctx) if ctx.command is not self else super().invoke(ctx)


@click.command("simulate", cls=_WithSweep)
@click.argument("scenario", type=RegistryChoice("tensorfabric.sim.scenarios:SCENARIOS"), metavar="SCENARIO")
@fabric_option("Simulate this fabric spec (YAML) instead of the scenario's own topology.")
@click.option("--duration", type=DURATION, help="Simulated time, e.g. 10ms.")
@click.option("--flows", type=count(1, 100_000),
              help="Number of senders (incast, victim-flow, capacity-growth), TP degree, or hosts (permutation).")
@click.option("--size", type=SIZE, help="Bytes per flow (default: long-lived flows).")
@click.option("--rate", type=RATE, help="Link rate of the built-in topology, e.g. 40G or 100gbit.")
@click.option("--kmin", type=SIZE, help="ECN Kmin, e.g. 5KB.")
@click.option("--kmax", type=SIZE, help="ECN Kmax, e.g. 200KB.")
@click.option("--pmax", type=click.FloatRange(0.0, 1.0), help="ECN marking probability at Kmax, e.g. 0.01.")
@click.option("--headroom", type=SIZE, help="PFC headroom per ingress port (default: the computed requirement).")
@click.option("--xoff", type=SIZE, help="Static PFC XOFF threshold per ingress port.")
@click.option("--no-pfc", is_flag=True, help="Lossy: no PFC, drop when a port's buffer is full.")
@click.option("--no-ecn", is_flag=True, help="Fault: ECN marking disabled (DCQCN gets no signal).")
@click.option("--fail-link", "fail_links", multiple=True, metavar="DEV1,DEV2",
              help="Fault: take the link between two devices down (repeatable), e.g. leaf0,spine1.")
@click.option("--step", type=DURATION, help="Time step, e.g. 1us.")
@click.option("--dcqcn", type=RegistryChoice("tensorfabric.sim.reaction:REACTION_POINTS"),
              help="DCQCN form (none: PFC alone).")
@click.option("--engine", type=click.Choice(ENGINE_NAMES),
              help="auto (default): the event engine where it applies (no CC, no ECN, lossless static PFC, no "
                   "head-of-line coupling), the time-stepped one otherwise.")
@click.option("--acyclic", is_flag=True, help="deadlock: the same traffic without a cyclic buffer dependency.")
@click.option("--layers", type=count(1, 10_000), help="inference-tp: transformer layers to simulate.")
@click.option("--tokens", type=count(1, 1_000_000), help="inference-tp: decode tokens.")
@click.option("--batch", type=count(1, 100_000), help="inference-tp: sequences per decode step.")
@click.option("--seed", type=count(0, 2**63 - 1), help="ECMP hash and CNP sampling seed.")
@json_option("Machine output on stdout.")
@click.option("--plot", type=OUTPUT_FILE, help="Write queue, pause and rate plots to this PNG.")
@click.option("--counters", type=OUTPUT_FILE, help="Write the counter stream (JSON lines) here.")
@click.option("--counter-interval", type=DURATION, help="Counter snapshot interval (default 100us).")
@click.option("--wall-clock", "pace", type=DURATION, metavar="PACE",
              help="With --counters: stream the snapshots in real time, one PACE apart (e.g. 15s), for "
                   "`monitor --source replay:FILE --serve` and Prometheus rules (see docs/telemetry.md).")
@force_option("--counters' or --plot's file")
def cli(scenario: str, fabric_path: str | None, duration: float | None, flows: int | None, size: int | None,
        rate: float | None, kmin: int | None, kmax: int | None, pmax: float | None, headroom: int | None,
        xoff: int | None, no_pfc: bool, no_ecn: bool, fail_links: tuple[str, ...], step: float | None,
        dcqcn: str | None, engine: str | None, acyclic: bool, layers: int | None, tokens: int | None, batch: int | None,
        seed: int | None, as_json: bool, plot: str | None,
        counters: str | None, counter_interval: float | None, pace: float | None, force: bool) -> int:
    """Simulate SCENARIO, one of the scenarios the simulator registers (an unknown name lists them).

    `tensorfabric simulate sweep SPEC.yaml` runs many scenarios instead (see its --help)."""
    from tensorfabric.fsutil import write_files
    from tensorfabric.sim.from_spec import with_spec_ecn
    from tensorfabric.sim.plot import result_png
    from tensorfabric.sim.report import counter_lines, simulate_report
    from tensorfabric.sim.scenarios import Overrides, plan, simulate

    if pace is not None and not counters:
        raise InputError("--wall-clock needs --counters FILE (the stream it writes in real time)")
    # Refused before the simulation, which can take minutes, rather than after it.
    refuse_existing({"--counters": counters, "--plot": plot}, force)
    spec = _load_fabric(fabric_path) if fabric_path else None
    overrides = with_spec_ecn(Overrides(
        flows=flows, size_bytes=size, rate_bps=rate, kmin_bytes=kmin, kmax_bytes=kmax, pmax=pmax,
        headroom_bytes=headroom, xoff_bytes=xoff, step_s=step, dcqcn=dcqcn, duration_s=duration, seed=seed,
        counter_interval_s=counter_interval or (DEFAULT_COUNTER_INTERVAL_S if counters else None), acyclic=acyclic,
        pfc=not no_pfc, ecn=not no_ecn, failed_links=tuple(_pair(text) for text in fail_links), layers=layers,
        tokens=tokens, batch=batch, engine=engine), spec.ecn if spec else None)
    fabric = spec.fabric if spec else None
    planned = plan(scenario, overrides, fabric)  # bad input fails here, before any work
    total = planned.config.duration_s / planned.config.step_s
    with progress(f"simulating {scenario}", total, enabled=None if not as_json else False) as advance:
        result = simulate(scenario, overrides, fabric, advance=advance,
                          params_extra={"fabric": fabric_path} if fabric_path else None)
    if counters and pace is not None:
        from tensorfabric.sim.report import counter_stream
        from tensorfabric.telemetry.sim_stream import stream_to_file

        stream_to_file(counter_stream(result), counters, pace_s=pace, replace=force)
    # Both outputs are made in memory first; a full or read-only disk then says which were written.
    write_files([*([(counters, counter_lines(result), None)] if counters and pace is None else []),
                 *([(plot, result_png(result), None)] if plot else [])])
    report = simulate_report(result)
    if as_json:
        sys.stdout.write(report.to_json())
        sys.stdout.flush()
    else:
        render(report, console())
    return report.exit_code


def _pair(text: str) -> tuple[str, str]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise InputError(f"--fail-link: {text!r} must name two devices as 'DEV1,DEV2', e.g. 'leaf0,spine1'")
    return parts[0], parts[1]


def render(report: SimulateReport, con: Console) -> None:
    """The report for people: the outcome line, completion and model error, flows, paused ports, queues."""
    from tensorfabric.sim.accuracy import PFC_ALONE
    from tensorfabric.units import format_duration, format_size

    result, done = report.result, report.completion_s
    con.print(f"[bold]{result.scenario}[/]: {format_duration(result.sim_time_s)} simulated in "
              f"{result.wall_s:.2f}s wall ({result.params.get('engine', 'stepped')} engine), {len(result.flows)} "
              f"flows ({len(done)} finished), drops {format_size(result.drops_bytes, binary=False)}")
    if done:
        con.print(f"completion: min {format_duration(done[0])}, median {format_duration(done[len(done) // 2])}, "
                  f"p99 {format_duration(done[min(len(done) - 1, int(0.99 * len(done)))])}, "
                  f"max {format_duration(done[-1])}")
    accuracy = report.reference_error
    if accuracy is not None:
        dcqcn = accuracy.get("dcqcn")
        if dcqcn is not None:
            con.print(dcqcn_error_line(dcqcn), markup=False)
        e, worst = accuracy["rel_error"], accuracy["worst_abs_rel_error"]
        # With DCQCN the ns-3 line above is the run's figure; htsim's speaks for its PFC part only.
        notes = [n for n in accuracy["notes"] if dcqcn is None or n != PFC_ALONE]
        head = "PFC alone, model error" if dcqcn is not None else "model error"
        con.print(f"{head} vs packet-level reference (htsim) on {accuracy['nearest']}: p50 {e['p50']:+.1%}, "
                  f"p99 {e['p99']:+.1%}, max {e['max']:+.1%}, flow by flow median "
                  f"{accuracy['flow_median_abs_rel_error']:.1%}; worst of {accuracy['draws']} ECMP draws "
                  f"p50 {worst['p50']:.1%}, p99 {worst['p99']:.1%}, max {worst['max']:.1%}" +
                  "".join(f"; {n}" for n in notes))
    con.print(_flows_table(result))
    _render_ports(result, con)


def dcqcn_error_line(dcqcn: dict[str, Any]) -> str:
    """The ns-3 figure for a DCQCN run, in words: reference, parameters, error, scenario, then any warning."""
    e = dcqcn["rel_error"]
    line = (f"model error vs {dcqcn['reference']}, DCQCN {dcqcn['params']} parameters: p50 {e['p50']:+.1%}, "
            f"p99 {e['p99']:+.1%}, max {e['max']:+.1%} on {dcqcn['scenario']} ({dcqcn['nearest']}), flow by flow "
            f"median {dcqcn['flow_median_abs_rel_error']:.1%}" + "".join(f"; {n}" for n in dcqcn["notes"]))
    return line + (f"\nwarning: {dcqcn['warning']}" if dcqcn.get("warning") else "")


def _flows_table(result: SimResult) -> Table:
    from rich.table import Table

    from tensorfabric.units import format_duration, format_rate, format_size

    flows = result.flows
    table = Table(title="flows", show_lines=False)
    for col in ("id", "src", "dst", "bytes", "fct", "mean rate", "tag"):
        table.add_column(col)
    for f in flows[:12]:
        table.add_row(str(f.id), f.src, f.dst, format_size(f.bytes, binary=False) if f.bytes < 1e14 else "long",
                      format_duration(f.fct_s) if f.fct_s is not None else "-", format_rate(f.mean_rate_bps), f.tag)
    if len(flows) > 12:
        table.add_row("...", f"{len(flows) - 12} more", "", "", "", "", "")
    return table


def _render_ports(result: SimResult, con: Console) -> None:
    from rich.table import Table

    from tensorfabric.units import format_duration, format_size

    ports = Table(title="most paused ports")
    for col in ("port", "paused", "fraction", "frames"):
        ports.add_column(col)
    for name, p in list(result.pause["ports"].items())[:6]:
        ports.add_row(name, format_duration(p["paused_s"]), f"{p['paused_fraction']:.1%}", f"{p['frames']:.0f}")
    if result.pause["ports"]:
        con.print(ports)
    for name, q in list(result.queues["ports"].items())[:4]:
        con.print(f"queue {name}: max {format_size(q['max_bytes'], binary=False)}, "
                  f"mean {format_size(q['mean_bytes'], binary=False)}")
    for key in ("deadlock", "storm", "victim"):
        if key in result.pause:
            con.print(f"{key}: {result.pause[key]}")
    for key in ("settled_mean_bytes", "fixed_point_bytes", "queue_over_fixed_point", "token_latency_s", "growth"):
        if key in result.queues:
            con.print(f"{key}: {result.queues[key]}")


@click.command("sweep")
@click.argument("spec_path", metavar="SPEC.yaml", type=click.Path(dir_okay=False))
@click.option("--out", type=OUTPUT_DIR, metavar="DIR",
              help="Folder for rows.parquet/rows.jsonl, pareto.png and summary.json (default: NAME-sweep).")
@click.option("--jobs", type=count(1, 4096), help="Worker processes, or CPUs of the local Ray cluster (default: "
                                                   "every CPU this process may use).")
@click.option("--executor", type=RegistryChoice("tensorfabric.sim.executors:EXECUTORS"), default="process",
              show_default=True, help="process: a local process pool; ray: a Ray cluster (pip install "
                                      "'tensorfabric[sweep]').")
@click.option("--address", metavar="ADDR", help="ray: join this cluster (auto, ray://head:10001) instead of "
                                                "starting a local one.")
@click.option("--budget", metavar="LIMITS", help="Limits a setting must meet on every condition, e.g. "
                                                 "p99=2ms,paused=1% (keys: p50 p99 max token paused drops); "
                                                 "replaces the spec's budget.")
@click.option("--resume", is_flag=True, help="Continue the sweep in --out, skipping the scenarios it finished.")
@force_option("a previous sweep's files in --out (the sweep starts over)")
@json_option("Print the summary (recommendation, Pareto front, files) as JSON on stdout.")
def sweep(spec_path: str, out: str | None, jobs: int | None, executor: str, address: str | None,
          budget: str | None, resume: bool, force: bool, as_json: bool) -> int:
    """Run every scenario of SPEC.yaml (grid or seeded random search over ECN, PFC and DCQCN settings, offered
    load and TP/PP placement) and recommend the setting that meets the budget. Exit 1 when none does."""
    import os
    from pathlib import Path

    from tensorfabric.sim.executors import ExecutorOptions, make_executor
    from tensorfabric.sim.sweep import pending, prepare_output, run_sweep
    from tensorfabric.sim.sweep_report import parse_budget, summarize_sweep, write_outputs

    spec, plan = _sweep_plan(spec_path)
    limits = parse_budget(budget) if budget else parse_budget(spec.budget, "budget") if spec.budget else None
    folder = Path(out or f"{spec.name}-sweep")
    prepare_output(folder, resume=resume, force=force)
    workers = jobs or len(os.sched_getaffinity(0))
    runner = make_executor(executor, ExecutorOptions(jobs=workers, address=address))
    todo = len(pending(plan, folder))
    try:
        with progress(f"sweep {spec.name}", todo, enabled=None if not as_json else False) as advance:
            run = run_sweep(plan, folder, runner, advance=advance)
    except KeyboardInterrupt:
        click.echo(f"sweep interrupted: finished rows are kept in {folder / 'rows.jsonl'}; run the same command "
                   "with --resume to go on", err=True)
        raise
    summary = summarize_sweep(plan, run, limits)
    files = write_outputs(folder, summary, {"spec": spec_path, "search": spec.search, "seed": spec.seed,
                                            "executor": executor, "jobs": workers, "wall_s": run.wall_s})
    if as_json:
        emit_json(summary.to_dict(files))
    else:
        _render_sweep(summary, files, f"{executor} x{workers}", spec.fabric is not None)
    return 1 if limits is not None and summary.recommended is None else 0


def _sweep_plan(spec_path: str) -> tuple[SweepSpec, SweepPlan]:
    """The sweep spec at ``spec_path`` and its scenarios, on the fabric spec it names (relative to it)."""
    import os

    from tensorfabric.sim.from_spec import ecn_config
    from tensorfabric.sim.sweep import plan_sweep
    from tensorfabric.sim.sweep_spec import parse_spec
    from tensorfabric.yamlload import read_yaml

    doc = read_yaml(spec_path, "sweep spec", root=dict,
                    example="a mapping with 'parameters' (and 'topology' or 'fabric'), as in examples/sweep.yaml")
    spec = parse_spec(doc, spec_path)
    if spec.fabric is None:
        return spec, plan_sweep(spec, None, None)
    inputs = _load_fabric(os.path.join(os.path.dirname(spec_path), spec.fabric))
    return spec, plan_sweep(spec, inputs.fabric, ecn_config(inputs.ecn))


def _render_sweep(summary: SweepSummary, files: dict[str, str], where: str, on_spec: bool) -> None:
    from rich.table import Table

    from tensorfabric.sim.sweep_report import show_setting
    from tensorfabric.units import format_duration

    con = console()
    run = summary.run
    con.print(f"[bold]sweep {summary.name}[/]: {summary.scenarios} scenarios ({len(summary.settings)} settings) on "
              f"{where}: ran {run.ran}, resumed {run.resumed} in {format_duration(run.wall_s)}"
              + (f"; {summary.skipped} combinations skipped ({summary.why_skipped})" if summary.skipped else "")
              + (f"; [red]{summary.errors} refused by the simulator[/]" if summary.errors else ""))
    con.print("files: " + ", ".join(files.values()))
    table = Table(title="Pareto front: p99 FCT against the most paused port (worst condition of each setting)")
    for col in ("setting", "p99 FCT", "paused", "max FCT", "drops"):
        table.add_column(col)
    for o in summary.front[:12]:
        w = o.worst
        table.add_row(show_setting(o.setting), format_duration(w["fct_p99_s"]), f"{w['paused_fraction']:.2%}",
                      format_duration(w["fct_max_s"]), f"{w['drops_bytes']:.0f} B")
    con.print(table)
    _render_pick(summary, on_spec, con)


def _render_pick(summary: SweepSummary, on_spec: bool, con: Console) -> None:
    """The recommended setting (or the closest), and where it goes in the fabric spec."""
    from tensorfabric.sim.sweep_report import show_setting
    from tensorfabric.units import format_duration

    if summary.budget is None:
        con.print("no budget given: pass --budget p99=2ms,paused=1% (or budget: in the spec) for a recommendation")
        return
    pick = summary.recommended or summary.closest
    head = (f"[green]recommended[/] ({summary.met_by} of {len(summary.settings)} settings meet "
            f"{summary.budget.text})" if summary.recommended else
            f"[red]no setting meets {summary.budget.text}[/]; closest")
    if pick is None:
        con.print(f"{head}: none (every setting left flows unfinished or was refused)")
        return
    w = pick.worst
    con.print(f"{head}: {show_setting(pick.setting)} -- worst over {pick.rows} conditions: p99 FCT "
              f"{format_duration(w['fct_p99_s'])}, most paused port {w['paused_fraction']:.2%}, drops "
              f"{w['drops_bytes']:.0f} B")
    ecn = {k: pick.setting[k] for k in ("kmin", "kmax", "pmax") if k in pick.setting}
    if on_spec and ecn:
        from tensorfabric.units import format_size

        parts = [f"{k}: {format_size(v, binary=False)}" if k != "pmax" else f"pmax: {v * 100:.3g}"
                 for k, v in ecn.items()]
        con.print(f"in the fabric spec: qos: {{ecn: [{{{', '.join(parts)}}}]}}")
    if on_spec and "xoff" in pick.setting:
        from tensorfabric.units import format_size

        con.print(f"and on each switch: asic.xoff_threshold: {format_size(pick.setting['xoff'], binary=False)} "
                  "(a static XOFF: asic: {model: ..., xoff_threshold: ...}; fabric lint checks the buffer)")
