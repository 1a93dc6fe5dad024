"""``tensorfabric env``: the NCCL/Gloo environment for this host, derived from sysfs (and a fabric spec).

This module and ``doctor`` are where the host doctor reads ``os.environ``: the user's own NCCL_* / GLOO_* values
are never overridden, only reported. :func:`require_rdma_here` is the one ``--require-rdma`` pre-check of ``env``,
``bench`` and ``run``: a host with no usable RDMA port is refused (exit 2) before anything is derived or spawned;
``bench`` and ``run`` have no ``--sysfs-root`` and read the tree named by ``TENSORFABRIC_SYSFS_ROOT`` (default
``/``), which is how tests point them at a captured host.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tensorfabric import roce
from tensorfabric.cli._options import fabric_option, json_option
from tensorfabric.errors import InputError
from tensorfabric.findings import Finding
from tensorfabric.host.nccl_conf import ENVIRONMENT, user_home

if TYPE_CHECKING:
    from tensorfabric.host.ncclenv import EnvPlan

__all__ = ["SYSFS_ROOT_ENV", "HostPlan", "cli", "plan_from_spec", "rdma_missing", "read_text_file",
           "require_rdma_here"]

SYSFS_ROOT_ENV = "TENSORFABRIC_SYSFS_ROOT"


@dataclass(frozen=True, slots=True)
class HostPlan:
    """The plain values host checks need from a fabric spec (host never imports fabric)."""

    roce_dscp: int = roce.ROCE_DSCP
    ib_tc: int | None = None
    roce_priority: int | None = None
    mtu: int | None = None
    rail_optimized: bool = False


def plan_from_spec(path: str | None, *, roce_dscp: int | None = None) -> HostPlan:
    """Read RoCE DSCP, NCCL traffic class, lossless priority and host MTU from a fabric spec (or defaults)."""
    if path is None:
        return HostPlan(roce_dscp=roce.ROCE_DSCP if roce_dscp is None else roce_dscp)
    from tensorfabric.fabric.spec import load_spec

    qos = load_spec(path).qos
    dscp = qos.roce.dscp[0] if roce_dscp is None else roce_dscp
    return HostPlan(roce_dscp=dscp, ib_tc=qos.nccl_tc() if roce_dscp is None else None,
                    roce_priority=qos.roce.priority, mtu=qos.mtu.host, rail_optimized=qos.nccl.cross_nic == 0)


def read_text_file(path: str, what: str) -> bytes:
    """The one gate for a file the user names (regular files only, bounded; ``-`` is standard input)."""
    from tensorfabric.fsutil import read_input

    return read_input(path, what, stdin=sys.stdin.buffer)


def rdma_missing(sysfs_root: str) -> str | None:
    """What this host lacks for RDMA, in one phrase, or None: no device under ``class/infiniband``, or no port
    of one ACTIVE. Only the names and port states are read: the pre-check must cost nothing next to a spawn."""
    from tensorfabric.fsutil import locate_sysfs

    where = locate_sysfs(sysfs_root).sys / "class" / "infiniband"
    try:
        devices = sorted(os.listdir(where))
    except OSError:
        devices = []
    if not devices:
        return f"no RDMA device under {where}"
    states: list[str] = []
    for device in devices:
        ports = where / device / "ports"
        for port in sorted(os.listdir(ports)) if ports.is_dir() else []:
            try:
                state = (ports / port / "state").read_text(encoding="ascii", errors="replace").strip()
            except OSError:
                state = "unreadable"
            if state.split(":")[-1].strip() == "ACTIVE":
                return None
            states.append(f"{device} port {port}: {state.split(':')[-1].strip() or 'unknown'}")
    return f"no ACTIVE RDMA port under {where} ({', '.join(states) or ', '.join(devices) + ' have no ports'})"


def require_rdma_here(sysfs_root: str | None = None) -> None:
    """InputError (exit 2) when ``--require-rdma`` cannot hold on this host; ``sysfs_root`` None reads
    ``TENSORFABRIC_SYSFS_ROOT`` or ``/``."""
    root = sysfs_root if sysfs_root is not None else os.environ.get(SYSFS_ROOT_ENV) or "/"
    missing = rdma_missing(root)
    if missing is not None:
        raise InputError(f"--require-rdma: {missing}, so NCCL and UCX could only use TCP sockets; load the NIC's "
                         "RDMA driver (e.g. mlx5_ib) and bring a port up (tensorfabric doctor says what is "
                         "missing), or drop --require-rdma to allow the socket fallback")


def _sh(name: str, value: str) -> str:
    # NCCL's exact-match '=' reads as a typo in `export X==y`; quoting it keeps the line obvious.
    quoted = shlex.quote(value)
    return f"export {name}={quoted if quoted != value or not value.startswith('=') else repr(value)}"


def _dotenv(name: str, value: str) -> str:
    return f"{name}={value}" if value and all(c.isalnum() or c in "=:,._-/" for c in value) else \
        f"{name}={json.dumps(value)}"


def _named_file(finding: Finding, origin: Mapping[str, str]) -> Finding:
    """A kept value that one of NCCL's files sets says so: the environment is not where to unset it."""
    where = origin.get(finding.subject)
    if finding.rule != "env.user-value-kept" or where is None or where == ENVIRONMENT:
        return finding
    return replace(finding, message=finding.message.replace(" is set in the environment;", f" is set in {where};"),
                   evidence={**finding.evidence, "file": where},
                   fix=f"remove {finding.subject} from {where} to use the derived value, or confirm "
                       f"{finding.evidence.get('set')!r} is intended")


@click.command("env")
@click.option("--sysfs-root", default="/", show_default=True,
              help="The tree holding sys/, proc/, dev/ ('/', a capture) or its sys/ directory ('/sys').")
@fabric_option("Fabric spec (YAML): RoCE DSCP, NCCL traffic class, MTU.")
@click.option("--format", "fmt", type=click.Choice(["sh", "json", "dotenv"]), default="sh", show_default=True,
              help="Text output form (--json is the same as --format json).")
@json_option("Machine output: the derived variables, kept values and findings as one JSON document.")
@click.option("--explain", is_flag=True, help="Say why each variable has its value.")
@click.option("--nccl-version", default=None, help="NCCL version in use, e.g. 2.18.3 (default: assume >= 2.21).")
@click.option("--roce-dscp", type=click.IntRange(0, 63), default=None, help="RoCE DSCP (default 26 or the spec's).")
@click.option("--rail-optimized", is_flag=True, help="Rail-optimized fabric: NCCL_CROSS_NIC=0.")
@click.option("--require-rdma", is_flag=True, help="Add NCCL_NET=IB so a socket fallback fails init.")
@click.option("--gids", "gids_path", default=None, metavar="FILE",
              help="Captured GID tables (show_gids, ibv_devinfo -v, sysfs gids) to choose GID indices from.")
def cli(sysfs_root: str, fabric_path: str | None, fmt: str, as_json: bool, explain: bool, nccl_version: str | None,
        roce_dscp: int | None, rail_optimized: bool, require_rdma: bool, gids_path: str | None) -> int:
    """Print the NCCL environment for this host (eval "$(tensorfabric env)").

    Variables you already set are kept and reported, never overridden. Exit 0, or 2 for bad input (and for
    --require-rdma on a host with no active RDMA port).
    """
    from tensorfabric.fsutil import locate_sysfs
    from tensorfabric.host.discovery import discover
    from tensorfabric.host.gid_capture import parse_gid_capture
    from tensorfabric.host.ncclenv import derive_env

    if require_rdma:
        require_rdma_here(sysfs_root)  # NCCL_NET=IB was silently left out on such a host, with exit 0
    plan = plan_from_spec(fabric_path, roce_dscp=roce_dscp)
    captured = parse_gid_capture(read_text_file(gids_path, "GID capture"), source=gids_path) if gids_path else None
    sysfs = locate_sysfs(sysfs_root, need_root=True)
    inv = discover(sysfs_root, environ=os.environ, home=user_home(),
                   cwd=os.getcwd() if sysfs.root is not None and sysfs.root == Path("/") else "/")
    # What NCCL will read: the environment over its configuration files; a value set in either is kept.
    environ = {**inv.nccl_conf, **os.environ}
    origin = inv.nccl_conf_read.origins(os.environ, environ)
    result = derive_env(inv, environ=environ, roce_dscp=plan.roce_dscp, ib_tc=plan.ib_tc,
                        rail_optimized=rail_optimized or plan.rail_optimized, nccl_version=nccl_version,
                        require_rdma=require_rdma,
                        gid_ports=[p.as_port() for p in captured if p.is_roce] if captured is not None else None)
    result = replace(result, findings=tuple(_named_file(f, origin) for f in result.findings))
    if as_json or fmt == "json":
        from tensorfabric.cli._common import emit_json

        emit_json({**result.to_dict(), "kept_from": {k: origin[k] for k in result.kept}, "sysfs_root": sysfs.to_dict()})
        return 0
    click.echo("\n".join(_render(result, origin, fmt=fmt, explain=explain, note=sysfs.note, gids_path=gids_path)))
    for finding in result.findings:
        click.echo(f"warning: {finding.message}; {finding.fix}", err=True)
    sys.stdout.flush()
    return 0


def _render(result: EnvPlan, origin: Mapping[str, str], *, fmt: str, explain: bool, note: str,
            gids_path: str | None) -> list[str]:
    """The lines ``env`` prints for a shell (``sh``) or a .env file: each variable, or why it was kept."""
    line = _sh if fmt == "sh" else _dotenv
    out: list[str] = [f"# sysfs root: {note}"] if explain else []
    for var in result.variables:
        if explain:
            out.append(f"# {var.reason}")
        if var.name in result.kept:
            where = "" if origin[var.name] == ENVIRONMENT else f" in {origin[var.name]}"
            out.append(f"# {var.name} kept as set{where}: {result.kept[var.name]!r} (derived: {var.value!r})")
        else:
            out.append(line(var.name, var.value))
    if not result.variables:
        out.append("# nothing to derive: no RDMA port and no usable interface")
    if result.gid_choice:
        where = f" (from {gids_path})" if gids_path else ""
        out.append(f"# RoCE v2 IPv4 GID index per port{where}: " + ", ".join(
            f"{name}={'none' if index is None else index}" for name, index in result.gid_choice.items()))
    return out
