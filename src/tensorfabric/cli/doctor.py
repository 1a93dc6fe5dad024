"""``tensorfabric doctor``: every host check (RDMA, GIDs, NCCL variables, MTU, ECN, GPUDirect, limits) plus,
with ``--nccl-log``, the proof of which transport NCCL really used.

Exit codes: 0 no error findings; 1 at least one finding of severity ``error`` (e.g. no RDMA device, a log
showing the socket transport); 2 bad input (missing sysfs root, unreadable/binary/truncated log, bad spec).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from tensorfabric.cli._options import fabric_option, json_option
from tensorfabric.cli.env import plan_from_spec, read_text_file
from tensorfabric.errors import InputError
from tensorfabric.host.nccl_conf import user_home

if TYPE_CHECKING:
    from tensorfabric.host.doctor import DoctorReport
    from tensorfabric.host.gid_capture import GidCapture
    from tensorfabric.host.mlnx_qos import MlnxQos
    from tensorfabric.host.nccl_log import NcclLogReport
    from tensorfabric.host.nccl_tests import NcclTestsReport
    from tensorfabric.host.records import HostInventory
    from tensorfabric.host.ucx_report import UcxLogReport

__all__ = ["cli"]


def _run(argv: Sequence[str]) -> str:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=15, check=True).stdout
    except subprocess.SubprocessError as exc:
        raise OSError(f"{argv[0]} failed: {exc}") from exc


def _mlnx_qos(files: Sequence[str], live_netdevs: Sequence[str]) -> dict[str, MlnxQos]:
    """Captured files (IF=FILE) first; on the live host, run the tool for the other RoCE netdevs."""
    from tensorfabric.host.mlnx_qos import collect, parse_mlnx_qos

    result: dict[str, MlnxQos] = {}
    for item in files:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--mlnx-qos {item!r} must be IF=FILE, e.g. ens1f0np0=mlnx_qos.txt")
        text = read_text_file(path, "mlnx_qos capture").decode("utf-8", errors="replace")
        result[name] = parse_mlnx_qos(text, interface=name, source=path)
    missing = [n for n in live_netdevs if n not in result]
    if missing and shutil.which("mlnx_qos"):
        result.update(collect(missing, _run))
    return result


@click.command("doctor")
@click.option("--sysfs-root", default="/", show_default=True,
              help="The tree holding sys/, proc/, dev/ ('/', a capture) or its sys/ directory ('/sys').")
@click.option("--nccl-log", "log_path", default=None, help="NCCL_DEBUG=INFO output to verify.")
@fabric_option("Fabric spec (YAML): RoCE DSCP/priority and MTU to expect.")
@click.option("--roce-dscp", type=click.IntRange(0, 63), default=None, help="RoCE DSCP (default 26 or the spec's).")
@click.option("--mlnx-qos", "qos_files", multiple=True, metavar="IF=FILE",
              help="Captured `mlnx_qos -i IF` output (repeatable); on the live host the tool runs when present.")
@click.option("--gids", "gids_path", default=None, metavar="FILE",
              help="Captured GID tables (show_gids, ibv_devinfo -v, sysfs gids; rdma link, ibstat) to judge "
                   "instead of sysfs.")
@click.option("--ucx-log", "ucx_path", default=None, metavar="FILE",
              help="UCX/NIXL log (UCX_LOG_LEVEL=info UCX_PROTO_INFO=y) whose data path to classify.")
@click.option("--require-rdma", is_flag=True, help="With --ucx-log: error unless the log proves an RDMA data path.")
@click.option("--nccl-tests", "nccl_tests_path", default=None, metavar="FILE",
              help="nccl-tests/rccl-tests *_perf output: busbw per size, #wrong, busbw against the line rate.")
@click.option("--line-rate", default=None, metavar="RATE",
              help="Network rate per node that nccl-tests busbw is compared with: 400G, 8x400G "
                   "(default: this host's active RoCE ports).")
@json_option("Machine output: {findings, host, tcp_path, nccl_log, gid_tables, ucx_log, nccl_tests}.")
def cli(sysfs_root: str, log_path: str | None, fabric_path: str | None, roce_dscp: int | None,
        qos_files: tuple[str, ...], gids_path: str | None, ucx_path: str | None, require_rdma: bool,
        nccl_tests_path: str | None, line_rate: str | None, as_json: bool) -> int:
    """Check this host's RDMA/NCCL setup; exit 1 if any finding is an error, 2 for bad input."""
    from tensorfabric.cli._common import render_findings
    from tensorfabric.fsutil import locate_sysfs
    from tensorfabric.host.discovery import discover
    from tensorfabric.host.doctor import run_doctor
    from tensorfabric.host.gid_capture import parse_gid_capture
    from tensorfabric.host.hostname import resolve_hostname
    from tensorfabric.host.nccl_log import parse_nccl_log
    from tensorfabric.host.nccl_tests import line_rate_flag, parse_nccl_tests
    from tensorfabric.host.ucx_report import parse_ucx_report

    plan = plan_from_spec(fabric_path, roce_dscp=roce_dscp)
    log = parse_nccl_log(read_text_file(log_path, "NCCL log"), source=log_path) if log_path else None
    gids = parse_gid_capture(read_text_file(gids_path, "GID capture"), source=gids_path) if gids_path else None
    where = locate_sysfs(sysfs_root, need_root=True)
    ucx = parse_ucx_report(read_text_file(ucx_path, "UCX log"), source=ucx_path) if ucx_path else None
    rate = line_rate_flag(line_rate) if line_rate else None
    perf = parse_nccl_tests(read_text_file(nccl_tests_path, "nccl-tests output"),
                            source=nccl_tests_path) if nccl_tests_path else None
    live = where.root == Path("/")
    inv = discover(sysfs_root, environ=os.environ, home=user_home(), cwd=os.getcwd() if live else "/")
    qos = _mlnx_qos(qos_files, [p.netdev for p in inv.roce_ports if p.netdev] if live else [])
    report = run_doctor(inv, environ=os.environ, roce_dscp=plan.roce_dscp, roce_priority=plan.roce_priority,
                        mtu=plan.mtu, nccl_log=log, mlnx_qos=qos, gid_tables=gids,
                        hostname=resolve_hostname(socket.gethostname()) if live else None, ucx_log=ucx,
                        require_rdma=require_rdma, nccl_tests=perf, line_rate=rate,
                        software=_software(inv) if live else None)
    if as_json:
        extra = {**{k: v for k, v in report.to_dict().items() if k != "findings"}, "sysfs_root": where.to_dict(),
                 "nccl_conf": _conf_dict(report)}
        render_findings(report.findings, as_json=True, extra=extra)
        return report.exit_code
    _render(report, f"--sysfs-root {where.note}", log, ucx, perf, gids)
    return report.exit_code


def _conf_dict(report: DoctorReport) -> dict[str, object]:
    """NCCL's configuration files as read, and where each judged variable's value came from."""
    conf = report.inventory.nccl_conf_read
    if report.environment_source != "shell":
        return {**conf.to_dict(), "origin": dict.fromkeys(report.environment, report.environment_source)}
    return {**conf.to_dict(), "origin": conf.origins(os.environ, report.environment)}


def _render(report: DoctorReport, where: str, log: NcclLogReport | None, ucx: UcxLogReport | None,
            perf: NcclTestsReport | None, gids: GidCapture | None) -> None:
    """For people: the host in one line, then what each pasted input says, then the findings."""
    from tensorfabric.cli._common import console, render_findings

    con = console()
    host = report.host_summary()
    ports = ", ".join(f"{p['port']} {p['link_layer'] or '?'} {p['state'] or '?'}" for p in host["rdma_ports"])
    con.print(f"host {host['root']}: RDMA ports: {ports or 'none'}; GPUs: {host['gpus']}; "
              f"TCP path: {report.tcp_path.interface or 'none'}; {where}")
    for line in _read_lines(report, log, ucx, perf, gids):
        con.print(line, markup=False)
    render_findings(report.findings, as_json=False, title="Doctor findings")


def _software(inv: HostInventory) -> dict[str, str]:
    """This host's versions for `doctor --json` (what `fleet check` compares across hosts)."""
    from tensorfabric.fleet.software import software_versions

    run = _run if shutil.which("ucx_info") else None
    return software_versions("/", [d.driver for d in inv.rdma_devices if d.driver], run=run)


_EVIDENCE = {"data-path": "proven by a data path", "selected": "selected, not proven by a data path",
             "devices": "only the devices listed, not proven by a data path", "none": "nothing in the log says"}


def _read_lines(report: DoctorReport, log: NcclLogReport | None, ucx: UcxLogReport | None,
                perf: NcclTestsReport | None, gids: GidCapture | None) -> Iterator[str]:
    """For people: per pasted input, what was read (one line) and what it says."""
    from tensorfabric.host.nccl_tests import summary_line

    files = report.inventory.nccl_conf_read.files
    if any(f.read is not None for f in files):
        yield "NCCL configuration files, in NCCL's order: " + "; ".join(
            f"{f.path}: " + (", ".join(f"{k}={v}" for k, v in f.read.values.items()) or "nothing set")
            if f.read is not None else f"{f.path}: absent" for f in files)
    if log is not None:
        if log.read is not None:
            yield log.read.summary()
        yield (f"NCCL log {log.source}: transport {log.transport} ({_EVIDENCE[log.evidence]}), GPUDirect "
               f"{log.gpudirect_mode}, scope {log.scope}, devices {', '.join(str(d) for d in log.devices) or 'none'}"
               f"; proof: {log.proof or 'none'}")
        yield "job environment (from the log): " + (", ".join(f"{k}={v}" for k, v in sorted(
            log.environment.items())) or "not logged")
    if ucx is not None:
        yield ucx.read.summary()
        yield f"UCX log {ucx.source}: {ucx.summary()}"
    if perf is not None:
        yield perf.read.summary()
        yield from (summary_line(table, report.line_rate) for table in perf.tables)
    if gids is not None:
        yield gids.read.summary()
    for table in report.to_dict().get("gid_tables", []):
        node = f"{table['node']} " if table["node"] else ""
        yield (f"GID table {node}{table['device']}:{table['port']}: recommended index "
               f"{table['recommended_index'] if table['recommended_index'] is not None else 'none'}"
               f"{' (RoCE v1/v2 assumed from the mlx5 pairing)' if table['types_assumed'] else ''}")
    for answer in gids.findings() if gids is not None else ():
        yield f"{answer.subject}: {answer.message}"
