"""Run every doctor check on a discovered host (and optionally an NCCL log, a UCX log or captured GID tables)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tensorfabric import roce
from tensorfabric.findings import Finding, exit_code_for
from tensorfabric.host.checks import DoctorContext, run_checks
from tensorfabric.host.checks.gids import captured_port_findings
from tensorfabric.host.discovery import affinity
from tensorfabric.host.gid_capture import CapturedPort, GidCapture, recommended_index
from tensorfabric.host.gids import preferred_gid
from tensorfabric.host.mlnx_qos import MlnxQos
from tensorfabric.host.nccl_log import NcclLogReport
from tensorfabric.host.nccl_tests import LineRate, NcclTestsReport, report_dict, resolve_line_rate
from tensorfabric.host.ncclenv import tcp_interface
from tensorfabric.host.records import HostInventory, HostName, RdmaPort, RouteChoice
from tensorfabric.host.ucx_report import UcxLogReport

__all__ = ["SCHEMA_VERSION", "DoctorReport", "gid_table_summary", "run_doctor"]

SCHEMA_VERSION = 2
"""Version of ``doctor --json``. 2 added what ``fleet check`` compares across hosts: per RDMA port its rate, netdev
MTU and speed, chosen GID index, firmware and driver; ``data_netdevs``; the judged ``environment``; ``software``
versions. Reports without the key are version 1."""
_ENV_PREFIXES = ("NCCL_", "GLOO_", "UCX_", "NIXL_")


@dataclass(frozen=True, slots=True)
class DoctorReport:
    findings: tuple[Finding, ...]
    inventory: HostInventory
    tcp_path: RouteChoice
    nccl_log: NcclLogReport | None = None
    mlnx_qos: Mapping[str, MlnxQos] | None = None
    gid_tables: Sequence[CapturedPort] | None = None
    """Captured GID tables (a :class:`GidCapture`)."""
    hostname: HostName | None = None
    environment_source: str = "shell"
    ucx_log: UcxLogReport | None = None
    nccl_tests: NcclTestsReport | None = None
    line_rate: LineRate | None = None
    """What nccl-tests busbw was compared with."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """The NCCL/GLOO/UCX/NIXL variables judged (this shell's over /etc/nccl.conf, or the logged job's)."""
    software: Mapping[str, str] = field(default_factory=dict)
    """Versions of what the data path runs on (kernel, NIC drivers, NCCL, torch, UCX, NIXL), where known."""

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.findings)

    def host_summary(self) -> dict[str, Any]:
        inv = self.inventory
        return {
            "root": inv.root,
            "rdma_ports": [self._port_summary(p) for p in inv.ports],
            "gpus": len(inv.gpus),
            "gpu_nic_distance": {a.gpu: f"{a.distance} to {a.nic}" for a in affinity(inv)},
            "dev_infiniband": inv.dev_infiniband, "memlock": inv.memlock, "in_container": inv.in_container,
            **({"hostname": self.hostname.to_dict()} if self.hostname else {}),
        }

    def _port_summary(self, port: RdmaPort) -> dict[str, Any]:
        dev = self.inventory.device(port.device)
        net = self.inventory.netdevs.get(port.netdev or "")
        gid = preferred_gid(port.gids) if port.is_roce else None
        return {"port": port.name, "state": port.state, "link_layer": port.link_layer, "netdev": port.netdev,
                "device": port.device, "rate": port.rate, "phys_state": port.phys_state,
                "mtu": net.mtu if net else None, "speed_mbps": net.speed_mbps if net else None,
                "gid_index": gid.index if gid else None, "traffic_class": port.traffic_class,
                "fw_ver": dev.fw_ver if dev else "", "hca_type": dev.hca_type if dev else "",
                "driver": dev.driver if dev else None}

    def data_netdevs(self) -> dict[str, dict[str, Any]]:
        """The interfaces data crosses: RoCE netdevs, those NCCL/GLOO_SOCKET_IFNAME name, and the TCP path."""
        inv = self.inventory
        roles: dict[str, str] = {}
        for port in inv.roce_ports:
            if port.netdev:
                roles.setdefault(port.netdev, "roce")
        for key in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            for item in self.environment.get(key, "").split(","):
                item = item.strip()
                if not item or item.startswith("^"):
                    continue
                exact = item.startswith("=")
                for name in inv.netdevs:
                    if name == item.lstrip("=") or (not exact and name.startswith(item)):
                        roles.setdefault(name, "socket")
        if self.tcp_path.interface:
            roles.setdefault(self.tcp_path.interface, "tcp-path")
        return {name: {"role": role, "mtu": inv.netdevs[name].mtu, "speed_mbps": inv.netdevs[name].speed_mbps,
                       "operstate": inv.netdevs[name].operstate}
                for name, role in roles.items() if name in inv.netdevs}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "findings": [f.to_dict() for f in self.findings],
                               "host": self.host_summary(), "tcp_path": self.tcp_path.to_dict(),
                               "environment_source": self.environment_source,
                               "environment": dict(sorted(self.environment.items())),
                               "software": dict(sorted(self.software.items())),
                               "data_netdevs": self.data_netdevs()}
        if self.nccl_log is not None:
            out["nccl_log"] = self.nccl_log.to_dict()
        if self.mlnx_qos:
            out["mlnx_qos"] = {name: q.to_dict() for name, q in sorted(self.mlnx_qos.items())}
        if self.gid_tables is not None:
            out["gid_tables"] = gid_table_summary(self.gid_tables)
            if isinstance(self.gid_tables, GidCapture):
                out["gid_capture"] = self.gid_tables.to_dict()
        if self.ucx_log is not None:
            out["ucx_log"] = self.ucx_log.to_dict()
        if self.nccl_tests is not None:
            out["nccl_tests"] = report_dict(self.nccl_tests, self.line_rate)
        return out


def gid_table_summary(ports: Sequence[CapturedPort]) -> list[dict[str, Any]]:
    """Per captured port (and node): the recommended GID index (``None`` without a RoCE v2 IPv4 GID) and its
    findings."""
    out = []
    for port in ports:
        findings = captured_port_findings(port) if port.is_roce else []
        out.append({"node": port.node, "device": port.device, "port": port.port,
                    "recommended_index": recommended_index(port), "types_assumed": port.types_assumed,
                    "netdev": port.netdev, "state": port.state, "link_layer": port.link_layer or
                    ("Ethernet" if port.is_roce else None), "formats": list(port.formats),
                    "gids": [g.describe() for g in port.gids], "findings": [f.to_dict() for f in findings]})
    return out


def run_doctor(inv: HostInventory, *, environ: Mapping[str, str], roce_dscp: int = roce.ROCE_DSCP,
               roce_priority: int | None = None, mtu: int | None = None,
               nccl_log: NcclLogReport | None = None, mlnx_qos: Mapping[str, MlnxQos] | None = None,
               gid_tables: Sequence[CapturedPort] | None = None, hostname: HostName | None = None,
               ucx_log: UcxLogReport | None = None, require_rdma: bool = False,
               nccl_tests: NcclTestsReport | None = None, line_rate: LineRate | None = None,
               software: Mapping[str, str] | None = None) -> DoctorReport:
    """All checks. ``environ`` is this shell's environment; /etc/nccl.conf values apply beneath it, as in NCCL.

    With ``nccl_log`` the NCCL variables judged are the logged job's own (``X set by environment to Y``), never
    ``environ``: a verdict about someone else's run must not depend on the shell the doctor runs in.
    """
    source: Literal["shell", "log"]
    line_rate = resolve_line_rate(inv, line_rate) if nccl_tests is not None else line_rate
    if nccl_log is not None:
        merged, source, complete = dict(nccl_log.environment), "log", nccl_log.env_logged
    else:
        merged = {**inv.nccl_conf, **{k: v for k, v in environ.items() if k.startswith(("NCCL_", "GLOO_"))}}
        source, complete = "shell", True
    ctx = DoctorContext(inv, merged, environ_source=source, environ_complete=complete, roce_dscp=roce_dscp,
                        roce_priority=roce_priority, mtu=mtu, nccl_log=nccl_log, mlnx_qos=mlnx_qos or {},
                        captured_gids=gid_tables, hostname=hostname,
                        ucx_log=ucx_log, require_rdma=require_rdma, nccl_tests=nccl_tests,
                        nccl_tests_line_rate=line_rate)
    findings = run_checks(ctx)
    if source == "log":
        where = f"log {nccl_log.source} env " if nccl_log is not None else "log env "
        findings = [replace(f, subject=where + f.subject.removeprefix("env "),
                            evidence={**f.evidence, "environment_source": "log"})
                    if f.subject.startswith("env ") else f for f in findings]
    judged = merged if source == "log" else {
        **inv.nccl_conf, **{k: v for k, v in environ.items() if k.startswith(_ENV_PREFIXES)}}
    return DoctorReport(tuple(findings), inv, tcp_interface(inv), nccl_log, mlnx_qos,
                        gid_tables, hostname, source, ucx_log,
                        nccl_tests, line_rate, judged, software or {})
