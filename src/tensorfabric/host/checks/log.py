"""What NCCL's own log says: the transport it used, GPUDirect, and known failure signatures."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register

_COVERED = {"socket": {"nccl.no-ib-device"}, "gdr": {"nccl.gdr-disabled"}}


@register("log")
def log(ctx: DoctorContext) -> Iterator[Finding]:
    report = ctx.nccl_log
    if report is None:
        return
    subject = f"log {report.source}"
    covered: set[str] = set()
    evidence = {"transport": report.transport, "gpudirect": report.gpudirect, "network": report.network,
                "devices": [str(d) for d in report.devices]}
    if report.transport == "socket":
        covered |= _COVERED["socket"]
        yield Finding("log.socket-transport", "error", subject,
                      "NCCL moved data over TCP sockets, not RDMA" + (" (NET/IB: No device found)"
                                                                      if report.no_device else ""), evidence,
                      "run `tensorfabric doctor` on that host for the cause (device, container, NCCL_IB_DISABLE, "
                      "NCCL_NET); set NCCL_NET=IB to make a fallback fail loudly")
    elif report.transport == "unknown":
        yield Finding("log.transport-unknown", "warning", subject,
                      "the log does not show which network NCCL used", evidence,
                      "capture it with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET past the first collective")
    if report.transport != "socket" and report.gpudirect is False:
        covered |= _COVERED["gdr"]
        yield Finding("log.gdr-disabled", "warning", subject,
                      "NCCL used RDMA without GPUDirect: data is staged through host memory", evidence,
                      "load nvidia-peermem; check NCCL_NET_GDR_LEVEL against the GPU-NIC distance (doctor)")
    for hit in report.signatures:
        if hit.id in covered:
            continue
        yield Finding(f"log.{hit.id.removeprefix('nccl.')}", hit.severity, f"{subject}:{hit.line}", hit.meaning,
                      {"line": hit.line, "count": hit.count, "excerpt": hit.excerpt}, hit.fix)
