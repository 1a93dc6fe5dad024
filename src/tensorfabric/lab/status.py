"""What a running lab looks like: hosts, addresses, links, rates and per-link kernel counters.

Counters come straight from netlink in each namespace: the veth end's 64-bit interface statistics (bytes,
packets, drops in each direction) and its root qdisc's statistics (the tbf that shapes the direction leaving
that end: bytes and packets sent, drops, overlimits -- how often a packet had to wait for tokens -- and the
backlog queued right now).
"""

from __future__ import annotations

from typing import Any

from tensorfabric.lab.netlink import Netlink
from tensorfabric.lab.plan import HOST_IFACE, LabPlan
from tensorfabric.topology import Endpoint
from tensorfabric.units import format_rate

__all__ = ["lab_status"]

_IF_COUNTERS = ("tx_bytes", "tx_packets", "tx_dropped", "rx_bytes", "rx_packets", "rx_dropped")


def lab_status(plan: LabPlan, netlink: Netlink) -> dict[str, Any]:
    """A JSON-ready description of the lab with current counters."""
    spec = plan.spec
    cache: dict[str, dict[str, dict[str, Any]]] = {}

    def interfaces(node: str) -> dict[str, dict[str, Any]]:
        if node not in cache:
            cache[node] = netlink.interfaces(plan.netns(node))
        return cache[node]

    def end(endpoint: Endpoint) -> dict[str, Any]:
        info = interfaces(endpoint.device).get(endpoint.port)
        if info is None:
            return {"endpoint": str(endpoint), "present": False}
        stats = info["stats"]
        return {"endpoint": str(endpoint), "present": True, "state": info["state"], "mtu": info["mtu"],
                **{key: int(stats.get(key, 0)) for key in _IF_COUNTERS}, "qdisc": info["qdisc"]}

    hosts = [{"name": h, "rank": r, "netns": plan.netns(h), "interface": HOST_IFACE, "address": plan.host_address(h)}
             for r, h in enumerate(plan.hosts)]
    links = [{"a": str(link.a), "b": str(link.b), "rate_bps": link.rate_bps, "rate": format_rate(link.rate_bps),
              "ends": [end(link.a), end(link.b)]} for link in plan.links]
    switches = [{"name": n.name, "role": n.role, "netns": plan.netns(n.name), "bridge_ports": list(n.bridge_ports),
                 "forwarding": n.forwarding} for n in plan.nodes if n.role != "host"]
    return {"name": spec.name, "topology": spec.topology, "subnet": spec.subnet, "mtu": spec.mtu,
            "rate_bps": spec.rate_bps, "hosts": hosts, "switches": switches, "links": links,
            "addresses": [{"node": a.node, "interface": a.ifname, "cidr": a.cidr} for a in plan.addresses],
            "routes": [{"node": r.node, "dst": r.dst, "via": list(r.via)} for r in plan.routes]}
