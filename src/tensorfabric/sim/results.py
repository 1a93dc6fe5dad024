"""Turn an engine trace into results: per-flow completion and rates, pause and queue summaries, JSON.

``SimResult.to_dict()`` has exactly the keys of the CLI contract: scenario, params, sim_time_s, wall_s,
flows (id, bytes, fct_s, mean_rate_bps), drops, pause, queues. Scenario verdicts (fixed point, deadlock,
storm, per-token latency) go inside ``pause`` or ``queues``, where they belong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from tensorfabric.sim.network import Network
from tensorfabric.sim.trace import Trace

__all__ = ["FlowResult", "SimResult", "port_name", "summarize"]

_TOP_PORTS = 12


@dataclass(frozen=True, slots=True)
class FlowResult:
    id: int
    src: str
    dst: str
    bytes: float
    start_s: float | None
    fct_s: float | None
    """Completion time from its start; None while unfinished."""
    delivered_bytes: float
    dropped_bytes: float
    mean_rate_bps: float
    """Delivered bits over the time it was active (to completion or to the end of the run)."""
    tag: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "bytes": self.bytes, "fct_s": self.fct_s, "mean_rate_bps": self.mean_rate_bps}


@dataclass(frozen=True)
class SimResult:
    scenario: str
    params: Mapping[str, Any]
    sim_time_s: float
    wall_s: float
    flows: tuple[FlowResult, ...]
    drops_bytes: float
    pause: Mapping[str, Any]
    queues: Mapping[str, Any]
    trace: Trace = field(repr=False)
    network: Network = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "params": dict(self.params),
            "sim_time_s": self.sim_time_s,
            "wall_s": self.wall_s,
            "flows": [f.to_dict() for f in self.flows],
            "drops": self.drops_bytes,
            "pause": dict(self.pause),
            "queues": dict(self.queues),
        }

    def with_outcome(self, *, pause: Mapping[str, Any] | None = None,
                     queues: Mapping[str, Any] | None = None) -> SimResult:
        return SimResult(self.scenario, self.params, self.sim_time_s, self.wall_s, self.flows, self.drops_bytes,
                         {**self.pause, **(pause or {})}, {**self.queues, **(queues or {})}, self.trace, self.network)

    def edge(self, src: str, dst: str) -> int:
        """Index of the directed edge src -> dst (for reading per-edge arrays of the trace)."""
        for i, e in enumerate(self.network.edges):
            if e.src == src and e.dst == dst:
                return i
        raise KeyError(f"no edge {src}->{dst}")

    def tail_delivered_bytes(self, fraction: float = 0.2) -> npt.NDArray[np.float64]:
        """Bytes each flow delivered in the last ``fraction`` of the recorded run."""
        d = self.trace.series_delivered
        k = min(len(d) - 1, int(len(d) * (1 - fraction)))
        return np.asarray(d[-1] - d[k], dtype=np.float64)


def port_name(net: Network, edge: int) -> str:
    """The egress port an edge leaves from, ``device:port``."""
    e = net.edges[edge]
    return f"{e.src}:{e.src_port}"


def _clean(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def summarize(scenario: str, params: Mapping[str, Any], net: Network, trace: Trace, wall_s: float) -> SimResult:
    flows = []
    end = trace.sim_time_s
    for i, flow in enumerate(net.flows):
        begin = _clean(trace.begin_s[i])
        fin = _clean(trace.finish_s[i])
        fct = None if fin is None or begin is None else fin - begin
        if fct is not None:
            active = fct
        else:
            active = end - begin if begin is not None else 0.0
        active = active if active > 0 else math.inf
        flows.append(FlowResult(i, flow.src, flow.dst, flow.size_bytes, begin, fct, float(trace.delivered[i]),
                                float(trace.dropped[i]), float(trace.delivered[i]) * 8 / active, flow.tag))
    frames = trace.edge_xoff_on + trace.edge_xoff_off + np.floor(trace.edge_xoff_s / trace.edge_refresh_s)
    paused_order = np.argsort(-trace.edge_paused_s)
    pause_ports = {
        port_name(net, int(e)): {"paused_s": float(trace.edge_paused_s[e]),
                                 "paused_fraction": float(trace.edge_paused_s[e] / end),
                                 "frames": float(frames[e])}
        for e in paused_order[:_TOP_PORTS] if trace.edge_paused_s[e] > 0
    }
    pause = {
        "frames_total": float(frames.sum()),
        "paused_ports": int(np.count_nonzero(trace.edge_paused_s > 0)),
        "ports": pause_ports,
    }
    q = trace.series_queue
    mean_q = q.mean(axis=0) if len(q) else np.zeros(len(net.edges))
    final_q = q[-1] if len(q) else np.zeros(len(net.edges))
    order = np.argsort(-trace.edge_queue_max)
    queues = {
        "max_bytes": float(trace.edge_queue_max.max(initial=0.0)),
        "ports": {port_name(net, int(e)): {"max_bytes": float(trace.edge_queue_max[e]),
                                           "mean_bytes": float(mean_q[e]), "final_bytes": float(final_q[e])}
                  for e in order[:_TOP_PORTS] if trace.edge_queue_max[e] > 0},
        "drop_ports": {f"{net.edges[int(e)].dst}:{net.edges[int(e)].dst_port}": float(trace.edge_drops[e])
                       for e in np.flatnonzero(trace.edge_drops > 0)},
    }
    return SimResult(scenario, dict(params), trace.sim_time_s, wall_s, tuple(flows), float(trace.dropped.sum()),
                     pause, queues, trace, net)
