"""Named scenarios: each builds a fabric, flows and a config from overrides, runs, and judges the outcome.

Registry ``SCENARIOS`` maps the CLI name to a builder; :func:`simulate` runs one. Flags override a
scenario's defaults (rate, ECN thresholds, headroom, step, DCQCN form, duration); a fabric passed in
(``tensorfabric simulate --fabric spec.yaml``) replaces the scenario's own topology where the scenario
can pick its hosts from any fabric.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry
from tensorfabric.sim import topologies
from tensorfabric.sim.config import SimConfig
from tensorfabric.sim.dcqcn import fixed_point
from tensorfabric.sim.ecn import EcnConfig
from tensorfabric.sim.engine import run
from tensorfabric.sim.network import compile_network
from tensorfabric.sim.pfc import PfcConfig
from tensorfabric.sim.results import SimResult, port_name, summarize
from tensorfabric.sim.workloads import Flow, ModelShape, incast, kv_cache_bytes, permutation, tp_decode
from tensorfabric.topology import Fabric

__all__ = ["SCENARIOS", "Overrides", "Plan", "attach", "plan", "simulate"]

LONG_FLOW_BYTES = 1e15
"""'Long-lived' flows: far more than any run can deliver."""
ECN_100G = EcnConfig(kmin_bytes=50e3, kmax_bytes=200e3, pmax=0.2)
"""100G scenarios: marking starts below the 100 KB static XOFF, so ECN acts before PFC (the ordering rule the
fluid model assumes). The HPCC simulator's 400 KB / 1.6 MB profile sits above that XOFF and would leave PFC
alone in charge; pass --kmin 400KB --kmax 1600KB to see it."""
ECN_HPCC_100G = EcnConfig(kmin_bytes=400e3, kmax_bytes=1600e3, pmax=0.2)
"""The HPCC simulator's 100G profile (mix/config.txt): above the static XOFF, so PFC carries the load."""


@dataclass(frozen=True, slots=True)
class Overrides:
    """Values given on the command line; None keeps the scenario's default."""

    flows: int | None = None
    size_bytes: float | None = None
    rate_bps: float | None = None
    kmin_bytes: float | None = None
    kmax_bytes: float | None = None
    pmax: float | None = None
    headroom_bytes: float | None = None
    xoff_bytes: float | None = None
    step_s: float | None = None
    dcqcn: str | None = None
    duration_s: float | None = None
    seed: int | None = None
    counter_interval_s: float | None = None
    acyclic: bool = False
    """deadlock: route the same traffic without a cyclic buffer dependency."""
    pfc: bool = True
    ecn: bool = True
    """False: ECN marking disabled everywhere (a misconfiguration fault)."""
    failed_links: tuple[tuple[str, str], ...] = ()
    """Links (device pairs) that are down; routing goes around them, possibly off the up-down paths."""
    engine: str | None = None
    """``SimConfig.engine``: auto (default), stepped or events."""
    layers: int | None = None
    tokens: int | None = None
    batch: int | None = None

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and not math.isfinite(value):
                raise InputError(f"{f.name.replace('_', ' ')}: {value!r} must be a finite number")
        for name in ("flows", "size_bytes", "rate_bps", "duration_s", "layers", "tokens", "batch"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise InputError(f"{name.replace('_', ' ')}: {value!r} must be positive")


@dataclass(frozen=True)
class Plan:
    fabric: Fabric
    flows: list[Flow]
    config: SimConfig
    params: dict[str, Any]
    judge: Callable[[SimResult], SimResult] = field(default=lambda r: r)


def _config(o: Overrides, *, dcqcn: str, duration_s: float, ecn: EcnConfig, pfc: PfcConfig, **extra: Any) -> SimConfig:
    ecn_kw: dict[str, Any] = {k: v for k, v in (("kmin_bytes", o.kmin_bytes), ("kmax_bytes", o.kmax_bytes),
                                                ("pmax", o.pmax)) if v is not None}
    pfc_kw: dict[str, Any] = {k: v for k, v in (("headroom_bytes", o.headroom_bytes),
                                                ("xoff_bytes", o.xoff_bytes)) if v is not None}
    ecn = dataclasses.replace(ecn, enabled=o.ecn and ecn.enabled, **ecn_kw)
    pfc = dataclasses.replace(pfc, enabled=o.pfc and pfc.enabled, **pfc_kw)
    kw: dict[str, Any] = {"dcqcn": o.dcqcn or dcqcn, "duration_s": o.duration_s or duration_s, "ecn": ecn,
                          "pfc": pfc, "counter_interval_s": o.counter_interval_s,
                          "failed_links": o.failed_links, **extra}
    if o.step_s is not None:
        kw["step_s"] = o.step_s
    if o.seed is not None:
        kw["seed"] = o.seed
    if o.engine is not None:
        kw["engine"] = o.engine
    return SimConfig(**kw)


def _params(cfg: SimConfig, rate_bps: float, **extra: Any) -> dict[str, Any]:
    return {"rate_bps": rate_bps, "dcqcn": cfg.dcqcn, "kmin_bytes": cfg.ecn.kmin_bytes,
            "kmax_bytes": cfg.ecn.kmax_bytes, "pmax": cfg.ecn.pmax, "pfc": cfg.pfc.enabled,
            "xoff_bytes": cfg.pfc.xoff_bytes, "headroom_bytes": cfg.pfc.headroom_bytes, "step_s": cfg.step_s,
            "duration_s": cfg.duration_s, "seed": cfg.seed, "ecn": cfg.ecn.enabled,
            "failed_links": [list(pair) for pair in cfg.failed_links], "mtu": cfg.mtu, "priority": cfg.pfc.priority,
            **extra}


def _hosts(fabric: Fabric) -> list[str]:
    return [h.name for h in fabric.hosts]


def attach(fabric: Fabric) -> dict[str, str]:
    """Host -> the switch its first link goes to."""
    out: dict[str, str] = {}
    for link in fabric.links:
        for a, b in ((link.a, link.b), (link.b, link.a)):
            if a.device not in out and not fabric.is_switch(a.device) and fabric.is_switch(b.device):
                out[a.device] = b.device
    return out


def _no_fabric(name: str, fabric: Fabric | None) -> None:
    if fabric is not None:
        raise InputError(f"scenario {name!r} builds its own topology; --fabric is not accepted for it")


def _rate_for(fabric: Fabric | None, o: Overrides, default: float) -> float:
    """The link rate to build with, or for a given fabric its fastest link (reported in params)."""
    if fabric is not None:
        if o.rate_bps is not None:
            raise InputError("--rate sets the built-in topologies' link rate; a fabric spec sets its own speeds")
        return max((link.speed_bps for link in fabric.links), default=default)
    return o.rate_bps or default


# ---------------------------------------------------------------- incast (V1-V3)

def _incast(o: Overrides, fabric: Fabric | None) -> Plan:
    n = o.flows or 8
    rate = _rate_for(fabric, o, 40e9)
    fab = fabric or topologies.single_switch(n + 1, rate)
    hosts = _hosts(fab)
    if len(hosts) < n + 1:
        raise InputError(f"incast of {n} flows needs {n + 1} hosts; the fabric has {len(hosts)}")
    # The DCQCN fluid model counts wire packets of 1000 B: no separate header share, so rates compare with C/N.
    cfg = _config(o, dcqcn="paper", duration_s=10e-3, ecn=EcnConfig(), pfc=PfcConfig(), mtu=1000, header_bytes=0)
    flows = incast(hosts[1:n + 1], hosts[0], o.size_bytes or LONG_FLOW_BYTES)
    params = _params(cfg, rate, flows=n, size_bytes=o.size_bytes or LONG_FLOW_BYTES)

    def judge(r: SimResult) -> SimResult:
        e = int(r.network.dst_nic_edge[0])
        c = r.network.edges[e].rate_bps
        q = r.trace.series_queue
        half = q[len(q) // 2:, e]
        rates = r.tail_delivered_bytes(0.5) * 8 / max(r.sim_time_s / 2, 1e-12)
        out: dict[str, Any] = {"bottleneck": port_name(r.network, e), "settled_mean_bytes": float(half.mean()),
                               "flow_rate_over_fair_share": [float(x) for x in rates / (c / n)]}
        if r.params["dcqcn"] == "paper":
            fp = fixed_point(n, c, cfg.paper, cfg.ecn)
            out |= {"fixed_point_bytes": fp.queue_bytes, "fixed_point_p": fp.p,
                    "queue_over_fixed_point": float(half.mean() / fp.queue_bytes)}
        return r.with_outcome(queues=out)

    return Plan(fab, flows, cfg, params, judge)


# ---------------------------------------------------------------- victim flow (V6)

def _victim(o: Overrides, fabric: Fabric | None) -> Plan:
    rate = _rate_for(fabric, o, 100e9)
    fab = fabric or topologies.leaf_spine(2, 1, 5, rate, uplink_bps=4 * rate)
    where = attach(fab)
    hosts = _hosts(fab)
    receiver = hosts[0]
    local = [h for h in hosts if where.get(h) == where.get(receiver) and h != receiver]
    remote = [h for h in hosts if where.get(h) != where.get(receiver)]
    if not local or len(remote) < 2:
        raise InputError("victim-flow needs a receiver with a neighbour on its switch and two hosts elsewhere")
    victim_src, victim_dst = remote[0], local[0]
    n = o.flows or 4
    senders = (remote[1:] + local[1:])[:n]
    size = o.size_bytes or LONG_FLOW_BYTES
    flows = [Flow(victim_src, victim_dst, size, tag="victim"), *incast(senders, receiver, size)]
    cfg = _config(o, dcqcn="none", duration_s=5e-3, ecn=ECN_100G, pfc=PfcConfig())
    params = _params(cfg, rate, flows=len(senders), victim=f"{victim_src}->{victim_dst}", receiver=receiver)

    def judge(r: SimResult) -> SimResult:
        v = r.flows[0]
        line = r.network.line_bps[0]
        tail = r.tail_delivered_bytes(0.5)[0] * 8 / max(r.sim_time_s / 2, 1e-12)
        path = [port_name(r.network, e) for e in r.network.paths[0]]
        paused = {p: r.pause["ports"].get(p, {}).get("paused_fraction", 0.0) for p in path}
        return r.with_outcome(pause={"victim": {"flow": 0, "path": path, "path_paused_fraction": paused,
                                                "rate_over_line": float(v.mean_rate_bps / line),
                                                "settled_rate_over_line": float(tail / line)}})

    return Plan(fab, flows, cfg, params, judge)


# ---------------------------------------------------------------- PFC storm (V8)

def _storm(o: Overrides, fabric: Fabric | None) -> Plan:
    rate = _rate_for(fabric, o, 100e9)
    fab = fabric or topologies.leaf_spine(2, 2, 4, rate)
    hosts = _hosts(fab)
    if len(hosts) < 4:
        raise InputError("storm needs at least four hosts")
    stuck = hosts[0]
    size = o.size_bytes or LONG_FLOW_BYTES
    others = hosts[1:]
    flows = [Flow(h, stuck, size, tag="to-stuck") for h in others[:2] + others[-1:]]
    flows += [Flow(others[i], others[(i + len(others) // 2) % len(others)], size, tag="background")
              for i in range(len(others))]
    cfg = _config(o, dcqcn="firmware", duration_s=5e-3, ecn=ECN_100G, pfc=PfcConfig(),
                  stuck_nics=(stuck,), counter_interval_s=o.counter_interval_s or 100e-6)
    params = _params(cfg, rate, stuck_nic=stuck)

    def judge(r: SimResult) -> SimResult:
        net = r.network
        into = [i for i, e in enumerate(net.edges) if e.dst == stuck]
        paused_port = port_name(net, into[0])
        # the origin is the NIC that sends the pause -- what the monitor's storm-origin detector names -- and
        # paused_port the ToR port it holds (the NIC's TX paused share is that port's RX paused share)
        out_of = [i for i, e in enumerate(net.edges) if e.src == stuck and e.dst == net.edges[into[0]].src]
        origin = port_name(net, out_of[0]) if out_of else stuck
        frac = r.trace.edge_paused_s / r.sim_time_s
        upstream = sorted(port_name(net, int(i)) for i in np.flatnonzero(frac > 0.05) if i not in into)
        victims = [f.id for f in r.flows if f.dst != stuck and f.fct_s is None
                   and f.mean_rate_bps < 0.5 * net.line_bps[f.id]]
        return r.with_outcome(pause={"storm": {"origin": origin, "paused_port": paused_port,
                                               "origin_paused_fraction": float(frac[into[0]]),
                                               "spread_to": upstream, "victim_flows": victims}})

    return Plan(fab, flows, cfg, params, judge)


# ---------------------------------------------------------------- PFC deadlock (V7)

def _deadlock(o: Overrides, fabric: Fabric | None) -> Plan:
    _no_fabric("deadlock", fabric)
    rate = o.rate_bps or 100e9
    n_sw, per = 4, 2
    fab = topologies.ring(n_sw, per, rate, closed=not o.acyclic)
    size = o.size_bytes or 4e6
    flows = []
    for i in range(n_sw):
        for k in range(per):
            src, dst = f"h{i * per + k}", f"h{((i + 2) % n_sw) * per + k}"
            # Clockwise two switch hops on the ring: every ring link feeds the next, closing the cycle.
            path = (src, f"s{i}", f"s{(i + 1) % n_sw}", f"s{(i + 2) % n_sw}", dst)
            flows.append(Flow(src, dst, size, path=None if o.acyclic else path, tag="ring"))
    cfg = _config(o, dcqcn="none", duration_s=5e-3, ecn=ECN_100G, pfc=PfcConfig())
    params = _params(cfg, rate, switches=n_sw, hosts_per_switch=per, acyclic=o.acyclic, size_bytes=size)

    def judge(r: SimResult) -> SimResult:
        net = r.network
        ring = [i for i, e in enumerate(net.edges) if e.src.startswith("s") and e.dst.startswith("s")
                and i in set(net.seg_edge.tolist())]
        final_paused = r.trace.series_paused[-1]
        tail = float(r.tail_delivered_bytes(0.2).sum())
        stuck = float(r.trace.buffered.sum())
        unfinished = sum(f.fct_s is None for f in r.flows)
        deadlocked = bool(ring) and bool(final_paused[ring].all()) and tail == 0.0 and unfinished > 0
        return r.with_outcome(pause={"deadlock": {
            "deadlocked": deadlocked, "cycle_ports": [port_name(net, i) for i in ring],
            "cycle_paused_at_end": [bool(final_paused[i]) for i in ring], "tail_delivered_bytes": tail,
            "stuck_bytes": stuck, "unfinished_flows": unfinished}})

    return Plan(fab, flows, cfg, params, judge)


# ---------------------------------------------------------------- capacity growth

def _growth(o: Overrides, fabric: Fabric | None) -> Plan:
    rate = _rate_for(fabric, o, 100e9)
    fab = fabric or topologies.leaf_spine(2, 2, 4, rate)
    hosts = _hosts(fab)
    n = min(o.flows or 6, len(hosts) - 1)
    duration = o.duration_s or 10e-3
    size = o.size_bytes or LONG_FLOW_BYTES
    flows = [Flow(h, hosts[0], size, start_s=i * duration / n, tag="growth") for i, h in enumerate(hosts[1:n + 1])]
    # The HPCC profile marks only above XOFF: growing load shows up as growing pause, the trend to catch.
    cfg = _config(o, dcqcn="firmware", duration_s=duration, ecn=ECN_HPCC_100G, pfc=PfcConfig())
    params = _params(cfg, rate, flows=n, receiver=hosts[0])

    def judge(r: SimResult) -> SimResult:
        e = int(r.network.dst_nic_edge[0])
        t, q, p = r.trace.series_t, r.trace.series_queue[:, e], r.trace.series_paused
        windows = []
        for i in range(n):
            lo, hi = i * duration / n, (i + 1) * duration / n
            sel = (t > lo) & (t <= hi)
            windows.append({"start_s": lo, "senders": i + 1, "mean_queue_bytes": float(q[sel].mean()),
                            "paused_port_fraction": float(p[sel].mean())})
        return r.with_outcome(queues={"growth": windows})

    return Plan(fab, flows, cfg, params, judge)


# ---------------------------------------------------------------- inference tensor parallel

def _inference(o: Overrides, fabric: Fabric | None) -> Plan:
    rate = _rate_for(fabric, o, 100e9)
    fab = fabric or topologies.leaf_spine(2, 2, 4, rate)
    hosts = _hosts(fab)
    tp = o.flows or 4
    if len(hosts) < tp + 1:
        raise InputError(f"inference-tp with TP={tp} needs {tp + 1} hosts; the fabric has {len(hosts)}")
    where = attach(fab)
    # Spread the TP group over switches so the ring crosses the fabric, as cross-node TP does.
    group = sorted(hosts, key=lambda h: (hosts.index(h) % max(1, len(set(where.values()))), hosts.index(h)))[:tp]
    model = ModelShape(layers=o.layers or 8, batch=o.batch or 8)
    tokens = o.tokens or 2
    flows = tp_decode(group, model, tokens, layer_compute_s=2e-6)
    kv_src = next(h for h in hosts if h not in group)
    kv = kv_cache_bytes(dataclasses.replace(model, batch=1))
    flows.append(Flow(kv_src, group[-1], kv, tag="kv-cache"))
    cfg = _config(o, dcqcn="firmware", duration_s=20e-3, ecn=ECN_100G, pfc=PfcConfig())
    params = _params(cfg, rate, tp_group=group, layers=model.layers, batch=model.batch, tokens=tokens,
                     allreduce_bytes=model.decode_allreduce_bytes, kv_bytes=kv, kv_flow=f"{kv_src}->{group[-1]}")

    def judge(r: SimResult) -> SimResult:
        lat: list[float | None] = []
        for tok in range(tokens):
            mine = [f for f, fl in zip(r.flows, r.network.flows, strict=True) if fl.token == tok]
            if any(f.fct_s is None or f.start_s is None for f in mine):
                lat.append(None)
                continue
            begin = min(f.start_s or 0.0 for f in mine)
            end = max((f.start_s or 0.0) + (f.fct_s or 0.0) for f in mine)
            lat.append(end - begin)
        return r.with_outcome(queues={"token_latency_s": lat})

    return Plan(fab, flows, cfg, params, judge)


# ---------------------------------------------------------------- permutation (packet-level comparison)

HOP_CABLE_M = 200.0
"""1 us per hop at 5 ns/m: the packet-level comparison's links (benchmarks/sim_vs_packet.py)."""
REFERENCE_PFC = PfcConfig(xoff_bytes=15 * 4096, xon_offset_bytes=3 * 4096)
"""htsim's default lossless-input thresholds: XOFF above 15, XON below 12 packets of 4096 B."""


def _permutation(o: Overrides, fabric: Fabric | None) -> Plan:
    rate = _rate_for(fabric, o, 100e9)
    if fabric is None:
        n = o.flows or 128
        k = round((4 * n) ** (1 / 3))
        if k < 2 or k % 2 or k ** 3 // 4 != n:
            raise InputError(f"permutation: --flows {n} must be the host count k^3/4 of a k-ary fat tree "
                             "(16, 54, 128, 250, 432, 1024, ...)")
        fabric = topologies.fat_tree(k, rate, cable_m=HOP_CABLE_M, fabric_m=HOP_CABLE_M)
    hosts = _hosts(fabric)
    size = o.size_bytes or 4e6
    flows = permutation(hosts, size, seed=1)
    # Every packet acknowledged, as the reference's RoCE sink does; the completion is the last ACK's return.
    cfg = _config(o, dcqcn="none", duration_s=0.5, ecn=ECN_100G, pfc=REFERENCE_PFC, ack_bytes=64)
    params = _params(cfg, rate, hosts=len(hosts), size_bytes=size)
    return Plan(fabric, flows, cfg, params)


SCENARIOS: Registry[Callable[[Overrides, Fabric | None], Plan]] = Registry("scenario", {
    "incast": _incast,
    "victim-flow": _victim,
    "storm": _storm,
    "deadlock": _deadlock,
    "capacity-growth": _growth,
    "inference-tp": _inference,
    "permutation": _permutation,
})


def plan(name: str, overrides: Overrides | None = None, fabric: Fabric | None = None) -> Plan:
    return SCENARIOS.get(name)(overrides or Overrides(), fabric)


def simulate(name: str, overrides: Overrides | None = None, fabric: Fabric | None = None, *,
             advance: Callable[[float], None] | None = None, clock: Callable[[], float] = time.perf_counter,
             params_extra: Mapping[str, Any] | None = None) -> SimResult:
    """Build, run and judge one scenario."""
    p = plan(name, overrides, fabric)
    net = compile_network(p.fabric, p.flows, p.config)
    start = clock()
    trace = run(net, p.config, advance=advance)
    wall = clock() - start
    result = summarize(name, {**p.params, "engine": trace.engine, **(params_extra or {})}, net, trace, wall)
    return p.judge(result)
