"""What NCCL's own log says: the transport it used and how strongly the log supports it, GPUDirect, the GID the QPs
connected with, and known failure signatures. The job's own variables (``set by environment``) are judged by the
env checks on the log's environment, never this shell's (see ``run_doctor``)."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Mapping

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register
from tensorfabric.host.nccl_log import CAPTURE_HINT, MAX_LINE_CHARS, NcclLogReport

_COVERED = {"socket": {"nccl.no-ib-device"}, "gdr": {"nccl.gdr-disabled"}}
# no square brackets: the findings table is rendered by rich, which would read them as markup
_PROVING_LINES = ("a channel line (`Channel 00/0 : 0 -> 1 ... via NET/<net>/<dev>`) or a QP line "
                  "(`NET/IB: ... qpn|qp_num N ... GID n (..)|LID n`)")
_GRADE = {"selected": "selected (the network NCCL chose, with the device banner)",
          "devices": "only listed by the device banner (no network line)"}


@register("log")
def log(ctx: DoctorContext) -> Iterator[Finding]:
    report = ctx.nccl_log
    if report is None:
        return
    subject = f"log {report.source}"
    covered: set[str] = set()
    evidence = {"transport": report.transport, "evidence": report.evidence, "gpudirect": report.gpudirect,
                "gpudirect_mode": report.gpudirect_mode, "network": report.network,
                "devices": [str(d) for d in report.devices], "scope": report.scope, "proof": report.proof}
    nets = {c.net.lower() for c in report.channels if c.net}
    if "socket" in nets and len(nets) > 1:
        yield Finding("log.mixed-transports", "error", subject,
                      f"channels use both sockets and {', '.join(sorted(nets - {'socket'}))}: some nodes fell back "
                      "to TCP (init can hang when nodes disagree, NVIDIA/nccl#234)", {"networks": sorted(nets)},
                      "run `tensorfabric doctor` on every node; the ones without RDMA are the cause")
    if report.transport == "socket":
        covered |= _COVERED["socket"]
        how = "moved data" if report.evidence == "data-path" else "fell back to (and selected)"
        yield Finding("log.socket-transport", "error", subject,
                      f"NCCL {how} TCP sockets, not RDMA" + (" (NET/IB: No device found)" if report.no_device
                                                             else ""), evidence,
                      "run `tensorfabric doctor` on that host for the cause (device, container, NCCL_IB_DISABLE, "
                      "NCCL_NET); set NCCL_NET=IB to make a fallback fail loudly")
    elif report.transport == "unknown":
        yield _unknown(report, subject, evidence)
    if report.scope == "intra-node" and report.transport != "unknown":
        yield _intra_node(report, subject, evidence)
    elif report.transport not in ("unknown", "socket") and report.evidence in _GRADE:
        yield Finding("log.no-data-path", "warning", subject,
                      f"transport {report.transport} is {_GRADE[report.evidence]} but not proven by a data path: no "
                      f"channel or QP line shows data moving over it; {_PROVING_LINES} would prove it", evidence,
                      f"capture past the first collective (NCCL >= 2.22 connects lazily) with {CAPTURE_HINT}")
    yield from _gdr(report, subject, evidence, covered)
    yield from _gids_in_use(ctx, report, subject)
    yield from _capture_quality(report, subject)
    for hit in report.signatures:
        if hit.id in covered:
            continue
        yield Finding(f"log.{hit.id.removeprefix('nccl.')}", hit.severity, f"{subject}:{hit.line}", hit.meaning,
                      {"line": hit.line, "count": hit.count, "excerpt": hit.excerpt, "reference": hit.reference},
                      hit.fix)


def _gdr(report: NcclLogReport, subject: str, evidence: Mapping[str, object], covered: set[str]) -> Iterator[Finding]:
    if report.transport == "socket":
        return
    if report.gpudirect is False:
        covered |= _COVERED["gdr"]
        some = "some channels run" if report.gpudirect_mode == "partial" else "NCCL used RDMA"
        yield Finding("log.gdr-disabled", "warning", subject,
                      f"{some} without GPUDirect: data is staged through host memory", evidence,
                      "load nvidia-peermem; check NCCL_NET_GDR_LEVEL against the GPU-NIC distance (doctor)")
    elif report.gpudirect_mode == "receive-only":
        yield Finding("log.gdr-receive-only", "info", subject,
                      "GPUDirect RDMA is used for receives only: sends are staged through host memory (NCCL turns "
                      "GPUDirect reads off before Ampere unless the GPUs share NVLink, or NCCL_NET_GDR_READ=0)",
                      evidence, "expected on such GPUs; on Ampere or newer check NCCL_NET_GDR_READ")
    elif report.transport == "plugin" and report.gpudirect is None and report.evidence == "data-path":
        yield Finding("log.gdr-unknown", "info", subject, "the net plugin's channels carry no /GDRDMA suffix and "
                      "no GDR line says more: GPUDirect is unknown, not off", evidence,
                      "check the plugin's own log lines (e.g. NET/OFI) for GPUDirect/dma-buf support")


def _intra_node(report: NcclLogReport, subject: str, evidence: Mapping[str, object]) -> Finding:
    looped = any(c.net for c in report.channels)
    what = ("its NET channels loop back through the NIC inside the host" if looped else
            "every channel is intra-node (P2P/SHM/NVLS)")
    return Finding("log.no-inter-node", "warning", subject,
                   f"no inter-node traffic in this log: all ranks share one host and {what}, so it proves nothing "
                   f"about the network between hosts (transport {report.transport} is what NCCL "
                   f"{'used locally' if looped else 'selected'})", evidence,
                   f"capture a run that spans two hosts, with {CAPTURE_HINT}")


def _unknown(report: NcclLogReport, subject: str, evidence: Mapping[str, object]) -> Finding:
    if report.scope == "intra-node":
        return Finding("log.no-inter-node", "warning", subject,
                       "no inter-node traffic in this log: every channel is intra-node (P2P/SHM/NVLS), so it proves "
                       "nothing about the network", evidence,
                       f"capture a run that spans two hosts, with {CAPTURE_HINT}")
    if report.rdma:
        return Finding("log.link-unknown", "warning", subject,
                       "NCCL chose its IB verbs transport (NET/IB) but the log never names the device's link layer "
                       "(no NET/IB : Using banner or QP line): RDMA, but RoCE or InfiniBand is unknown", evidence,
                       f"capture with {CAPTURE_HINT} from the start of the job")
    why = ("init failed before NCCL chose a network (NCCL_NET names one that is not there), so no transport was used"
           if any(h.id == "nccl.network-not-found" for h in report.signatures) else
           "the log does not show which network NCCL used")
    return Finding("log.transport-unknown", "warning", subject, why, evidence,
                   f"capture it with {CAPTURE_HINT} past the first collective; {_PROVING_LINES}, or the `Using "
                   "network` line with the device banner, says which")


def _gids_in_use(ctx: DoctorContext, report: NcclLogReport, subject: str) -> Iterator[Finding]:
    """The GID the QP lines report: routable (not link-local, not a MAC-derived EUI-64 address) and, on this host,
    a RoCE v2 entry."""
    flagged: set[str] = set()
    for qp in report.qps:
        if qp.gid is None or qp.gid in flagged:
            continue
        addr = ipaddress.IPv6Address(qp.gid)
        packed = addr.packed
        kind = ("link-local" if addr.is_link_local else
                "EUI-64 (MAC-derived)" if addr.ipv4_mapped is None and packed[11:13] == b"\xff\xfe" else None)
        if kind is not None:
            flagged.add(qp.gid)
            yield Finding("log.gid-" + ("link-local" if addr.is_link_local else "eui64"), "error",
                          f"{subject}:{qp.line}", f"NCCL connected with {kind} GID {qp.gid} (index {qp.gid_index}): "
                          "not the routable RoCE v2 IPv4 GID, so routed paths fail or a different subnet is used",
                          {"gid": qp.gid, "gid_index": qp.gid_index},
                          "unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks the RoCE v2 IPv4 GID) or pin the index "
                          "`tensorfabric doctor --gids` recommends")
    if report.gid_index is None:
        return
    index = report.gid_index
    for port in ctx.gid_ports:
        gid = next((g for g in port.gids if g.index == index), None)
        if gid is None or gid.version != 2 or gid.is_link_local:
            yield Finding("log.gid-not-rocev2", "error", subject,
                          f"NCCL used GID index {index}, which on {port.name} is "
                          f"{gid.describe() if gid else 'empty'}, not a routable RoCE v2 GID",
                          {"gid_index": index, "port": port.name, "gids": [g.describe() for g in port.gids]},
                          "unset NCCL_IB_GID_INDEX (NCCL >= 2.21 auto-selects) or pin the RoCE v2 IPv4 index")


def _capture_quality(report: NcclLogReport, subject: str) -> Iterator[Finding]:
    if report.long_lines:
        yield Finding("log.line-too-long", "warning", subject,
                      f"{len(report.long_lines)} line(s) longer than {MAX_LINE_CHARS} characters were not "
                      "interpreted (no NCCL message is that long; a corrupted or concatenated log?)",
                      {"lines": list(report.long_lines[:20]), "max_line_chars": MAX_LINE_CHARS},
                      "split the log at its real line ends, or recapture it")
    if not report.env_logged:
        yield Finding("log.env-not-logged", "info", subject,
                      "the log has no 'X set by environment to Y' lines (ENV subsystem off): the job's NCCL variables "
                      "are unknown, so they were not checked (this shell's are not used for someone else's log)",
                      {}, f"capture with {CAPTURE_HINT}")
