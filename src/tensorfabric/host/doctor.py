"""Run every doctor check on a discovered host (and optionally an NCCL log) and collect the report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tensorfabric.findings import Finding, exit_code_for
from tensorfabric.host.checks import DoctorContext, run_checks
from tensorfabric.host.discovery import affinity
from tensorfabric.host.mlnx_qos import MlnxQos
from tensorfabric.host.nccl_log import NcclLogReport
from tensorfabric.host.ncclenv import tcp_interface
from tensorfabric.host.records import HostInventory, RouteChoice

__all__ = ["DoctorReport", "run_doctor"]


@dataclass(frozen=True, slots=True)
class DoctorReport:
    findings: tuple[Finding, ...]
    inventory: HostInventory
    tcp_path: RouteChoice
    nccl_log: NcclLogReport | None = None
    mlnx_qos: Mapping[str, MlnxQos] | None = None

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.findings)

    def host_summary(self) -> dict[str, Any]:
        inv = self.inventory
        return {
            "root": inv.root,
            "rdma_ports": [{"port": p.name, "state": p.state, "link_layer": p.link_layer, "netdev": p.netdev}
                           for p in inv.ports],
            "gpus": len(inv.gpus),
            "gpu_nic_distance": {a.gpu: f"{a.distance} to {a.nic}" for a in affinity(inv)},
            "dev_infiniband": inv.dev_infiniband, "memlock": inv.memlock, "in_container": inv.in_container,
        }

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"findings": [f.to_dict() for f in self.findings], "host": self.host_summary(),
                               "tcp_path": self.tcp_path.to_dict()}
        if self.nccl_log is not None:
            out["nccl_log"] = self.nccl_log.to_dict()
        if self.mlnx_qos:
            out["mlnx_qos"] = {name: q.to_dict() for name, q in sorted(self.mlnx_qos.items())}
        return out


def run_doctor(inv: HostInventory, *, environ: Mapping[str, str], roce_dscp: int = 26,
               roce_priority: int | None = None, mtu: int | None = None,
               nccl_log: NcclLogReport | None = None, mlnx_qos: Mapping[str, MlnxQos] | None = None) -> DoctorReport:
    """All checks. ``environ`` is the process environment; /etc/nccl.conf values apply beneath it, as in NCCL."""
    merged = {**inv.nccl_conf, **{k: v for k, v in environ.items() if k.startswith(("NCCL_", "GLOO_"))}}
    ctx = DoctorContext(inv, merged, roce_dscp=roce_dscp, roce_priority=roce_priority, mtu=mtu, nccl_log=nccl_log,
                        mlnx_qos=mlnx_qos or {})
    return DoctorReport(tuple(run_checks(ctx)), inv, tcp_interface(inv), nccl_log, mlnx_qos)
