"""``tensorfabric fabric``: plan a lossless RoCE fabric -- init, schema, headroom, lint, render."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tensorfabric.cli._common import LENGTH, RATE, console, emit_json, render_findings
from tensorfabric.cli._options import (
    OUTPUT_DIR,
    OUTPUT_FILE,
    RegistryChoice,
    count,
    fabric_option,
    force_option,
    json_option,
)
from tensorfabric.errors import InputError
from tensorfabric.findings import exit_code_for

if TYPE_CHECKING:
    from tensorfabric.fabric.deployed import Deployed
    from tensorfabric.fabric.headroom import HeadroomResult
    from tensorfabric.fabric.lint import RuleStatus
    from tensorfabric.findings import Finding

__all__ = ["cli"]

# Choices are the registries' names, read when a command parses or prints help (not at import).
_MODELS = RegistryChoice("tensorfabric.fabric.headroom:MODELS")
_ASICS = RegistryChoice("tensorfabric.fabric.headroom:ASICS", order=lambda names: _with_presets(names))
_NOS = RegistryChoice("tensorfabric.fabric.renderers:RENDERERS")
_FORMATS = RegistryChoice("tensorfabric.fabric.parsers:PARSERS")


def _load(path: Path) -> Any:
    """A spec with at least one device: an empty one would lint clean and render nothing, which hides mistakes."""
    from tensorfabric.fabric.spec import load_spec

    spec = load_spec(path)
    if not spec.switches and not spec.hosts:
        raise InputError(f"{str(path)!r} describes no switches and no hosts; add devices (start from "
                         "'tensorfabric fabric init')")
    return spec


def _with_presets(asics: Sequence[str]) -> tuple[str, ...]:
    from tensorfabric.fabric.headroom import asic_names

    return asic_names(asics)


@click.group("fabric")
def cli() -> None:
    """Plan a lossless RoCE fabric from one spec: headroom, per-NOS configs, cross-vendor lint."""


@cli.command("init")
@click.option("--leaves", type=count(1, 512), default=2, show_default=True)
@click.option("--spines", type=count(0, 512), default=2, show_default=True)
@click.option("--hosts-per-leaf", type=count(1, 512), default=4, show_default=True)
@click.option("--speed", type=RATE, default="400G", show_default=True, help="Port speed, e.g. 100G, 400G.")
@click.option("--nos", type=_NOS, default="sonic", show_default=True)
@click.option("--asic", type=_ASICS, default="spectrum4", show_default=True)
@click.option("-o", "--out", type=OUTPUT_FILE, default=None, help="Write the spec here (atomically) instead of stdout.")
@force_option("--out")
def init_cmd(leaves: int, spines: int, hosts_per_leaf: int, speed: float, nos: str, asic: str,
             out: str | None, force: bool) -> int:
    """Write a starter leaf/spine spec with the default lossless plan (it lints clean)."""
    from tensorfabric.fabric.starter import starter_yaml
    from tensorfabric.fsutil import atomic_write_text

    text = starter_yaml(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf, speed_bps=speed, nos=nos,
                        asic=asic)
    if out is None:
        sys.stdout.write(text)
    elif Path(out).exists() and not force:
        raise InputError(f"-o {out!r} exists; pass --force to overwrite it or pick another name")
    else:
        atomic_write_text(out, text)
        click.echo(f"wrote {out}", err=True)
    return 0


@cli.command("schema")
def schema_cmd() -> int:
    """Print the JSON Schema of the fabric spec."""
    from tensorfabric.fabric.spec import FabricSpec

    emit_json(FabricSpec.model_json_schema(by_alias=True))
    return 0


@cli.command("headroom")
@click.option("--speed", type=RATE, default=None, help="Link speed, e.g. 400G.")
@click.option("--cable", type=LENGTH, default=None, help="Cable length, e.g. 5m.")
@click.option("--mtu", type=click.IntRange(68, 65536), default=9100, show_default=True, help="Port MTU in bytes.")
@click.option("--model", type=_MODELS, default="vendor", show_default=True,
              help="vendor: preset calibrated on the ASIC vendor's tables; sonic: SONiC's dynamic (Lua) formula.")
@click.option("--asic", type=_ASICS, default="spectrum4", show_default=True,
              help="Switch ASIC family, or a SKU group's vendor preset (spectrum3-shp-o8c48...); sonic: Spectrum only.")
@click.option("--table", "table_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Table mode: answer from this SONiC pg_profile_lookup.ini, exactly.")
@click.option("--shared-headroom-pool/--no-shared-headroom-pool", "shp", default=False, show_default=True,
              help="Spectrum with a shared headroom pool: size = xon (vendor and sonic models).")
@click.option("--lossless-mtu", type=click.IntRange(64, 65536), default=1024, show_default=True,
              help="sonic: LOSSLESS_TRAFFIC_PATTERN mtu.")
@click.option("--small-packet-pct", type=click.IntRange(0, 100), default=100, show_default=True,
              help="sonic: share of small packets in the cell-occupancy worst case.")
@click.option("--lanes", type=click.IntRange(1, 8), default=None,
              help="vendor and sonic: SerDes lanes of the port (8 lanes double xon); default from the ASIC's lane "
                   "rate (vendor: the calibration table's).")
@click.option("--medium", type=click.Choice(("copper", "fiber")), default="fiber", show_default=True,
              help="Cable medium (ieee model).")
@fabric_option("Instead of one link: every cabled port of this spec, with the model its device uses.")
@json_option()
@click.option("--explain", is_flag=True, help="Show every term of the sum.")
def headroom_cmd(speed: float | None, cable: float | None, mtu: int, model: str, asic: str, table_path: Path | None,
                 shp: bool, lossless_mtu: int, small_packet_pct: int, lanes: int | None, medium: str,
                 fabric_path: str | None, as_json: bool, explain: bool) -> int:
    """PFC headroom (xoff, xon, size in bytes) for one lossless priority group, or per port of a spec."""
    from tensorfabric.fabric.headroom import HeadroomQuery, answer

    if fabric_path is not None:
        return _spec_headroom(Path(fabric_path), as_json)
    if speed is None or cable is None:
        raise InputError("fabric headroom: give --speed and --cable (e.g. --speed 400G --cable 5m), or --fabric FILE")
    if table_path is not None:
        from tensorfabric.fabric.headroom import headroom_from_table, load_table

        result = headroom_from_table(load_table(table_path), speed, cable, mtu)
        label = f"table {table_path}"
    else:
        result = answer(HeadroomQuery(speed, cable, mtu, model, asic, shared_headroom_pool=shp, lanes=lanes,
                                      lossless_mtu=lossless_mtu, small_packet_pct=small_packet_pct, medium=medium))
        label = f"{result.model} model" + (f", {asic}" if model == "sonic" else "")
    if as_json:
        emit_json(result.to_dict())
    else:
        _render_headroom(result, f"{label}, {speed / 1e9:g}G, {cable:g} m, MTU {mtu}", explain)
    return 0


def _render_headroom(result: HeadroomResult, title: str, explain: bool) -> None:
    con = console()
    con.print(title)
    extra = "" if result.xon_offset_bytes is None else f"   xon_offset {result.xon_offset_bytes} B"
    con.print(f"xoff {result.xoff_bytes} B   xon {result.xon_bytes} B   size {result.size_bytes} B{extra}")
    if result.calibrated_on:
        con.print("calibrated on " + "; ".join(result.calibrated_on), soft_wrap=True)
    if explain:
        from rich.table import Table

        table = Table(title="terms")
        for col in ("term", "value", "unit", "how"):
            table.add_column(col, overflow="fold")
        for term in result.terms:
            table.add_row(term.name, f"{term.value:,.1f}".rstrip("0").rstrip("."), term.unit, term.formula)
        con.print(table)


def _spec_headroom(spec_path: Path, as_json: bool) -> int:
    from rich.table import Table

    from tensorfabric.fabric.headroom import spec_headroom

    spec = _load(spec_path)
    ports = spec_headroom(spec)
    if as_json:
        emit_json({"ports": [p.to_dict() for p in ports]})
        return 0
    table = Table(title=f"headroom per port: {spec.name}")
    for col in ("port", "model", "speed", "cable", "mtu", "xoff", "xon", "size"):
        table.add_column(col, justify="left" if col in ("port", "model") else "right", no_wrap=col == "port")
    for p in ports:
        r = p.configured
        table.add_row(p.port, r.model, f"{r.speed_bps / 1e9:g}G", f"{r.cable_m:g}m", str(r.mtu), str(r.xoff_bytes),
                      str(r.xon_bytes), str(r.size_bytes))
    console().print(table)
    return 0


@cli.command("lint")
@fabric_option("The spec to check.")
@click.option("--deployed", "deployed", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A deployed config (SONiC config_db.json, NX-OS, EOS, Junos, Dell SONiC CLI, Cumulus "
                   "traffic.conf / NVUE / nv show qos roce, mlnx_qos output, NCCL env, host script), as a file or "
                   "as pasted (prompts, fences, '...' cuts are fine); repeatable.")
@click.option("--format", "fmt", default=None, type=_FORMATS, metavar="FORMAT",
              help="Read every --deployed file as this dialect instead of detecting it: "
                   "one of the parser registry's formats (an unknown name lists them).")
@click.option("--rule", "rules", multiple=True, help="Run only this rule id (repeatable).")
@json_option("Print {\"findings\": [...], \"deployed\": [{format, detection, read}], \"rules\": [status]}; with one "
             "--deployed file also top-level \"format\" and \"read\".")
def lint_cmd(fabric_path: str | None, deployed: tuple[Path, ...], fmt: str | None, rules: tuple[str, ...],
             as_json: bool) -> int:
    """Check a spec and/or deployed configs against the lossless checklist; exit 1 on error findings."""
    from tensorfabric.fabric.lint import RULES, lint_context, rule_status
    from tensorfabric.fabric.lint.view import build_context

    if fabric_path is None and not deployed:
        raise InputError("fabric lint: give --fabric FILE (e.g. examples/fabric.yaml), --deployed FILE, or both")
    loaded = _load(Path(fabric_path)) if fabric_path is not None else None
    records: list[Deployed] = []
    if deployed:
        from tensorfabric.fabric.parsers import parse_deployed

        records = [parse_deployed(path, fmt=fmt) for path in deployed]
    ctx = build_context(loaded, records)
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise InputError(f"--rule: {unknown[0]!r} is not a rule id; known: {', '.join(sorted(RULES))}")
    findings = lint_context(ctx, only=rules)
    status = rule_status(ctx, findings, only=rules)
    if as_json:
        _lint_json(records, findings, status)
    else:
        _render_reads(records)
        _render_lint(findings, status)
    return exit_code_for(findings)


def _lint_json(records: Sequence[Deployed], findings: Sequence[Finding], status: Sequence[RuleStatus]) -> None:
    files = [{"source": r.source, "device": r.device, "format": r.format,
              "detection": r.detection.to_dict() if r.detection else None,
              "read": r.read.to_dict() if r.read else None} for r in records]
    extra: dict[str, Any] = {"deployed": files, "rules": [s.to_dict() for s in status]}
    if len(files) == 1:
        extra["format"], extra["read"] = files[0]["format"], files[0]["read"]
    render_findings(findings, as_json=True, extra=extra, title="fabric lint")


def _render_reads(records: Sequence[Deployed]) -> None:
    """Per deployed file: what was read, how its dialect was told, and its first warnings."""
    con = console()
    for record in records:
        if record.read is not None:
            con.print(record.read.summary(), markup=False, highlight=False)
        if record.detection is not None:
            con.print(f"  {record.detection.summary()}", markup=False, highlight=False)
        for warning in record.read.warnings[:5] if record.read else ():
            con.print(f"  warning: {warning}", markup=False, highlight=False)
        if record.read is not None and len(record.read.warnings) > 5:
            con.print(f"  ... {len(record.read.warnings) - 5} more warnings (--json lists them)", highlight=False)


def _render_lint(findings: Sequence[Finding], status: Sequence[RuleStatus]) -> None:
    con = console()
    checked = [s for s in status if s.status == "checked"]
    open_ = [s for s in status if s.status == "undeterminable"]
    if findings:
        render_findings(findings, as_json=False, title="fabric lint")
    elif checked:
        con.print(f"[green]no findings[/] from the {len(checked)} rule(s) that could be checked")
    else:
        con.print("[yellow]no rule could be checked[/]: the input holds none of the facts a rule needs "
                  "(see below); this is not a clean result")
    line = f"rules: {len(checked)} checked, {len(open_)} undeterminable, {len(status) - len(checked) - len(open_)} " \
           "not applicable"
    con.print(line, highlight=False)
    for item in open_[:8]:
        con.print(f"  {item.rule}: undeterminable, the input lacks {' and '.join(item.missing)}", markup=False,
                  highlight=False)
    if len(open_) > 8:
        con.print(f"  ... {len(open_) - 8} more (--json lists every rule's status)", highlight=False)


@cli.command("rules")
@json_option()
def rules_cmd(as_json: bool) -> int:
    """List the lint rules with their checklist item."""
    from tensorfabric.fabric.lint import RULES

    rows = [{"rule": r.id, "severity": r.severity, "checklist": r.checklist, "summary": r.summary}
            for r in RULES.values()]
    if as_json:
        emit_json({"rules": rows})
        return 0
    for row in rows:
        click.echo(f"{row['checklist']:<4} {row['rule']:<32} {row['severity']:<8} {row['summary']}")
    return 0


@cli.command("render")
@fabric_option("The spec to render (e.g. examples/fabric.yaml).", required=True)
@click.option("--out", "out_dir", required=True, type=OUTPUT_DIR, help="Directory for one file per device.")
@force_option("files of the same name in --out")
@json_option("Print the written paths as JSON.")
def render_cmd(fabric_path: str, out_dir: str, force: bool, as_json: bool) -> int:
    """Render switch and host configs for every device of the --fabric spec, one file each, atomically."""
    from tensorfabric.fabric.renderers import render_all
    from tensorfabric.host.ncclenv import nccl_env_for_nics

    written = render_all(_load(Path(fabric_path)), out_dir, nccl_env_for=nccl_env_for_nics, force=force)
    paths = [str(p) for p in written]
    if as_json:
        emit_json({"written": paths})
    else:
        for item in paths:
            click.echo(item)
    return 0
