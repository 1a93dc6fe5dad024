"""Directed links and ECMP shortest-path routing over a :class:`~tensorfabric.topology.Fabric`.

Every full-duplex link becomes two directed edges. Hosts never forward. A flow's path is chosen hop by
hop among the equal-cost next hops by a hash of (flow id, node, seed), as switch ECMP does; failed links
are removed first, so a failure can force a longer, non up-down path. An explicit device list may
override the route (used to build a cyclic buffer dependency on purpose).
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tensorfabric.errors import InputError, SimulationError
from tensorfabric.topology import Fabric, Host

__all__ = ["DirectedEdge", "Graph"]


@dataclass(frozen=True, slots=True)
class DirectedEdge:
    """Traffic from ``src`` (out of ``src_port``) to ``dst`` (into ``dst_port``)."""

    src: str
    src_port: str
    dst: str
    dst_port: str
    rate_bps: float
    cable_m: float


def _ecmp_hash(flow_id: int, node: str, seed: int) -> int:
    """A flow's hash at one switch, salted per switch and seed.

    A cryptographic digest, not CRC32: CRC is affine over GF(2), so keys that differ only in the seed or
    the switch name would shift every flow's choice by the same XOR -- every seed would give the same
    collision pattern relabelled, and a flow's choices at successive switches would be correlated.
    """
    digest = hashlib.blake2b(f"{flow_id}:{node}:{seed}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


class Graph:
    def __init__(self, fabric: Fabric, failed: Iterable[tuple[str, str]] = ()) -> None:
        down = {frozenset(pair) for pair in failed}
        for pair in down:
            if len(pair) != 2 or not all(d in set(fabric.device_names) for d in pair):
                raise InputError(f"failed link {sorted(pair)!r} must name two devices of the fabric")
        self.fabric = fabric
        self.hosts = {h.name for h in fabric.hosts}
        self.edges: list[DirectedEdge] = []
        self.out: dict[str, list[int]] = {name: [] for name in fabric.device_names}
        self.inn: dict[str, list[int]] = {name: [] for name in fabric.device_names}
        self.by_pair: dict[tuple[str, str], int] = {}
        edges, out, inn, by_pair = self.edges, self.out, self.inn, self.by_pair
        for link in fabric.links:  # both directions per link, in that order; written out because it runs per edge
            a, b = link.a, link.b
            ad, bd = a.device, b.device
            if down and frozenset((ad, bd)) in down:
                continue
            idx = len(edges)
            edges.append(DirectedEdge(ad, a.port, bd, b.port, link.speed_bps, link.cable_length_m))
            edges.append(DirectedEdge(bd, b.port, ad, a.port, link.speed_bps, link.cable_length_m))
            out[ad].append(idx)
            inn[bd].append(idx)
            out[bd].append(idx + 1)
            inn[ad].append(idx + 1)
            by_pair.setdefault((ad, bd), idx)
            by_pair.setdefault((bd, ad), idx + 1)
        self._dist_cache: dict[tuple[str, ...], dict[str, int]] = {}
        self._pred = {node: [edges[e].src for e in into] for node, into in inn.items()}  # BFS reads names only

    def host(self, name: str) -> Host:
        device = self.fabric.device(name)
        if not isinstance(device, Host):
            raise InputError(f"{name!r} is a switch; flows start and end at hosts")
        return device

    def _distances(self, dst: str) -> dict[str, int]:
        # Hosts attached to the same switches share one BFS: distance from the attachment set, plus one.
        attach = tuple(sorted(self.edges[e].src for e in self.inn[dst]))
        dist = self._dist_cache.get(attach)
        if dist is None:
            dist = {name: 1 for name in attach}
            queue = deque(attach)
            pred, hosts = self._pred, self.hosts
            while queue:
                node = queue.popleft()
                further = dist[node] + 1
                for prev in pred[node]:
                    if prev not in dist:
                        dist[prev] = further
                        if prev not in hosts:
                            queue.append(prev)
            self._dist_cache[attach] = dist
        return dist

    def route(self, flow_id: int, src: str, dst: str, seed: int = 0) -> list[int]:
        """Edge indices from ``src`` to ``dst`` along one ECMP-hashed shortest path."""
        self.host(src)
        self.host(dst)
        if src == dst:
            raise InputError(f"flow {flow_id}: source and destination are both {src!r}")
        dist = self._distances(dst)
        if src not in dist:
            raise SimulationError(f"flow {flow_id}: no path from {src} to {dst} (failed links?)")
        path: list[int] = []
        node = src
        edges, hosts = self.edges, self.hosts
        while node != dst:
            here = dist[node]
            options = [e for e in self.out[node]
                       if ((nxt := edges[e].dst) == dst and here == 1)
                       or (nxt not in hosts and dist.get(nxt) == here - 1)]
            edge = options[_ecmp_hash(flow_id, node, seed) % len(options)]
            path.append(edge)
            node = self.edges[edge].dst
        return path

    def explicit(self, flow_id: int, devices: Sequence[str]) -> list[int]:
        """Edge indices along an explicit device list (which must start and end at hosts)."""
        if len(devices) < 3:
            raise InputError(f"flow {flow_id}: an explicit path needs host, switch(es), host; got {list(devices)}")
        self.host(devices[0])
        self.host(devices[-1])
        path: list[int] = []
        for a, b in zip(devices, devices[1:], strict=False):
            if (a, b) not in self.by_pair:
                raise InputError(f"flow {flow_id}: no link {a}->{b} on the explicit path {list(devices)}")
            path.append(self.by_pair[(a, b)])
        return path
