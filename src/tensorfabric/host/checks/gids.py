"""GID table health: a routable RoCE v2 GID on every port, and a pinned NCCL_IB_GID_INDEX that points at one.

The tables come from sysfs, or from a capture (``--gids FILE``: show_gids, ibv_devinfo -v, rdma link) when given.
"""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register
from tensorfabric.host.gids import select_gid
from tensorfabric.host.nccl_judge import judge_gid_index
from tensorfabric.host.records import RdmaPort


def port_findings(port: RdmaPort) -> list[Finding]:
    """What is wrong with one RoCE port's GID table (empty when it has a RoCE v2 IPv4 GID)."""
    v2 = [g for g in port.gids if g.version == 2]
    subject = f"{port.device} port {port.port}"
    evidence = {"gids": [g.describe() for g in port.gids], "netdev": port.netdev}
    netdev = port.netdev or "the netdev"
    if not port.gids:
        return [Finding("gid.table-unknown", "warning", subject, f"{port.name}: the capture has no GID table for "
                        "this port, so no index can be recommended", evidence,
                        "add `show_gids` or `ibv_devinfo -v` output for this port")]
    if all(g.version is None for g in port.gids):
        return [Finding("gid.type-unknown", "warning", subject, f"{port.name}: the capture does not say which GIDs "
                        "are RoCE v1 or v2 (older ibv_devinfo prints no type), so no index can be recommended",
                        evidence, "capture `show_gids` or `ibv_devinfo -v` from a current rdma-core instead")]
    if not v2:
        return [Finding("gid.no-rocev2", "error", subject,
                        f"{port.name} has no RoCE v2 GID: v1 traffic has no IP header (no DSCP, not routable)",
                        evidence, f"assign an IP address to {netdev}; check that the driver exposes RoCE v2 "
                        "(cma_roce_mode, firmware)")]
    if all(g.is_link_local for g in v2):
        return [Finding("gid.link-local-only", "error", subject,
                        f"{port.name} has only link-local RoCE v2 GIDs: they are not routed and NCCL's "
                        "auto-selection skips them", evidence, f"assign an IPv4 (or global IPv6) address to {netdev}")]
    if select_gid(port.gids, family="AF_INET") is None:
        return [Finding("gid.no-rocev2-ipv4", "warning", subject,
                        f"{port.name} has RoCE v2 GIDs only for IPv6 addresses: NCCL's default auto-selection "
                        "(NCCL_IB_ADDR_FAMILY=AF_INET) finds none", evidence,
                        f"assign an IPv4 address to {netdev}, or set NCCL_IB_ADDR_FAMILY=AF_INET6 on every host")]
    return []


@register("gid.table")
def table(ctx: DoctorContext) -> Iterator[Finding]:
    for port in ctx.gid_ports:
        yield from port_findings(port)


def _faults(port: RdmaPort, index: int) -> list[str]:
    gid = next((g for g in port.gids if g.index == index), None)
    if gid is None:
        return ["empty"]
    return [*(["RoCE v1"] if gid.version != 2 else []), *(["link-local"] if gid.is_link_local else [])]


@register("gid.index-env")
def index_env(ctx: DoctorContext) -> Iterator[Finding]:
    raw = ctx.environ.get("NCCL_IB_GID_INDEX")
    if raw is None:
        return
    judged = judge_gid_index(raw)  # an empty value is index 0 (NCCL < 2.21), which is link-local
    if judged.index is None:
        yield Finding("gid.index-env", "error", "env NCCL_IB_GID_INDEX", f"NCCL_IB_GID_INDEX={raw!r} is not an "
                      "integer", {"NCCL_IB_GID_INDEX": raw}, "unset it (NCCL >= 2.21 auto-selects)")
        return
    if not judged.pinned:
        return
    index = judged.index
    bad = False
    for port in ctx.gid_ports:
        faults = _faults(port, index)
        if faults:
            bad = True
            yield Finding("gid.index-env", "error", f"{port.device} port {port.port}",
                          f"NCCL_IB_GID_INDEX={raw} is {' and '.join(faults)} on {port.name} (symptom: "
                          "ibv_modify_qp failed)",
                          {"NCCL_IB_GID_INDEX": raw, "gids": [g.describe() for g in port.gids]},
                          "unset NCCL_IB_GID_INDEX and let NCCL >= 2.21 auto-select, or pick the RoCE v2 IPv4 "
                          "index shown here")
    if not bad and ctx.gid_ports:
        yield Finding("gid.index-pinned", "info", "env NCCL_IB_GID_INDEX",
                      f"NCCL_IB_GID_INDEX={raw} is valid now, but indices move when addresses change "
                      "(NVIDIA/nccl#1333)", {"NCCL_IB_GID_INDEX": raw},
                      "with NCCL >= 2.21 unset it and use NCCL_IB_ROCE_VERSION_NUM=2 / NCCL_IB_ADDR_FAMILY")
