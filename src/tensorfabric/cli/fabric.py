"""``tensorfabric fabric``: plan a lossless RoCE fabric -- init, schema, headroom, lint, render."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

import click

from tensorfabric.cli._common import LENGTH, RATE, console, emit_json, render_findings
from tensorfabric.errors import InputError
from tensorfabric.findings import exit_code_for

__all__ = ["cli"]

_MODELS = ("sonic", "mlx5-nic", "ieee")
_ASICS = ("spectrum1", "spectrum2", "spectrum3", "spectrum4", "spectrum5", "spectrum6")
_NOS = ("sonic", "cumulus", "eos", "nxos")


@click.group("fabric")
def cli() -> None:
    """Plan a lossless RoCE fabric from one spec: headroom, per-NOS configs, cross-vendor lint."""


@cli.command("init")
@click.option("--leaves", type=click.IntRange(1, 512), default=2, show_default=True)
@click.option("--spines", type=click.IntRange(0, 512), default=2, show_default=True)
@click.option("--hosts-per-leaf", type=click.IntRange(1, 512), default=4, show_default=True)
@click.option("--speed", type=RATE, default="400G", show_default=True, help="Port speed, e.g. 100G, 400G.")
@click.option("--nos", type=click.Choice(_NOS), default="sonic", show_default=True)
@click.option("--asic", type=click.Choice(_ASICS), default="spectrum4", show_default=True)
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the spec here (atomically) instead of stdout.")
def init_cmd(leaves: int, spines: int, hosts_per_leaf: int, speed: float, nos: str, asic: str,
             out: Path | None) -> int:
    """Write a starter leaf/spine spec with the default lossless plan (it lints clean)."""
    from tensorfabric.fabric.init import starter_yaml
    from tensorfabric.fsutil import atomic_write_text

    text = starter_yaml(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf, speed_bps=speed, nos=nos,
                        asic=asic)
    if out is None:
        sys.stdout.write(text)
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
@click.option("--model", type=click.Choice(_MODELS), default="sonic", show_default=True)
@click.option("--asic", type=click.Choice(_ASICS), default="spectrum4", show_default=True,
              help="Switch ASIC constants (sonic model).")
@click.option("--medium", type=click.Choice(("copper", "fiber")), default="fiber", show_default=True,
              help="Cable medium (ieee model).")
@click.option("--spec", "spec_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Instead of one link: every cabled port of this spec, with the model its device uses.")
@click.option("--json", "as_json", is_flag=True, help="Machine output.")
@click.option("--explain", is_flag=True, help="Show every term of the sum.")
def headroom_cmd(speed: float | None, cable: float | None, mtu: int, model: str, asic: str, medium: str,
                 spec_path: Path | None, as_json: bool, explain: bool) -> int:
    """PFC headroom (xoff, xon, size in bytes) for one lossless priority group, or per port of a spec."""
    from tensorfabric.fabric.headroom import compute_headroom

    if spec_path is not None:
        return _spec_headroom(spec_path, as_json)
    if speed is None or cable is None:
        raise InputError("fabric headroom: give --speed and --cable (e.g. --speed 400G --cable 5m), or --spec FILE")
    options = {"medium": medium} if model == "ieee" else {}
    result = compute_headroom(speed, cable, mtu, model, asic, **options)
    if as_json:
        emit_json(result.to_dict())
        return 0
    con = console()
    con.print(f"{model} model, {speed / 1e9:g}G, {cable:g} m, MTU {mtu}"
              + (f", {asic}" if model == "sonic" else ""))
    con.print(f"xoff {result.xoff_bytes} B   xon {result.xon_bytes} B   size {result.size_bytes} B")
    if explain:
        from rich.table import Table

        table = Table(title="terms")
        for col in ("term", "value", "unit", "how"):
            table.add_column(col, overflow="fold")
        for term in result.terms:
            table.add_row(term.name, f"{term.value:,.1f}".rstrip("0").rstrip("."), term.unit, term.formula)
        con.print(table)
    return 0


def _spec_headroom(spec_path: Path, as_json: bool) -> int:
    from rich.table import Table

    from tensorfabric.fabric.headroom import headroom_for_port
    from tensorfabric.fabric.spec import load_spec

    spec = load_spec(spec_path)
    ports = []
    for link in spec.links:
        for end in (link.a, link.b):
            configured = headroom_for_port(spec, end)
            needed = headroom_for_port(spec, end, configured=False)
            if configured is not None and needed is not None:
                ports.append((end, configured, needed))
    if as_json:
        emit_json({"ports": [
            {"port": end, "peer": spec.peer_of(end), "model": r.model, "speed_bps": r.speed_bps, "cable_m": r.cable_m,
             "mtu": r.mtu, "xoff_bytes": r.xoff_bytes, "xon_bytes": r.xon_bytes, "size_bytes": r.size_bytes,
             "needed_xoff_bytes": need.xoff_bytes} for end, r, need in ports]})
        return 0
    table = Table(title=f"headroom per port: {spec.name}")
    for col in ("port", "model", "speed", "cable", "mtu", "xoff", "xon", "size"):
        table.add_column(col, justify="left" if col in ("port", "model") else "right")
    for end, r, _ in ports:
        table.add_row(end, r.model, f"{r.speed_bps / 1e9:g}G", f"{r.cable_m:g}m", str(r.mtu), str(r.xoff_bytes),
                      str(r.xon_bytes), str(r.size_bytes))
    console().print(table)
    return 0


@cli.command("lint")
@click.argument("spec", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--deployed", "deployed", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A deployed config (SONiC config_db.json, NX-OS, EOS, Junos, Dell SONiC CLI, Cumulus "
                   "traffic.conf / NVUE / nv show qos roce, mlnx_qos output, NCCL env, host script); repeatable.")
@click.option("--format", "fmt", default=None, metavar="FORMAT",
              help="Read every --deployed file as this dialect (sonic, nxos, eos, junos, dell-sonic, nvue, nvue-show, "
                   "cumulus-datapath, mlnx_qos, host-script, nccl-env) instead of detecting it.")
@click.option("--rule", "rules", multiple=True, help="Run only this rule id (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print {\"findings\": [...]}.")
def lint_cmd(spec: Path | None, deployed: tuple[Path, ...], fmt: str | None, rules: tuple[str, ...],
             as_json: bool) -> int:
    """Check a spec and/or deployed configs against the lossless checklist; exit 1 on error findings."""
    from tensorfabric.fabric.lint import RULES, lint_context
    from tensorfabric.fabric.lint.view import build_context
    from tensorfabric.fabric.spec import load_spec

    if spec is None and not deployed:
        raise InputError("fabric lint: give a SPEC file, --deployed FILE, or both")
    loaded = load_spec(spec) if spec is not None else None
    records = []
    if deployed:
        from tensorfabric.fabric.parsers import FORMATS, parse_deployed

        if fmt is not None and fmt not in FORMATS:
            raise InputError(f"--format: {fmt!r} is not a dialect; known: {', '.join(FORMATS)}")
        records = [parse_deployed(path, fmt=fmt) for path in deployed]
    ctx = build_context(loaded, records)
    lint_context(ctx)  # loads the rule registry so --rule can be checked
    unknown = [r for r in rules if r not in RULES]
    if unknown:
        raise InputError(f"--rule: {unknown[0]!r} is not a rule id; known: {', '.join(sorted(RULES))}")
    findings = lint_context(ctx, only=rules)
    render_findings(findings, as_json=as_json, title="fabric lint")
    return exit_code_for(findings)


@cli.command("rules")
@click.option("--json", "as_json", is_flag=True)
def rules_cmd(as_json: bool) -> int:
    """List the lint rules with their checklist item."""
    from tensorfabric.fabric.lint import RULES, lint_context
    from tensorfabric.fabric.lint.view import LintContext
    from tensorfabric.fabric.spec_qos import QosPlan

    lint_context(LintContext(plan=QosPlan(), devices={}))
    rows = [{"rule": r.id, "severity": r.severity, "checklist": r.checklist, "summary": r.summary}
            for r in RULES.values()]
    if as_json:
        emit_json({"rules": rows})
        return 0
    for row in rows:
        click.echo(f"{row['checklist']:<4} {row['rule']:<32} {row['severity']:<8} {row['summary']}")
    return 0


@cli.command("render")
@click.argument("spec", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Directory for one file per device.")
@click.option("--json", "as_json", is_flag=True, help="Print the written paths as JSON.")
def render_cmd(spec: Path, out_dir: Path, as_json: bool) -> int:
    """Render switch and host configs for every device of SPEC, one file each, atomically."""
    from tensorfabric.fabric.spec import load_spec
    from tensorfabric.host.ncclenv import nccl_env_for_nics

    # The renderer registry belongs to the fabric-io part; bound by name so this verb type-checks on its own.
    renderers: Any = importlib.import_module("tensorfabric.fabric.renderers")
    loaded = load_spec(spec)
    written = renderers.render_all(loaded, out_dir, nccl_env_for=nccl_env_for_nics)
    paths = [str(p) for p in (written.values() if isinstance(written, dict) else written or [])]
    if as_json:
        click.echo(json.dumps({"written": paths}, indent=2))
    else:
        for path in paths:
            click.echo(path)
    return 0
