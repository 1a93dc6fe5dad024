"""Compile a fabric and its flows into the flat arrays the engine steps over.

A flow's path is a list of directed edges e0 (source NIC -> first switch) ... e_last (-> destination
NIC). The bytes a flow has buffered at a switch, waiting for edge e_h, form one *segment* (flow, h) for
h >= 1; the segment arrived through e_{h-1}, which is the switch ingress port PFC accounts it to. Every
per-step operation is then an array operation over segments, edges or flows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tensorfabric.errors import InputError
from tensorfabric.sim.config import SimConfig
from tensorfabric.sim.pfc import PROPAGATION_S_PER_M, required_headroom_bytes, response_delay_s
from tensorfabric.sim.routing import DirectedEdge, Graph
from tensorfabric.sim.workloads import Flow
from tensorfabric.topology import Fabric

__all__ = ["Network", "compile_network"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Network:
    fabric: Fabric
    edges: tuple[DirectedEdge, ...]
    flows: tuple[Flow, ...]
    paths: tuple[tuple[int, ...], ...]
    cap_bytes_s: F64
    """Per edge, bytes per second."""
    to_switch: B
    """Per edge: its far end is a switch (it has an ingress buffer there)."""
    limit_bytes: F64
    """Per edge into a switch: admission limit (XOFF + headroom); inf elsewhere."""
    headroom_bytes: F64
    pause_steps: I64
    """Per edge: steps between the switch deciding XOFF/XON and the upstream egress obeying it."""
    forced_pause: B
    """Per edge: paused for ever because the receiving NIC is stuck."""
    ingress_switch: I64
    """Per edge: index of the switch at its far end (-1 for edges into hosts)."""
    n_switches: int
    seg_flow: I64
    seg_edge: I64
    seg_in: I64
    seg_switch: I64
    first_seg: I64
    last_seg: I64
    fwd_from: I64
    """Segments with a next hop, and (fwd_to, fwd_steps) where their departures arrive and after how long."""
    fwd_to: I64
    fwd_steps: I64
    inject_steps: I64
    """Per flow: steps for injected bytes to cross e0."""
    src_nic_edge: I64
    dst_nic_edge: I64
    path_prop_s: F64
    size: F64
    start_s: F64
    stage: I64
    gap_s: F64
    line_bps: F64
    """Per flow: rate of its source NIC."""
    delay_depth: int
    payload_fraction: float
    """mtu / (mtu + header): the share of a link's bits that is payload."""
    ack_edge: I64
    """(ack_edge, ack_flow): each edge of each flow's reverse path, which its ACKs load."""
    ack_flow: I64
    ack_delay_s: F64
    """Per flow: flight time of the last ACK back to the sender (0 without ACKs): completion is when the
    sender learns, as an RDMA write completes on its ACK."""


def _steps(seconds: float, step_s: float) -> int:
    return max(1, math.ceil(seconds / step_s - 1e-9))


def compile_network(fabric: Fabric, flows: list[Flow], cfg: SimConfig) -> Network:
    if not flows:
        raise InputError("no flows to simulate")
    graph = Graph(fabric, cfg.failed_links)
    for stuck in cfg.stuck_nics:
        graph.host(stuck)
    edges = tuple(graph.edges)
    n_e = len(edges)
    rates, cables, by_kind = _edge_constants(edges, cfg)
    payload_fraction = cfg.mtu / (cfg.mtu + cfg.header_bytes)
    cap = rates / 8 * payload_fraction
    prop = cables * PROPAGATION_S_PER_M
    switches = sorted({e.dst for e in edges if e.dst not in graph.hosts})
    sw_index = {name: i for i, name in enumerate(switches)}
    ingress_switch = np.array([sw_index.get(e.dst, -1) for e in edges], dtype=np.int64)
    to_switch = ingress_switch >= 0
    if cfg.pfc.headroom_bytes is None:
        headroom = by_kind[:, 0].copy()
    else:
        headroom = np.full(n_e, float(cfg.pfc.headroom_bytes))
    limit = np.where(to_switch, cfg.pfc.xoff_bytes + headroom, np.inf)
    pause_steps = by_kind[:, 1].astype(np.int64)
    forced = np.array([e.dst in cfg.stuck_nics for e in edges]) if cfg.stuck_nics else np.zeros(n_e, dtype=bool)
    data_steps = by_kind[:, 2].astype(np.int64)
    paths = _routes(graph, flows, cfg)
    sf, se, si, first, last_a = _segments(paths)
    is_last = np.zeros(sf.shape[0], dtype=bool)
    is_last[last_a] = True
    fwd_from = np.flatnonzero(~is_last)
    inject = data_steps[np.array([p[0] for p in paths])]
    ack_edge, ack_flow, ack_delay = _acks(graph, edges, paths, prop, cfg)
    return Network(
        fabric=fabric, edges=edges, flows=tuple(flows), paths=tuple(paths), cap_bytes_s=cap, to_switch=to_switch,
        limit_bytes=limit, headroom_bytes=headroom, pause_steps=pause_steps, forced_pause=forced,
        ingress_switch=ingress_switch, n_switches=len(switches),
        seg_flow=sf, seg_edge=se, seg_in=si, seg_switch=ingress_switch[si],
        first_seg=first, last_seg=last_a,
        fwd_from=fwd_from, fwd_to=fwd_from + 1, fwd_steps=data_steps[se[fwd_from]],
        inject_steps=inject,
        src_nic_edge=np.array([p[0] for p in paths], dtype=np.int64),
        dst_nic_edge=np.array([p[-1] for p in paths], dtype=np.int64),
        path_prop_s=np.array([prop[list(p)].sum() for p in paths]),
        size=np.array([f.size_bytes for f in flows], dtype=np.float64),
        start_s=np.array([f.start_s for f in flows], dtype=np.float64),
        stage=np.array([f.stage for f in flows], dtype=np.int64), gap_s=np.array([f.gap_s for f in flows]),
        line_bps=np.array([edges[p[0]].rate_bps for p in paths]),
        delay_depth=int(max(data_steps.max(), inject.max())) + 1,
        payload_fraction=payload_fraction,
        ack_edge=ack_edge, ack_flow=ack_flow, ack_delay_s=ack_delay,
    )


def _edge_constants(edges: tuple[DirectedEdge, ...], cfg: SimConfig) -> tuple[F64, F64, F64]:
    """Per edge: rate, cable length, and (headroom, pause steps, data steps) as columns."""
    # Per-edge constants depend only on (rate, cable length): computed once per kind of cable (speed: a k=8
    # fat tree has 768 edges but two kinds), then spread over the edges.
    kind_id: dict[tuple[float, float], int] = {}
    ids = np.array([kind_id.setdefault((e.rate_bps, e.cable_m), len(kind_id)) for e in edges], dtype=np.int64)
    table = np.zeros((len(kind_id), 5))  # rate, cable, headroom, pause steps, data steps
    for (rate_bps, cable_m), i in kind_id.items():
        cfg.check_rate(rate_bps)
        p = cable_m * PROPAGATION_S_PER_M
        response = response_delay_s(rate_bps) if cfg.pfc.response_s is None else cfg.pfc.response_s
        table[i] = (rate_bps, cable_m,
                    required_headroom_bytes(rate_bps, cable_m, cfg.mtu, cfg.step_s, cfg.pfc.response_s),
                    _steps(p + response, cfg.step_s), _steps(p, cfg.step_s))
    return table[ids, 0], table[ids, 1], table[ids, 2:]


def _routes(graph: Graph, flows: list[Flow], cfg: SimConfig) -> list[tuple[int, ...]]:
    paths: list[tuple[int, ...]] = []
    for i, flow in enumerate(flows):
        route = graph.explicit(i, flow.path) if flow.path else graph.route(i, flow.src, flow.dst, cfg.seed)
        if flow.path and (flow.path[0] != flow.src or flow.path[-1] != flow.dst):
            raise InputError(f"flow {i}: explicit path {list(flow.path)} must run from {flow.src} to {flow.dst}")
        paths.append(tuple(route))
    return paths


def _segments(paths: list[tuple[int, ...]]) -> tuple[I64, I64, I64, I64, I64]:
    """One segment per flow and hop after the first: its flow, its edge, the edge it came in on; each flow's first
    and last segment (a flow's segments are consecutive)."""
    seg_flow: list[int] = []
    seg_edge: list[int] = []
    seg_in: list[int] = []
    first: list[int] = []
    last: list[int] = []
    for f, path in enumerate(paths):
        first.append(len(seg_flow))
        for h in range(1, len(path)):
            seg_flow.append(f)
            seg_edge.append(path[h])
            seg_in.append(path[h - 1])
        last.append(len(seg_flow) - 1)
    sf, se, si, fi, la = (np.array(x, dtype=np.int64) for x in (seg_flow, seg_edge, seg_in, first, last))
    return sf, se, si, fi, la


def _acks(graph: Graph, edges: tuple[DirectedEdge, ...], paths: list[tuple[int, ...]], prop: F64,
          cfg: SimConfig) -> tuple[I64, I64, F64]:
    """The reverse edges each flow's ACKs ride, and each flow's ACK delay."""
    ack_edge: list[int] = []
    ack_flow: list[int] = []
    ack_delay = np.zeros(len(paths))
    if cfg.ack_bytes:
        for f, path in enumerate(paths):
            for hop in path:
                back = graph.by_pair.get((edges[hop].dst, edges[hop].src))
                if back is not None:
                    ack_edge.append(back)
                    ack_flow.append(f)
                    ack_delay[f] += prop[back] + cfg.ack_bytes * 8 / edges[back].rate_bps
    return np.array(ack_edge, dtype=np.int64), np.array(ack_flow, dtype=np.int64), ack_delay
