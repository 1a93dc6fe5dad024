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
    nets = {c.net.lower() for c in report.channels if c.net}
    if "socket" in nets and len(nets) > 1:
        yield Finding("log.mixed-transports", "error", subject,
                      f"channels use both sockets and {', '.join(sorted(nets - {'socket'}))}: some nodes fell back "
                      "to TCP (init can hang when nodes disagree, NVIDIA/nccl#234)", {"networks": sorted(nets)},
                      "run `tensorfabric doctor` on every node; the ones without RDMA are the cause")
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
    if report.gid_index is not None:
        yield from _gid_in_use(ctx, report.gid_index, subject)
    yield from _logged_tc(ctx, report.environment.get("NCCL_IB_TC"), subject)
    for hit in report.signatures:
        if hit.id in covered:
            continue
        yield Finding(f"log.{hit.id.removeprefix('nccl.')}", hit.severity, f"{subject}:{hit.line}", hit.meaning,
                      {"line": hit.line, "count": hit.count, "excerpt": hit.excerpt}, hit.fix)


def _gid_in_use(ctx: DoctorContext, index: int, subject: str) -> Iterator[Finding]:
    """The GID index NCCL's QP line reports must be a routable RoCE v2 entry on this host's ports."""
    for port in ctx.active_roce:
        gid = next((g for g in port.gids if g.index == index), None)
        if gid is None or gid.version != 2 or gid.is_link_local:
            yield Finding("log.gid-not-rocev2", "error", subject,
                          f"NCCL used GID index {index}, which on {port.name} is "
                          f"{gid.describe() if gid else 'empty'}, not a routable RoCE v2 GID",
                          {"gid_index": index, "port": port.name, "gids": [g.describe() for g in port.gids]},
                          "unset NCCL_IB_GID_INDEX (NCCL >= 2.21 auto-selects) or pin the RoCE v2 IPv4 index")


def _logged_tc(ctx: DoctorContext, raw: str | None, subject: str) -> Iterator[Finding]:
    """NCCL_IB_TC as the logged run saw it (``set by environment``); absence proves nothing (ENV may be off)."""
    if raw is None:
        return
    try:
        tc = int(raw)
    except ValueError:
        tc = -1
    if tc < 0 or tc >> 2 != ctx.roce_dscp:
        yield Finding("log.tc-not-lossless", "error", subject,
                      f"the logged run used NCCL_IB_TC={raw}, not the lossless DSCP {ctx.roce_dscp} << 2",
                      {"NCCL_IB_TC": raw, "roce_dscp": ctx.roce_dscp},
                      f"set NCCL_IB_TC={ctx.roce_dscp << 2} on the hosts of that run")
