"""NCCL variables already set (environment or /etc/nccl.conf) that defeat RoCE or GPUDirect."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric import roce
from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register
from tensorfabric.host.discovery import affinity
from tensorfabric.host.nccl_judge import split_nccl_list
from tensorfabric.host.nccl_rules import hca_prefix, tc_not_lossless
from tensorfabric.host.ncclenv import GDR_CAP
from tensorfabric.host.pci import DISTANCES

_LEVELS = ("LOC", *DISTANCES)
_LEGACY_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")  # NCCL's levelsOldToNew (src/graph/paths.cc)


@register("env.ib-hca")
def ib_hca(ctx: DoctorContext) -> Iterator[Finding]:
    raw = ctx.environ.get("NCCL_IB_HCA")
    devices = [d.name for d in ctx.inventory.rdma_devices]
    if raw is None or not devices:
        return
    hcas = split_nccl_list(raw)
    exclude = hcas.exclude
    for name in hcas.names:
        if not any(d.startswith(name) if name in hcas.prefixes else d == name for d in devices):
            yield Finding("env.ib-hca-unknown", "warning" if exclude else "error", "env NCCL_IB_HCA",
                          f"NCCL_IB_HCA entry {name!r} matches no RDMA device here", {"NCCL_IB_HCA": raw,
                                                                                        "devices": devices},
                          f"use one of {', '.join(devices)} (`tensorfabric env` derives the list)")
    if any(d.startswith(name) for name in hcas.prefixes for d in devices):
        found = hca_prefix("env NCCL_IB_HCA", raw, devices)
        if found is not None:
            yield found


@register("env.nccl-conf")
def nccl_conf(ctx: DoctorContext) -> Iterator[Finding]:
    conf = ctx.inventory.nccl_conf_read
    for file in conf.files:
        for a in file.read.assignments if file.read is not None else ():
            if a.problem:
                yield Finding("env.nccl-conf-line", "warning", f"{file.path} line {a.line}", a.problem,
                              {"file": file.path, "line": a.line},
                              "write NAME=value on a line of its own, without spaces, quotes, 'export' or a trailing "
                              "comment: NCCL reads the file literally and keeps the first value of a name")
    for s in conf.shadowed:
        yield Finding("env.nccl-conf-shadowed", "info", f"{s.path} line {s.line}",
                      f"{s.name}={s.value!r} here is not used: NCCL read {s.by} first, which sets {s.name}={s.kept!r}",
                      {"file": s.path, "line": s.line, "name": s.name, "value": s.value, "kept_from": s.by,
                       "kept": s.kept},
                      f"set {s.name} in one file; NCCL reads NCCL_CONF_FILE (or ~/.nccl.conf), then /etc/nccl.conf, "
                      "and never overrides a value already set")


@register("env.net")
def net(ctx: DoctorContext) -> Iterator[Finding]:
    if ctx.environ.get("NCCL_IB_DISABLE", "").strip() == "1":
        yield Finding("env.ib-disabled", "error", "env NCCL_IB_DISABLE",
                      "NCCL_IB_DISABLE=1 forces TCP sockets even where RDMA works", {"NCCL_IB_DISABLE": "1"},
                      "unset NCCL_IB_DISABLE")
    if ctx.environ.get("NCCL_NET", "").strip().lower() == "socket":
        yield Finding("env.net-socket", "error", "env NCCL_NET", "NCCL_NET=Socket forces the TCP socket transport",
                      {"NCCL_NET": ctx.environ["NCCL_NET"]}, "unset NCCL_NET (or set NCCL_NET=IB to forbid sockets)")


@register("env.tc")
def traffic_class(ctx: DoctorContext) -> Iterator[Finding]:
    ports = ctx.active_roce
    if not ports:
        return
    want = roce.traffic_class(ctx.roce_dscp)
    raw = ctx.environ.get("NCCL_IB_TC")
    if raw is None and not ctx.environ_complete:
        return  # a log without ENV lines: the job may have set it, and this shell's value says nothing
    evidence: dict[str, object] = {"expected": want,
                                   "global_traffic_class": {p.name: p.traffic_class for p in ports}}
    marks = None
    if raw is None:
        overrides = {p.traffic_class for p in ports}
        if None not in overrides and all(tc is not None and tc >> 2 == ctx.roce_dscp for tc in overrides):
            return
        effective = sorted({tc if tc is not None else 0 for tc in overrides})
        marks = ", ".join(f"traffic class {tc} (DSCP {tc >> 2})" for tc in effective)
    found = tc_not_lossless("env NCCL_IB_TC", raw, (ctx.roce_dscp,), unset_marks=marks, evidence=evidence)
    if found is not None:
        yield found


@register("env.socket-ifname")
def socket_ifname(ctx: DoctorContext) -> Iterator[Finding]:
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        raw = ctx.environ.get(var)
        if raw is None:
            continue
        against = _interfaces_to_judge(ctx, var)
        if against is None:
            continue
        netdevs, seen_in_log = against
        ifnames = split_nccl_list(raw)
        prefixes = () if var == "GLOO_SOCKET_IFNAME" else ifnames.prefixes  # Gloo takes exact names only
        missing = [n for n in ifnames.names if not any(d.startswith(n) if n in prefixes else d == n
                                                       for d in netdevs)]
        if not missing or ifnames.exclude:
            continue
        if seen_in_log:
            yield Finding("env.socket-ifname-missing", "warning", f"env {var}",
                          f"{var}={raw!r} names no interface the log shows NCCL bound ({', '.join(netdevs)}): "
                          f"{', '.join(missing)} did not take effect where these lines come from",
                          {var: raw, "interfaces_in_log": netdevs},
                          "check that every rank gets the same variable; name the interface NCCL should bind")
        else:
            yield Finding("env.socket-ifname-missing", "error", f"env {var}",
                          f"{var}={raw!r} names no existing interface: {', '.join(missing)}",
                          {var: raw, "interfaces": netdevs},
                          "name an existing interface (`tensorfabric env` derives it); NCCL 2.27 fails late with "
                          "'neither AF_INET(2) nor AF_INET6(10)' (NVIDIA/nccl#1837)")


def _interfaces_to_judge(ctx: DoctorContext, var: str) -> tuple[list[str], bool] | None:
    """The interfaces a variable is judged against: ``(names, from the log)``; None when nothing may judge it.

    A logged job's variable is judged against what the log shows NCCL bound, never against the doctor's own host,
    unless the doctor runs on the host the log came from (live, and that host's name is in the log's prefixes).
    """
    report = ctx.nccl_log
    if ctx.environ_source != "log" or report is None:
        return list(ctx.inventory.netdevs), False
    if report.interfaces and var == "NCCL_SOCKET_IFNAME":
        return list(report.interfaces), True
    if ctx.hostname is not None and ctx.hostname.name in report.hosts:
        return list(ctx.inventory.netdevs), False
    return None


def _level(raw: str) -> str | None:
    text = raw.strip().upper()
    if text in _LEVELS:
        return text
    if text.isdecimal():
        return _LEGACY_LEVELS[min(int(text), 5)]
    return None


@register("gdr")
def gdr(ctx: DoctorContext) -> Iterator[Finding]:
    inv = ctx.inventory
    pairs = affinity(inv)
    if pairs and not inv.gdr_support and any(p.active for p in inv.ports):
        yield Finding("gdr.no-peermem", "warning", "host",
                      "GPUs and RDMA NICs are present but no peer-memory module is loaded: GPUDirect RDMA is off",
                      {"looked_for": ["sys/kernel/mm/memory_peers/nv_mem", "sys/module/nvidia_peermem"]},
                      "modprobe nvidia-peermem (NCCL <= 2.22.3 only detects nv_peer_mem, NVIDIA/nccl#1676)")
    raw = ctx.environ.get("NCCL_NET_GDR_LEVEL")
    if raw is None or not pairs:
        return
    level = _level(raw)
    if level is None:
        yield Finding("gdr.level-invalid", "error", "env NCCL_NET_GDR_LEVEL", f"NCCL_NET_GDR_LEVEL={raw!r} is not "
                      "one of LOC, PIX, PXB, PHB, SYS", {"NCCL_NET_GDR_LEVEL": raw}, "use a level name, e.g. PHB")
        return
    # Beyond PHB GPUDirect is rarely a gain (the derivation stops there too), so SYS GPUs only need PHB.
    needed = {p.gpu: min(p.distance, GDR_CAP, key=_LEVELS.index) for p in pairs}
    blocked = [p for p in pairs if _LEVELS.index(needed[p.gpu]) > _LEVELS.index(level)]
    if blocked:
        yield Finding("gdr.level-too-strict", "warning", "env NCCL_NET_GDR_LEVEL",
                      f"NCCL_NET_GDR_LEVEL={raw} ({level}) is stricter than the measured distance of "
                      f"{len(blocked)} of {len(pairs)} GPUs to their nearest NIC: those run without GPUDirect RDMA",
                      {"NCCL_NET_GDR_LEVEL": raw, "level": level,
                       "blocked": {p.gpu: f"{p.distance} to {p.nic}" for p in blocked}},
                      f"unset it or raise it to {max((needed[p.gpu] for p in blocked), key=_LEVELS.index)}")
