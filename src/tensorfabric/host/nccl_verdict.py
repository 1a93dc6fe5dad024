"""What the facts of an NCCL log add up to: the transport, how strongly the log supports it, the scope and GPUDirect.

Evidence is graded, never withheld (the strongest grade present decides):

* ``data-path``: a channel ``via NET/<net>/<dev>`` or a QP line: data was set up to move over that network. An
  internal ``NET/IB/<idx>`` channel takes its link layer from the banner's device ``idx``, else from a merged
  (virtual) device's members, else from the QP lines, else from the banner when all its devices share one link
  layer (since 2.21 merged NICs get indices beyond the banner's list). Any ``NET/Socket`` channel is ``socket``.
* ``selected``: the network NCCL chose (``Using network IB|IBext_v8|AWS Libfabric``, ``Using internal Network``,
  ``Initialized|Assigned NET plugin``) with the banner's link layer; or the socket banner with no IB banner, which
  NCCL prints only when it falls back to sockets (``No device found`` / no libibverbs / no plugin, every era).
* ``devices``: an IB banner alone, or 2.27's per-device lines.

Scope is intra-node when all ranks share one host (``nNodes 1``, or one host printing every rank of a comm),
whatever the channels say: NET channels inside one host loop back through the NIC and prove nothing about the
fabric. GPUDirect: internal IB and IB-family plugin (``IBext*``) channels print ``/GDRDMA`` when it is used, so
its absence means off; receives with it and sends without (GPUDirect reads are off before Ampere without NVLink)
is ``receive-only``; other plugins without the suffix are unknown unless a GDR line says more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tensorfabric.host.nccl_lines import ChannelPath, CommInfo, DeviceInfo, GdrLine, LogDevice, QpInfo

__all__ = ["Evidence", "Facts", "GdrMode", "Scope", "Transport", "Verdict", "judge"]

Transport = Literal["roce", "ib", "socket", "plugin", "unknown"]
Scope = Literal["inter-node", "intra-node", "unknown"]
Evidence = Literal["data-path", "selected", "devices", "none"]
GdrMode = Literal["on", "receive-only", "partial", "off", "unknown"]
_GDR_BOOL: Mapping[GdrMode, bool | None] = {"on": True, "receive-only": True, "partial": False, "off": False,
                                            "unknown": None}


@dataclass
class Facts:
    """What the reader collected, line by line (mutable while reading; :func:`judge` turns it into a record)."""

    devices: dict[str, list[LogDevice]] = field(default_factory=dict)
    banner_lines: dict[str, int] = field(default_factory=dict)
    device_info: dict[str, DeviceInfo] = field(default_factory=dict)
    device_info_line: int = 0
    vdevices: dict[int, tuple[str, ...]] = field(default_factory=dict)
    channels: list[ChannelPath] = field(default_factory=list)
    qps: list[QpInfo] = field(default_factory=list)
    networks: list[tuple[str, int, bool]] = field(default_factory=list)
    """``(name, line, from a "Using network" line)`` in order."""
    plugin: str | None = None
    ib_failed: bool = False
    no_device: bool = False
    network_missing: str | None = None
    gdr: list[GdrLine] = field(default_factory=list)
    comms: list[tuple[str, CommInfo]] = field(default_factory=list)
    hosts: dict[str, None] = field(default_factory=dict)
    interfaces: dict[str, None] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict)
    product: str = "NCCL"
    version: str | None = None

    @property
    def network(self) -> str | None:
        """The chosen network: the last ``Using network`` line, else the last ``Initialized|Assigned NET plugin``."""
        using = [name for name, _, from_using in self.networks if from_using]
        if using:
            return using[-1]
        return self.networks[-1][0] if self.networks else None

    def line_of(self, network: str) -> int:
        return next((line for n, line, _ in reversed(self.networks) if n.lower() == network.lower()), 0)


@dataclass(frozen=True, slots=True)
class Verdict:
    transport: Transport
    evidence: Evidence
    proof: str | None
    devices: tuple[LogDevice, ...]
    scope: Scope
    gpudirect: bool | None
    gdr_mode: GdrMode
    notes: tuple[str, ...]
    plugin_link: str | None
    rdma_selected: bool
    """The chosen network is NCCL's IB verbs transport (RoCE or InfiniBand), whatever the link layer."""


def judge(facts: Facts) -> Verdict:
    transport, evidence, proof, plugin_link = _transport(facts)
    if transport == "socket":
        devices = tuple(facts.devices.get("Socket", ()))
    elif transport in ("roce", "ib", "plugin"):
        devices = tuple(d for net, devs in facts.devices.items() if net.lower() != "socket" for d in devs)
    else:
        devices = tuple(d for devs in facts.devices.values() for d in devs)
    scope = _scope(facts)
    mode, notes = _gpudirect(facts, transport)
    network = (facts.network or "").lower() if facts.network_missing is None else ""
    ib_channels = any(c.net is not None and c.net.upper() == "IB" for c in facts.channels)
    return Verdict(transport, evidence, proof, devices, scope, _GDR_BOOL[mode], mode, tuple(notes), plugin_link,
                   network == "ib" or ib_channels)


def _cite(path: ChannelPath) -> str:
    return f"line {path.line}: channel {path.channel:02d} {path.src} -> {path.dst} via {path.via}"


def _uniform_link(facts: Facts) -> str | None:
    """The link layer every listed device shares (banner first, else 2.27's per-device lines)."""
    links = {d.link for d in facts.devices.get("IB", ())} or {d.link for d in facts.device_info.values()}
    return links.pop() if len(links) == 1 else None


def _link_by_name(facts: Facts, name: str) -> str | None:
    banner = next((d for d in facts.devices.get("IB", ()) if d.name == name), None)
    if banner is not None:
        return banner.link
    info = facts.device_info.get(name)
    return info.link if info is not None else None


def link_of(facts: Facts, path: ChannelPath) -> str | None:
    """RoCE/IB for an internal ``NET/IB/<idx>`` channel (see the module docstring for the order of sources)."""
    banner = next((d for d in facts.devices.get("IB", ()) if d.index == path.net_device), None)
    if banner is not None:
        return banner.link
    members = facts.vdevices.get(path.net_device) if path.net_device is not None else None
    if members:
        links = {_link_by_name(facts, m) for m in members}
        if len(links) == 1 and None not in links:
            return links.pop()
    qp_links = {q.link for q in facts.qps if q.net_device in (None, path.net_device)}
    if len(qp_links) == 1:
        return qp_links.pop()
    return _uniform_link(facts)


def _transport(facts: Facts) -> tuple[Transport, Evidence, str | None, str | None]:
    net_paths = [c for c in facts.channels if c.net is not None]
    sockets = [c for c in net_paths if c.net is not None and c.net.lower() == "socket"]
    ib = [c for c in net_paths if c.net is not None and c.net.upper() == "IB"]
    plugin = [c for c in net_paths if c.net is not None and c.net.lower() not in ("ib", "socket")]
    if sockets:
        return "socket", "data-path", _cite(sockets[0]), None
    if ib:
        links = {link_of(facts, c) for c in ib}
        if None in links:
            return "unknown", "data-path", None, None
        return ("roce" if "RoCE" in links else "ib"), "data-path", _cite(ib[0]), None
    if plugin:
        return "plugin", "data-path", _cite(plugin[0]), _plugin_link(facts, plugin)
    if facts.qps:
        links = {q.link for q in facts.qps}
        qp = facts.qps[0]
        return ("roce" if "RoCE" in links else "ib"), "data-path", f"line {qp.line}: QP connected over {qp.link}", None
    if facts.network_missing is not None:
        return "unknown", "none", None, None  # init failed: what was listed before it was never used
    return _selected(facts)


def _plugin_link(facts: Facts, paths: list[ChannelPath]) -> str | None:
    links = {link_of(facts, c) for c in paths} if facts.devices.get("IB") or facts.device_info else {None}
    return links.pop() if len(links) == 1 else None


def _banner_cite(facts: Facts, net: str) -> str:
    devs = facts.devices.get(net, [])
    line = facts.banner_lines.get(net, facts.device_info_line)
    names = ", ".join(str(d) for d in devs) or ", ".join(f"{i.name}:{i.port}/{i.link}"
                                                          for i in facts.device_info.values())
    return f"line {line}: devices {names}"


def _selected(facts: Facts) -> tuple[Transport, Evidence, str | None, str | None]:
    network = facts.network
    if any(name.lower() == "socket" for name, _, using in facts.networks if using):
        network = "Socket"  # nodes disagree (a multi-host paste): the ones on sockets set the pace, as in channels
    if network is not None:
        cite = f"line {facts.line_of(network)}: network {network}"
        kind = network.lower()
        if kind == "socket":
            return "socket", "selected", cite, None
        link = _uniform_link(facts)
        if kind == "ib":
            if link is None:
                return "unknown", "selected", None, None
            return ("roce" if link == "RoCE" else "ib"), "selected", f"{cite}; {_banner_cite(facts, 'IB')}", None
        return "plugin", "selected", cite, link
    ib_listed = bool(facts.devices.get("IB") or facts.device_info)
    if facts.devices.get("Socket") and not ib_listed:
        # NCCL initialises its socket transport only when it falls back to it (no IB device, no libibverbs, no
        # plugin, NCCL_IB_DISABLE), so the socket banner alone is the choice, in every era
        return "socket", "selected", _banner_cite(facts, "Socket") + " (the socket fallback)", None
    link = _uniform_link(facts) if ib_listed and not facts.ib_failed else None
    if link is not None:
        return ("roce" if link == "RoCE" else "ib"), "devices", _banner_cite(facts, "IB"), None
    return "unknown", "none", None, None


def _scope(facts: Facts) -> Scope:
    nodes = [c.nnodes for _, c in facts.comms if c.nnodes is not None]
    if nodes:
        return "inter-node" if max(nodes) > 1 else "intra-node"
    hosts = [h for h in facts.hosts if h]
    if len(hosts) > 1:
        return "inter-node"
    if len(hosts) == 1 and _one_host_has_every_rank(facts, hosts[0]):
        return "intra-node"
    if any(c.net is not None for c in facts.channels) or facts.qps:
        return "inter-node"
    return "intra-node" if facts.channels else "unknown"


def _one_host_has_every_rank(facts: Facts, host: str) -> bool:
    """Whether the one host in the log printed every rank of some communicator (then all ranks share it)."""
    ranks: dict[int, set[int]] = {}
    for origin, comm in facts.comms:
        if origin in ("", host):
            ranks.setdefault(comm.nranks, set()).add(comm.rank)
    return any(seen >= set(range(n)) for n, seen in ranks.items())


def _ib_family(net: str) -> bool:
    # NCCL core prints /GDRDMA for every net; the IB-verbs plugins (IBext, IBext_v8, ...) are known to use it
    return net.upper() == "IB" or net.lower().startswith("ibext")


def _mode_of(paths: list[ChannelPath]) -> GdrMode:
    if all(c.gdr for c in paths):
        return "on"
    if not any(c.gdr for c in paths):
        return "off"
    recv = [c for c in paths if c.direction == "receive"]
    send = [c for c in paths if c.direction == "send"]
    if recv and send and all(c.gdr for c in recv) and not any(c.gdr for c in send):
        return "receive-only"
    return "partial"


def _gpudirect(facts: Facts, transport: Transport) -> tuple[GdrMode, list[str]]:
    notes = [g.note for g in facts.gdr if g.kind == "gpu" and not g.enabled and g.note]
    net_paths = [c for c in facts.channels if c.net is not None]
    if transport == "socket":
        return "off", notes
    if not net_paths and facts.channels:
        return "unknown", ["intra-node channels only: GPUDirect RDMA is not exercised"]
    verbs = [c for c in net_paths if c.net is not None and _ib_family(c.net)]
    if verbs:
        mode = _mode_of(verbs)
        if mode == "receive-only":
            notes.append("GPUDirect RDMA on receives only: sends are staged through host memory")
        return mode, notes
    if net_paths and all(c.gdr for c in net_paths):
        return "on", notes
    said = _from_gdr_lines(facts.gdr)
    if said is None and net_paths:
        notes.append("plugin channels carry no /GDRDMA suffix and no GDR line says more: GPUDirect unknown")
    return said or "unknown", notes


def _from_gdr_lines(lines: list[GdrLine]) -> GdrMode | None:
    for kind in ("summary", "hca", "gpu"):
        found = [g for g in lines if g.kind == kind]
        if not found:
            continue
        if all(g.enabled for g in found):
            reads = {g.read for g in found}
            # since 2.12 a send-side check (read 1) prints only when it enables GPUDirect reads
            return "receive-only" if kind == "gpu" and reads == {0} else "on"
        return "off" if not any(g.enabled for g in found) else "partial"
    return None
