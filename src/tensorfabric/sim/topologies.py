"""Fabric builders for the simulator, producing the shared :mod:`tensorfabric.topology` records.

single switch, two-tier leaf-spine, k-ary three-tier fat tree (k^3/4 hosts) and a ring of switches.
Hosts are ``h<i>`` with one NIC ``eth0`` (RDMA device ``mlx5_0``); switch ports are ``Ethernet<n>``.
"""

from __future__ import annotations

from collections import defaultdict

from tensorfabric.errors import InputError
from tensorfabric.topology import Endpoint, Fabric, Host, Link, Nic, Port, Switch, SwitchRole

__all__ = ["fat_tree", "leaf_spine", "ring", "single_switch"]


class _Builder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.hosts: list[Host] = []
        self.switches: dict[str, tuple[SwitchRole, int]] = {}
        self.ports: dict[str, list[Port]] = defaultdict(list)
        self.links: list[Link] = []
        # Port and NIC records are immutable values, and most are equal (Ethernet0 at 100G on every switch):
        # one shared instance each keeps a k=16 fat tree from building thousands of identical records.
        self._port_records: dict[tuple[str, float], Port] = {}
        self._nics: dict[float, Nic] = {}

    def switch(self, name: str, role: SwitchRole, tier: int) -> str:
        self.switches[name] = (role, tier)
        return name

    def host(self, rate_bps: float) -> str:
        name = f"h{len(self.hosts)}"
        nic = self._nics.get(rate_bps)
        if nic is None:
            nic = self._nics[rate_bps] = Nic("eth0", rate_bps, rdma_device="mlx5_0")
        self.hosts.append(Host(name, (nic,)))
        return name

    def _port(self, switch: str, rate_bps: float) -> str:
        ports = self.ports[switch]
        port = f"Ethernet{len(ports) * 4}"
        record = self._port_records.get((port, rate_bps))
        if record is None:
            record = self._port_records[(port, rate_bps)] = Port(port, rate_bps)
        ports.append(record)
        return port

    def attach(self, host: str, switch: str, rate_bps: float, cable_m: float) -> None:
        self.links.append(Link(Endpoint(host, "eth0"), Endpoint(switch, self._port(switch, rate_bps)), rate_bps,
                               cable_m))

    def connect(self, a: str, b: str, rate_bps: float, cable_m: float) -> None:
        self.links.append(Link(Endpoint(a, self._port(a, rate_bps)), Endpoint(b, self._port(b, rate_bps)),
                               rate_bps, cable_m, "fiber"))

    def build(self) -> Fabric:
        switches = tuple(Switch(n, role, ports=tuple(self.ports[n]), tier=tier)
                         for n, (role, tier) in self.switches.items())
        return Fabric(hosts=tuple(self.hosts), switches=switches, links=tuple(self.links), name=self.name)


def _check(**counts: int) -> None:
    for what, n in counts.items():
        if n < 1:
            raise InputError(f"{what}: {n!r} must be at least 1")


def single_switch(hosts: int, rate_bps: float, *, cable_m: float = 3.0) -> Fabric:
    _check(hosts=hosts)
    b = _Builder(f"single-switch-{hosts}")
    sw = b.switch("sw0", "switch", 0)
    for _ in range(hosts):
        b.attach(b.host(rate_bps), sw, rate_bps, cable_m)
    return b.build()


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int, rate_bps: float, *,
               uplink_bps: float | None = None, cable_m: float = 3.0, uplink_m: float = 30.0) -> Fabric:
    _check(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf)
    b = _Builder(f"leaf-spine-{leaves}x{spines}")
    spine_names = [b.switch(f"spine{s}", "spine", 1) for s in range(spines)]
    for leaf_i in range(leaves):
        leaf = b.switch(f"leaf{leaf_i}", "leaf", 0)
        for _ in range(hosts_per_leaf):
            b.attach(b.host(rate_bps), leaf, rate_bps, cable_m)
        for spine in spine_names:
            b.connect(leaf, spine, uplink_bps or rate_bps, uplink_m)
    return b.build()


def fat_tree(k: int, rate_bps: float, *, cable_m: float = 3.0, fabric_m: float = 30.0) -> Fabric:
    """The k-ary fat tree of Al-Fares et al.: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores."""
    if k < 2 or k % 2:
        raise InputError(f"fat tree k: {k!r} must be an even number >= 2")
    half = k // 2
    b = _Builder(f"fat-tree-k{k}")
    cores = [b.switch(f"core{i}", "core", 2) for i in range(half * half)]
    for pod in range(k):
        aggs = [b.switch(f"agg{pod}_{i}", "spine", 1) for i in range(half)]
        for e in range(half):
            edge = b.switch(f"edge{pod}_{e}", "leaf", 0)
            for _ in range(half):
                b.attach(b.host(rate_bps), edge, rate_bps, cable_m)
            for agg in aggs:
                b.connect(edge, agg, rate_bps, fabric_m)
        for i, agg in enumerate(aggs):
            for j in range(half):
                b.connect(agg, cores[i * half + j], rate_bps, fabric_m)
    return b.build()


def ring(switches: int, hosts_per_switch: int, rate_bps: float, *, cable_m: float = 3.0,
         ring_m: float = 30.0, closed: bool = True) -> Fabric:
    """Switches ``s0..s<n-1>`` in a ring (``closed=False`` leaves out the s<n-1>--s0 link: a line)."""
    if switches < 3:
        raise InputError(f"ring switches: {switches!r} must be at least 3")
    _check(hosts_per_switch=hosts_per_switch)
    b = _Builder(f"ring-{switches}" if closed else f"line-{switches}")
    names = [b.switch(f"s{i}", "switch", 0) for i in range(switches)]
    for sw in names:
        for _ in range(hosts_per_switch):
            b.attach(b.host(rate_bps), sw, rate_bps, cable_m)
    for i in range(switches if closed else switches - 1):
        b.connect(names[i], names[(i + 1) % switches], rate_bps, ring_m)
    return b.build()
