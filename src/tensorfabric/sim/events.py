"""The event engine: PFC steady state, advanced from flow event to flow event instead of step by step.

Without congestion control every sender runs at line rate and only PFC limits it. Where no ingress port
carries flows towards two different egresses (no head-of-line coupling), the backpressure forms one tree per
destination link, and its steady state is known in closed form: an egress queue fed by several ingress ports,
each held near XOFF by pause, serves them equally (PFC's port-level fairness), a port that brings less keeps
what it brings (max-min over ports), and each ingress port's share is in turn split the same way among the
ports upstream of it. Rates are then constant until a flow starts or finishes, so the engine jumps from one
such event to the next. A flow's last byte is delivered its path's propagation delay after its allocation
completes, and its completion is the last ACK's return (as in the stepped engine).

What it leaves out: the few tens of microseconds it takes the queues to fill at the start and to settle after
each event, and the pause oscillation itself -- a backpressured port is reported paused for the fraction of
time it must idle (1 - throughput / capacity), each backpressured ingress port holds XOFF bytes, and one
XOFF and one XON are counted per backpressure episode.

``applies`` is the rule ``SimConfig(engine="auto")`` selects it by; it is a property of the configuration
and the routed traffic only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from tensorfabric.sim.config import SimConfig
from tensorfabric.sim.network import Network
from tensorfabric.sim.pfc import pause_duration_s
from tensorfabric.sim.trace import Trace

__all__ = ["ENGINE", "EventsEngine", "applies", "run_events"]

F64 = npt.NDArray[np.float64]
_REL = 1e-12


def applies(net: Network, cfg: SimConfig) -> str | None:
    """None when the event engine models this run; otherwise why it does not."""
    if cfg.dcqcn != "none":
        return "congestion control is on"
    if cfg.ecn.enabled:
        return "ECN marking is on"
    if not cfg.pfc.enabled or cfg.pfc.threshold != "static" or cfg.pfc.headroom_bytes is not None:
        return "PFC is off, dynamic, or its headroom is not sized to be lossless"
    if cfg.counter_interval_s is not None:
        return "a counter stream was asked for"
    if net.forced_pause.any():
        return "a NIC is stuck"
    egress_of = np.full(net.cap_bytes_s.shape[0], -1, dtype=np.int64)
    egress_of[net.seg_in] = net.seg_edge  # one of each port's egresses; all must be that one
    if not (egress_of[net.seg_in] == net.seg_edge).all():
        return "an ingress port carries flows towards more than one egress (head-of-line coupling)"
    return None


def _share(total: float, demands: list[float]) -> list[float]:
    """Max-min split of ``total`` among ``demands``."""
    n = len(demands)
    if n == 1:
        return [min(total, demands[0])]
    if sum(demands) <= total:
        return demands
    even = total / n
    if min(demands) >= even:  # every port brings more than an even share (the usual case under PFC)
        return [even] * n
    out = [0.0] * n
    left = total
    for i in sorted(range(n), key=demands.__getitem__):
        out[i] = min(demands[i], left / n)
        left -= out[i]
        n -= 1
    return out


class _Tree:
    """The used edges as a forest: each edge's one downstream edge, in the orders supply and shares flow."""

    def __init__(self, net: Network) -> None:
        mask = np.zeros(net.cap_bytes_s.shape[0], dtype=bool)
        mask[net.src_nic_edge] = True
        mask[net.seg_edge] = True
        used = np.flatnonzero(mask)
        self.used = used
        local = {int(e): i for i, e in enumerate(used)}
        m = used.size
        self.children: list[list[int]] = [[] for _ in range(m)]
        self.parent = [-1] * m
        for s_in, s_out in {(int(a), int(b)) for a, b in zip(net.seg_in, net.seg_edge, strict=True)}:
            self.parent[local[s_in]] = local[s_out]
            self.children[local[s_out]].append(local[s_in])
        height = [0] * m
        for path in net.paths:
            for h, e in enumerate(path):
                height[local[e]] = len(path) - 1 - h
        by_height = sorted(range(m), key=height.__getitem__, reverse=True)
        self.switch_up = [i for i in by_height if self.children[i]]  # children before their parent
        self.switch_down = self.switch_up[::-1]
        self.roots = [i for i in range(m) if self.parent[i] < 0]
        flows_of: dict[int, list[int]] = {}
        for f, e in enumerate(net.src_nic_edge.tolist()):
            flows_of.setdefault(local[e], []).append(f)
        self.nics = list(flows_of.items())


def _rates(tree: _Tree, cap: list[float], line: list[float], active: list[bool], rate: list[float],
           supply: list[float], alloc: list[float]) -> None:
    """Fill per-flow ``rate`` and per-edge ``supply`` (what could arrive) and ``alloc`` (what is carried)."""
    children = tree.children
    for i, flows in tree.nics:  # NICs are the leaves: what their active flows would send
        s = 0.0
        for f in flows:
            if active[f]:
                s += line[f]
        supply[i] = min(cap[i], s)
    for i in tree.switch_up:
        s = 0.0
        for c in children[i]:
            s += supply[c]
        supply[i] = min(cap[i], s)
    for i in tree.roots:
        alloc[i] = supply[i]
    for i in tree.switch_down:  # each egress splits what it carries among the ports feeding it
        kids = children[i]
        if len(kids) == 1:
            alloc[kids[0]] = min(alloc[i], supply[kids[0]])
        else:
            for c, a in zip(kids, _share(alloc[i], [supply[c] for c in kids]), strict=True):
                alloc[c] = a
    for i, flows in tree.nics:
        live = [f for f in flows if active[f]]
        for f, a in zip(live, _share(alloc[i], [line[f] for f in live]) if live else (), strict=True):
            rate[f] = a


def run_events(net: Network, cfg: SimConfig, *, advance: Callable[[float], None] | None = None) -> Trace:
    n_f, n_e = net.size.shape[0], net.cap_bytes_s.shape[0]
    tree = _Tree(net)
    m = tree.used.size
    cap_all = net.cap_bytes_s.copy()
    carries = np.zeros(n_e, dtype=bool)
    carries[tree.used] = True
    if net.ack_edge.size and carries[net.ack_edge].any():
        ack_ratio = cfg.ack_bytes * net.payload_fraction / cfg.mtu
    else:
        ack_ratio = 0.0  # ACKs ride only links that carry no data here: they take nothing from it
    cap0 = cap_all[tree.used].tolist()
    line = (net.line_bps / 8 * net.payload_fraction).tolist()
    size = net.size.tolist()
    left = list(size)
    ready = np.where(net.stage <= 1, net.start_s + np.where(net.stage == 1, net.gap_s, 0.0), np.inf).tolist()
    stage = net.stage.tolist()
    stage_left = np.bincount(net.stage, minlength=int(net.stage.max()) + 2).tolist()
    lat = net.path_prop_s.tolist()
    ack_delay = net.ack_delay_s.tolist()
    begin = [float("nan")] * n_f
    finish = [float("nan")] * n_f
    active = [False] * n_f
    done = [False] * n_f
    rate, supply, alloc = [0.0] * n_f, [0.0] * m, [0.0] * m
    # Piecewise-constant history: event times, per-flow rates and per-edge alloc/supply after each event.
    t_hist: list[float] = []
    r_hist: list[list[float]] = []
    a_hist: list[list[float]] = []
    s_hist: list[list[float]] = []
    t, end = 0.0, cfg.duration_s
    n_done = 0
    while t < end and not (cfg.stop_when_idle and n_done == n_f):
        for f in range(n_f):
            if not active[f] and not done[f] and ready[f] <= t * (1 + _REL) + 1e-15:
                active[f], begin[f] = True, t
        cap = cap0
        for _ in range(3 if ack_ratio else 1):
            _rates(tree, cap, line, active, rate, supply, alloc)
            if ack_ratio:
                load = np.bincount(net.ack_edge, np.array(rate)[net.ack_flow] * ack_ratio, n_e)
                cap = np.maximum(cap_all - load, 0.0)[tree.used].tolist()
        nxt = min((r for r in ready if r > t), default=end)
        for f in range(n_f):
            if active[f] and rate[f] > 0.0:
                nxt = min(nxt, t + left[f] / rate[f])
        nxt = min(nxt, end)
        t_hist.append(t)
        r_hist.append([rate[f] if active[f] else 0.0 for f in range(n_f)])
        a_hist.append(list(alloc))
        s_hist.append(list(supply))
        span = nxt - t
        for f in range(n_f):
            if active[f]:
                left[f] -= rate[f] * span
        t = nxt
        if advance is not None:
            advance(span / cfg.step_s)  # progress in the stepped engine's unit: steps of simulated time
        for f in range(n_f):
            if active[f] and left[f] <= size[f] * 1e-9:
                left[f], active[f], done[f] = 0.0, False, True
                n_done += 1
                delivered_at = t + lat[f]
                if delivered_at <= end:  # as the stepped engine: done only if delivered within the run
                    finish[f] = delivered_at + ack_delay[f]
                stage_left[stage[f]] -= 1
                if stage[f] > 0 and stage_left[stage[f]] == 0:
                    for g in range(n_f):
                        if stage[g] == stage[f] + 1:
                            ready[g] = max(float(net.start_s[g]), delivered_at + float(net.gap_s[g]))
    return _trace(net, cfg, tree, t, np.array(t_hist), np.array(r_hist), np.array(a_hist), np.array(s_hist),
                  np.array(begin), np.array(finish))


def _trace(net: Network, cfg: SimConfig, tree: _Tree, t_end: float, t_hist: F64, r_hist: F64, a_hist: F64,
           s_hist: F64, begin: F64, finish: F64) -> Trace:
    n_f, n_e = net.size.shape[0], net.cap_bytes_s.shape[0]
    spans = np.diff(np.append(t_hist, t_end))
    delivered = np.minimum(net.size, (r_hist * spans[:, None]).sum(axis=0))
    delivered[~np.isnan(finish)] = net.size[~np.isnan(finish)]
    # Unfinished flows have their last interval's bytes in flight on the wires (queues are not tracked).
    in_flight = np.minimum(net.size - delivered, r_hist[-1] * net.path_prop_s) if len(r_hist) else 0.0
    sent = delivered + in_flight
    cap = net.cap_bytes_s[tree.used]
    squeezed = a_hist < s_hist * (1 - 1e-9)  # an edge carrying less than could arrive: its far port is in XOFF
    paused_frac = np.where(squeezed, 1.0 - a_hist / cap, 0.0)
    edge_paused = np.zeros(n_e)
    edge_paused[tree.used] = (paused_frac * spans[:, None]).sum(axis=0)
    starts = squeezed & ~np.vstack([np.zeros((1, tree.used.size), dtype=bool), squeezed[:-1]])
    ends = ~squeezed & np.vstack([np.zeros((1, tree.used.size), dtype=bool), squeezed[:-1]])
    on, off = np.zeros(n_e), np.zeros(n_e)
    on[tree.used] = starts.sum(axis=0)
    off[tree.used] = ends.sum(axis=0)
    # Each squeezed ingress port holds about XOFF bytes, queued at the one egress it feeds.
    held_t = np.zeros((tree.used.size, len(t_hist)))  # edge-major, so one index array adds per feeding port
    parent = np.array(tree.parent, dtype=np.int64)
    has_parent = parent >= 0
    np.add.at(held_t, parent[has_parent], squeezed.T[has_parent] * cfg.pfc.xoff_bytes)
    held = held_t.T
    queue_max = np.zeros(n_e)
    queue_max[tree.used] = held.max(axis=0)
    # Series sampled evenly over the run, as the stepped engine records them.
    n_rec = cfg.records
    s_t = np.linspace(t_end / n_rec, t_end, n_rec)
    k = np.clip(np.searchsorted(t_hist, s_t, side="right") - 1, 0, len(t_hist) - 1)
    cum = np.vstack([np.zeros((1, n_f)), np.cumsum(r_hist * spans[:, None], axis=0)])[:-1]
    s_d = np.minimum(net.size, cum[k] + r_hist[k] * (s_t - t_hist[k])[:, None])
    wire_bps = r_hist * 8 / net.payload_fraction
    paused_series = np.zeros((n_rec, n_e), dtype=bool)
    paused_series[:, tree.used] = squeezed[k]
    queue_series = np.zeros((n_rec, n_e), dtype=np.float32)
    queue_series[:, tree.used] = held[k]
    zeros = np.zeros(n_f)
    fin = finish - net.ack_delay_s
    sim_time = max(t_end, float(np.nanmax(fin))) if np.isfinite(fin).any() else t_end
    return Trace(
        steps=len(t_hist), sim_time_s=sim_time, sent=sent, delivered=delivered, dropped=zeros.copy(),
        buffered=sent - delivered, finish_s=finish, begin_s=begin, cnp_sent=zeros.copy(), cnp_handled=zeros.copy(),
        marked_pkts=zeros.copy(), edge_drops=np.zeros(n_e), edge_paused_s=edge_paused, edge_xoff_s=edge_paused.copy(),
        edge_xoff_on=on, edge_xoff_off=off, edge_queue_max=queue_max,
        edge_refresh_s=pause_duration_s(cfg.pfc.pause_quanta, 1.0) / (net.cap_bytes_s * 8 / net.payload_fraction) / 2,
        series_t=s_t, series_queue=queue_series, series_paused=paused_series,
        series_rate=wire_bps[k].astype(np.float32), series_delivered=s_d.astype(np.float32), snapshots=[],
        engine="events",
    )


class EventsEngine:
    """The event engine as the registry holds it (``sim.engine.ENGINES``)."""

    name = "events"

    def applies(self, net: Network, cfg: SimConfig) -> str | None:
        return applies(net, cfg)

    def run(self, net: Network, cfg: SimConfig, *, advance: Callable[[float], None] | None = None) -> Trace:
        return run_events(net, cfg, advance=advance)


ENGINE = EventsEngine()
