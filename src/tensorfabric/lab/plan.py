"""The address and wiring plan of a lab, computed from its spec without touching the kernel.

Star::

    h0 eth0 ──veth── sw0 [br0 port h0]      one bridge, one /24: hosts .1, .2, ...

Leaf--spine (loop-free by construction)::

    h0 eth0 ──veth── leaf0 [br0 port h0]    br0 carries the leaf's gateway .254 of its /24
                     leaf0 spine0 ──veth── spine0 leaf0   routed /31 point-to-point link
                     leaf0 spine1 ──veth── spine1 leaf0

Every leaf is linked to every spine, but only the host ports are bridged; the leaf--spine links are routed
(leaf and spine namespaces forward IPv4, each leaf has one ECMP route to the lab subnet over all its
spines, hashed on the 5-tuple, each spine a route per leaf /24). A Linux bridge at the spines would close a
loop through every pair of spines (leaf0-spine0-leaf1-spine1-leaf0) and flood it forever with STP off; STP
on would block all but one spine and take ~30 s to converge. Routing keeps all spines in use, needs no STP.

Names: namespaces ``tf-<lab>-<node>``; inside them a host's interface is always ``eth0``, a switch port is
named after the node at its other end (``h3``, ``spine0``, ``leaf1``) and the bridge is ``br0``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Literal

from tensorfabric.lab.spec import LabSpec
from tensorfabric.topology import Endpoint

__all__ = ["HOST_IFACE", "NS_PREFIX", "Address", "LabPlan", "Node", "PlannedLink", "Route", "plan_lab"]

NS_PREFIX = "tf-"
HOST_IFACE = "eth0"
BRIDGE = "br0"
Role = Literal["host", "switch", "leaf", "spine"]


@dataclass(frozen=True, slots=True)
class Node:
    """One namespace of the lab."""

    name: str
    role: Role
    bridge_ports: tuple[str, ...] = ()
    """Interfaces enslaved to ``br0``; empty means the node has no bridge."""
    forwarding: bool = False
    """Whether the namespace routes IPv4 (leaves and spines)."""


@dataclass(frozen=True, slots=True)
class PlannedLink:
    """A veth pair; ``a`` is the end nearer the hosts. Both directions are shaped to ``rate_bps``."""

    a: Endpoint
    b: Endpoint
    rate_bps: float


@dataclass(frozen=True, slots=True)
class Address:
    node: str
    ifname: str
    cidr: str


@dataclass(frozen=True, slots=True)
class Route:
    node: str
    dst: str
    via: tuple[str, ...]
    """Gateways; more than one makes an ECMP route."""


@dataclass(frozen=True, slots=True)
class LabPlan:
    spec: LabSpec
    nodes: tuple[Node, ...]
    links: tuple[PlannedLink, ...]
    addresses: tuple[Address, ...]
    routes: tuple[Route, ...]

    @property
    def hosts(self) -> tuple[str, ...]:
        """Host node names in rank order."""
        return tuple(n.name for n in self.nodes if n.role == "host")

    def netns(self, node: str) -> str:
        return f"{NS_PREFIX}{self.spec.name}-{node}"

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self.netns(n.name) for n in self.nodes)

    def host_address(self, host: str) -> str:
        """The host's IPv4 address (without prefix length)."""
        for addr in self.addresses:
            if addr.node == host and addr.ifname == HOST_IFACE:
                return addr.cidr.split("/")[0]
        raise KeyError(host)

    def leaf_of(self, host: str) -> str:
        for link in self.links:
            if link.a.device == host:
                return link.b.device
        raise KeyError(host)


def ns_prefix(lab_name: str) -> str:
    return f"{NS_PREFIX}{lab_name}-"


def _host_block(net: ipaddress.IPv4Network, block: int) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network((int(net.network_address) + 256 * block, 24))


def plan_lab(spec: LabSpec) -> LabPlan:
    """Lay out namespaces, links, addresses and routes for ``spec`` (deterministic)."""
    net = spec.network()
    hosts = [f"h{i}" for i in range(spec.hosts)]
    if spec.topology == "star":
        block = _host_block(net, 0)
        nodes = [Node(h, "host") for h in hosts] + [Node("sw0", "switch", bridge_ports=tuple(hosts))]
        links = [PlannedLink(Endpoint(h, HOST_IFACE), Endpoint("sw0", h), spec.rate_bps) for h in hosts]
        addresses = [Address(h, HOST_IFACE, f"{block.network_address + i + 1}/24") for i, h in enumerate(hosts)]
        return LabPlan(spec, tuple(nodes), tuple(links), tuple(addresses), ())
    return _plan_leafspine(spec, net, hosts)


def _plan_leafspine(spec: LabSpec, net: ipaddress.IPv4Network, hosts: list[str]) -> LabPlan:
    per_leaf = -(-spec.hosts // spec.leaves)
    leaves = [f"leaf{k}" for k in range(spec.leaves)]
    spines = [f"spine{j}" for j in range(spec.spines)]
    members: dict[str, list[str]] = {leaf: [] for leaf in leaves}
    for i, host in enumerate(hosts):
        members[leaves[i // per_leaf]].append(host)
    nodes = [Node(h, "host") for h in hosts]
    nodes += [Node(leaf, "leaf", bridge_ports=tuple(members[leaf]), forwarding=True) for leaf in leaves]
    nodes += [Node(spine, "spine", forwarding=True) for spine in spines]
    links: list[PlannedLink] = []
    addresses: list[Address] = []
    routes: list[Route] = []
    p2p_base = int(net.network_address) + 256 * spec.leaves
    for k, leaf in enumerate(leaves):
        block = _host_block(net, k)
        gateway = str(block.network_address + 254)
        addresses.append(Address(leaf, BRIDGE, f"{gateway}/24"))
        for i, host in enumerate(members[leaf]):
            links.append(PlannedLink(Endpoint(host, HOST_IFACE), Endpoint(leaf, host), spec.rate_bps))
            addresses.append(Address(host, HOST_IFACE, f"{block.network_address + i + 1}/24"))
            routes.append(Route(host, str(net), (gateway,)))
        spine_sides: list[str] = []
        for j, spine in enumerate(spines):
            leaf_ip = ipaddress.IPv4Address(p2p_base + 2 * (k * spec.spines + j))
            spine_ip = leaf_ip + 1
            links.append(PlannedLink(Endpoint(leaf, spine), Endpoint(spine, leaf), spec.uplink_bps))
            addresses.append(Address(leaf, spine, f"{leaf_ip}/31"))
            addresses.append(Address(spine, leaf, f"{spine_ip}/31"))
            routes.append(Route(spine, str(block), (str(leaf_ip),)))
            spine_sides.append(str(spine_ip))
        routes.append(Route(leaf, str(net), tuple(spine_sides)))
    return LabPlan(spec, tuple(nodes), tuple(links), tuple(addresses), tuple(routes))
