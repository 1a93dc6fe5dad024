"""GID table health: a routable RoCE v2 GID on every port, one netdev per address, and a pinned
NCCL_IB_GID_INDEX that points at a good entry.

The tables come from sysfs, or from a capture (``--gids FILE``: show_gids, ibv_devinfo -v, sysfs gids, rdma link,
ibstat) when given; a capture also carries answers about whole nodes (an empty table).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register
from tensorfabric.host.gid_capture import CapturedPort, GidCapture
from tensorfabric.host.gids import is_overlay_netdev, preferred_gid, select_gid
from tensorfabric.host.nccl_judge import judge_gid_index
from tensorfabric.host.nccl_rules import gid_index_pinned
from tensorfabric.host.records import RdmaPort


def captured_port_findings(port: CapturedPort) -> list[Finding]:
    """:func:`port_findings` for a captured port, named with its node."""
    subject = f"{port.node} {port.device} port {port.port}" if port.node else None
    return port_findings(port.as_port(), subject=subject, label=port.label, types_assumed=port.types_assumed)


def port_findings(port: RdmaPort, *, subject: str | None = None, label: str | None = None,
                  types_assumed: bool = False) -> list[Finding]:
    """What is wrong with one RoCE port's GID table (empty when it has a RoCE v2 IPv4 GID on one netdev)."""
    subject = subject or f"{port.device} port {port.port}"
    name = label or port.name
    evidence: dict[str, Any] = {"gids": [g.describe() for g in port.gids], "netdev": port.netdev}
    found = _table_findings(port, subject, name, evidence)
    if types_assumed:
        found.append(Finding("gid.types-assumed", "info", subject, f"{name}: the capture prints no RoCE versions; "
                             "v1/v2 were assumed from the mlx5 pairing (each address as RoCE v1 at index 2k and v2 "
                             "at 2k+1)", evidence, "confirm with `show_gids` or `cat "
                             f"/sys/class/infiniband/{port.device}/ports/{port.port}/gid_attrs/types/N`"))
    return found if any(f.severity != "info" for f in found) else found + _shared_addresses(port, subject, name)


def _table_findings(port: RdmaPort, subject: str, name: str, evidence: dict[str, Any]) -> list[Finding]:
    v2 = [g for g in port.gids if g.version == 2]
    netdev = port.netdev or "the netdev"
    if not port.gids:
        return [Finding("gid.table-unknown", "warning", subject, f"{name}: the capture has no GID table for "
                        "this port (rdma link, ibstat and ibstatus list ports, not GIDs), so no index can be "
                        "recommended", evidence, "add `show_gids` or `ibv_devinfo -v` output for this port")]
    if all(g.version is None for g in port.gids):
        return [Finding("gid.type-unknown", "warning", subject, f"{name}: the capture does not say which GIDs "
                        "are RoCE v1 or v2 (older ibv_devinfo prints no type) and they are not in v1/v2 pairs, so "
                        "no index can be recommended", evidence,
                        "capture `show_gids` or `ibv_devinfo -v` from a current rdma-core instead")]
    if not v2:
        return [Finding("gid.no-rocev2", "error", subject,
                        f"{name} has no RoCE v2 GID: v1 traffic has no IP header (no DSCP, not routable)",
                        evidence, f"assign an IP address to {netdev}; check that the driver exposes RoCE v2 "
                        "(cma_roce_mode, firmware)")]
    if all(g.is_link_local for g in v2):
        return [Finding("gid.link-local-only", "error", subject,
                        f"{name} has only link-local RoCE v2 GIDs: they are not routed and NCCL's "
                        "auto-selection skips them", evidence, f"assign an IPv4 (or global IPv6) address to {netdev}")]
    if select_gid(port.gids, family="AF_INET") is None:
        return [Finding("gid.no-rocev2-ipv4", "warning", subject,
                        f"{name} has RoCE v2 GIDs only for IPv6 addresses: NCCL's default auto-selection "
                        "(NCCL_IB_ADDR_FAMILY=AF_INET) finds none", evidence,
                        f"assign an IPv4 address to {netdev}, or set NCCL_IB_ADDR_FAMILY=AF_INET6 on every host")]
    return []


def _shared_addresses(port: RdmaPort, subject: str, name: str) -> list[Finding]:
    """An IPv4 whose RoCE v2 GIDs sit on two or more netdevs (an overlay or a macvlan stacked on the RoCE netdev)."""
    netdevs: dict[str, dict[str, int]] = defaultdict(dict)
    for gid in port.gids:
        if gid.version == 2 and gid.ipv4 is not None and gid.ndev:
            netdevs[gid.ipv4].setdefault(gid.ndev, gid.index)
    found = []
    for ipv4, where in netdevs.items():
        if len(where) < 2:
            continue
        nccl, ours = select_gid(port.gids), preferred_gid(port.gids)
        listed = ", ".join(f"{ndev} [{index}]" for ndev, index in where.items())
        overlays = [ndev for ndev in where if is_overlay_netdev(ndev)]
        if nccl is not None and ours is not None and nccl.index != ours.index:
            verdict = (f"NCCL's auto-selection takes the lowest index, [{nccl.index}] on the overlay {nccl.ndev}; "
                       f"the RoCE netdev's is [{ours.index}] on {ours.ndev}")
            fix = (f"pin NCCL_IB_GID_INDEX={ours.index} (and UCX_IB_GID_INDEX={ours.index}) on this node, or take "
                   f"{ipv4} off {nccl.ndev}")
        else:
            verdict = "which netdev RoCE traffic leaves from depends on the index chosen"
            fix = f"keep {ipv4} on the RoCE netdev only"
        found.append(Finding("gid.ipv4-on-two-netdevs", "warning", subject,
                             f"{name}: {ipv4} has RoCE v2 GIDs on {len(where)} netdevs ({listed}); {verdict}",
                             {"ipv4": ipv4, "netdevs": where, "overlays": overlays,
                              "nccl_index": nccl.index if nccl else None,
                              "recommended_index": ours.index if ours else None}, fix))
    return found


@register("gid.table")
def table(ctx: DoctorContext) -> Iterator[Finding]:
    captured = ctx.captured_gids
    if captured is None:
        for port in ctx.gid_ports:
            yield from port_findings(port)
        return
    for cport in captured:
        if cport.is_roce and cport.usable:
            yield from captured_port_findings(cport)
    if isinstance(captured, GidCapture):
        yield from captured.findings()


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
    if not bad and ctx.gid_ports and (found := gid_index_pinned("env NCCL_IB_GID_INDEX", raw, valid_here=True)):
        yield found
