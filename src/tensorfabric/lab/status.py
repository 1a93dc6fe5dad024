"""What a running lab looks like: hosts, addresses, links, rates and per-link kernel counters.

Counters come straight from netlink in each namespace: the veth end's 64-bit interface statistics (bytes,
packets, drops in each direction) and its root qdisc's statistics (the tbf that shapes the direction leaving
that end: bytes and packets sent, drops, overlimits -- how often a packet had to wait for tokens -- and the
backlog queued right now).

:class:`LabStatus` is ``tensorfabric lab status``'s typed report (``lab up`` prints it too);
:meth:`LabStatus.to_json` is its ``--json`` document and the human renderer in ``cli/lab.py`` reads the same
record. :class:`LabList` is ``lab list``'s.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tensorfabric.jsonable import json_default
from tensorfabric.lab.netlink import Netlink
from tensorfabric.lab.plan import HOST_IFACE, LabPlan
from tensorfabric.topology import Endpoint
from tensorfabric.units import format_rate

if TYPE_CHECKING:
    from tensorfabric.lab.state import StateStore

__all__ = ["LabAddress", "LabEntry", "LabHost", "LabLink", "LabList", "LabRoute", "LabStatus", "LabSwitch", "LinkEnd",
           "Qdisc", "lab_list", "lab_status"]


def _dumps(doc: Any) -> str:
    return json.dumps(doc, indent=2, sort_keys=False, default=json_default) + "\n"


@dataclass(frozen=True)
class LabHost:
    name: str
    rank: int
    netns: str
    interface: str
    address: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rank": self.rank, "netns": self.netns, "interface": self.interface,
                "address": self.address}


@dataclass(frozen=True)
class Qdisc:
    """The root qdisc of one link end: the tbf shaping the direction that leaves it."""

    kind: str | None
    bytes: int
    packets: int
    drops: int
    overlimits: int
    """How often a packet had to wait for tokens."""
    backlog: int
    """Bytes queued right now."""
    qlen: int

    @classmethod
    def from_netlink(cls, q: Mapping[str, Any]) -> Qdisc:
        return cls(kind=q.get("kind"), bytes=int(q["bytes"]), packets=int(q["packets"]), drops=int(q["drops"]),
                   overlimits=int(q["overlimits"]), backlog=int(q["backlog"]), qlen=int(q["qlen"]))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "bytes": self.bytes, "packets": self.packets, "drops": self.drops,
                "overlimits": self.overlimits, "backlog": self.backlog, "qlen": self.qlen}


@dataclass(frozen=True)
class LinkEnd:
    """One veth end and its interface counters (all 0 and ``present`` False when the interface is gone)."""

    endpoint: str
    present: bool
    state: str | None = None
    mtu: int | None = None
    tx_bytes: int = 0
    tx_packets: int = 0
    tx_dropped: int = 0
    rx_bytes: int = 0
    rx_packets: int = 0
    rx_dropped: int = 0
    qdisc: Qdisc | None = None

    def to_dict(self) -> dict[str, Any]:
        if not self.present:
            return {"endpoint": self.endpoint, "present": False}
        return {"endpoint": self.endpoint, "present": True, "state": self.state, "mtu": self.mtu,
                "tx_bytes": self.tx_bytes, "tx_packets": self.tx_packets, "tx_dropped": self.tx_dropped,
                "rx_bytes": self.rx_bytes, "rx_packets": self.rx_packets, "rx_dropped": self.rx_dropped,
                "qdisc": None if self.qdisc is None else self.qdisc.to_dict()}


@dataclass(frozen=True)
class LabLink:
    a: str
    b: str
    rate_bps: float
    ends: tuple[LinkEnd, LinkEnd]
    """The ``a`` end, then the ``b`` end."""

    @property
    def rate(self) -> str:
        return format_rate(self.rate_bps)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "rate_bps": self.rate_bps, "rate": self.rate,
                "ends": [end.to_dict() for end in self.ends]}


@dataclass(frozen=True)
class LabSwitch:
    name: str
    role: str
    netns: str
    bridge_ports: tuple[str, ...]
    forwarding: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "role": self.role, "netns": self.netns, "bridge_ports": list(self.bridge_ports),
                "forwarding": self.forwarding}


@dataclass(frozen=True)
class LabAddress:
    node: str
    interface: str
    cidr: str

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "interface": self.interface, "cidr": self.cidr}


@dataclass(frozen=True)
class LabRoute:
    node: str
    dst: str
    via: tuple[str, ...]
    """Next hops (more than one: ECMP)."""

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "dst": self.dst, "via": list(self.via)}


@dataclass(frozen=True)
class LabStatus:
    """A lab as built (the plan's hosts, switches, addresses and routes), with its links' counters at the
    moment it was read."""

    name: str
    topology: str
    subnet: str
    mtu: int
    rate_bps: float
    hosts: tuple[LabHost, ...]
    switches: tuple[LabSwitch, ...]
    links: tuple[LabLink, ...]
    addresses: tuple[LabAddress, ...]
    routes: tuple[LabRoute, ...]

    def tx_bytes(self) -> list[int]:
        """Bytes sent from each link's ``a`` end, in link order (what a before/after traffic check compares)."""
        return [link.ends[0].tx_bytes for link in self.links]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "topology": self.topology, "subnet": self.subnet, "mtu": self.mtu,
                "rate_bps": self.rate_bps, "hosts": [h.to_dict() for h in self.hosts],
                "switches": [s.to_dict() for s in self.switches], "links": [link.to_dict() for link in self.links],
                "addresses": [a.to_dict() for a in self.addresses], "routes": [r.to_dict() for r in self.routes]}

    def to_json(self) -> str:
        """The ``--json`` document, newline-terminated, keys in the contract's order."""
        return _dumps(self.to_dict())


_IF_COUNTERS = ("tx_bytes", "tx_packets", "tx_dropped", "rx_bytes", "rx_packets", "rx_dropped")


def lab_status(plan: LabPlan, netlink: Netlink) -> LabStatus:
    """The lab ``plan`` describes, with the current counters of its links."""
    spec = plan.spec
    cache: dict[str, dict[str, dict[str, Any]]] = {}

    def interfaces(node: str) -> dict[str, dict[str, Any]]:
        if node not in cache:
            cache[node] = netlink.interfaces(plan.netns(node))
        return cache[node]

    def end(endpoint: Endpoint) -> LinkEnd:
        info = interfaces(endpoint.device).get(endpoint.port)
        if info is None:
            return LinkEnd(endpoint=str(endpoint), present=False)
        stats = info["stats"]
        qdisc = info["qdisc"]
        return LinkEnd(str(endpoint), True, info["state"], info["mtu"],
                       **{key: int(stats.get(key, 0)) for key in _IF_COUNTERS},
                       qdisc=None if qdisc is None else Qdisc.from_netlink(qdisc))

    return LabStatus(
        name=spec.name, topology=spec.topology, subnet=spec.subnet, mtu=spec.mtu, rate_bps=spec.rate_bps,
        hosts=tuple(LabHost(h, r, plan.netns(h), HOST_IFACE, plan.host_address(h)) for r, h in enumerate(plan.hosts)),
        switches=tuple(LabSwitch(n.name, n.role, plan.netns(n.name), tuple(n.bridge_ports), n.forwarding)
                       for n in plan.nodes if n.role != "host"),
        links=tuple(LabLink(str(link.a), str(link.b), link.rate_bps, (end(link.a), end(link.b)))
                    for link in plan.links),
        addresses=tuple(LabAddress(a.node, a.ifname, a.cidr) for a in plan.addresses),
        routes=tuple(LabRoute(r.node, r.dst, tuple(r.via)) for r in plan.routes))


@dataclass(frozen=True)
class LabEntry:
    name: str
    phase: str
    hosts: int
    topology: str
    rate_bps: float
    owner_pid: int | None
    """The process holding the lab (None: nobody; a persistent lab from ``lab up``)."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "phase": self.phase, "hosts": self.hosts, "topology": self.topology,
                "rate_bps": self.rate_bps, "owner_pid": self.owner_pid}


@dataclass(frozen=True)
class LabList:
    """The labs recorded in the state directory."""

    state_dir: str
    labs: tuple[LabEntry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"state_dir": self.state_dir, "labs": [lab.to_dict() for lab in self.labs]}

    def to_json(self) -> str:
        return _dumps(self.to_dict())


def lab_list(store: StateStore) -> LabList:
    """Every lab ``store`` records, in its order."""
    labs = []
    for name in store.names():
        state = store.load(name)
        labs.append(LabEntry(name, state.phase, state.spec.hosts, state.spec.topology, state.spec.rate_bps,
                             None if state.owner is None else state.owner.pid))
    return LabList(state_dir=str(store.directory), labs=tuple(labs))
