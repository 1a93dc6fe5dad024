"""Sweeps: many scenarios of one fabric, each run on the real engine and reduced to one row.

:func:`plan_sweep` expands a :class:`~tensorfabric.sim.sweep_spec.SweepSpec` into scenarios (refusing bad input
before any work), :func:`run_point` runs one -- the fabric, the decode traffic of a TP x PP model instance placed
on it, background flows at the offered load, and the ECN/PFC/DCQCN settings of the point -- and
:func:`run_sweep` feeds the points to an executor (sim/executors.py) and appends each row to a journal as it
arrives, so an interrupted sweep resumes where it stopped. A row holds the inputs (every swept parameter and the
effective ECN/PFC/DCQCN settings) and the outcome: FCT percentiles, per-token latency, the worst port's paused
share, pause frames, drops. Rows carry no wall time: the same seed gives the same rows on any executor.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tensorfabric.errors import InputError, SimulationError
from tensorfabric.jsonload import load_json
from tensorfabric.sim import topologies
from tensorfabric.sim.config import SimConfig
from tensorfabric.sim.dcqcn import FirmwareDcqcn, PaperDcqcn
from tensorfabric.sim.ecn import EcnConfig
from tensorfabric.sim.engine import run
from tensorfabric.sim.executors import Executor
from tensorfabric.sim.network import compile_network
from tensorfabric.sim.pfc import PfcConfig
from tensorfabric.sim.results import port_name, summarize
from tensorfabric.sim.scenarios import attach
from tensorfabric.sim.sweep_spec import PARAMS, SweepPoint, SweepSpec, TopologySpec, WorkloadSpec, expand
from tensorfabric.sim.workloads import Flow, ModelShape, tp_decode
from tensorfabric.topology import Fabric
from tensorfabric.units import format_size

__all__ = ["OUTPUT_NAMES", "SweepBase", "SweepPlan", "SweepRun", "pending", "plan_sweep", "prepare_output",
           "read_journal", "run_point", "run_sweep"]

JOURNAL = "rows.jsonl"
OUTPUT_NAMES = (JOURNAL, "rows.parquet", "pareto.png", "summary.json")
"""Every file a sweep writes in its output folder."""
ECN_DEFAULT = EcnConfig(kmin_bytes=50e3, kmax_bytes=200e3, pmax=0.2)
"""The 100G scenarios' profile (sim/scenarios.py ECN_100G): marking below the 100 KB static XOFF."""


@dataclass(frozen=True)
class SweepBase:
    """What every scenario of a sweep shares, sent to each worker once."""

    fabric: Fabric
    workload: WorkloadSpec
    step_s: float
    duration_s: float
    dcqcn: str
    ecn: EcnConfig
    pfc: PfcConfig

    def fingerprint(self) -> str:
        """Changes whenever anything a row depends on besides its swept values changes."""
        return hashlib.sha256(repr(self).encode()).hexdigest()[:16]


def build_topology(t: TopologySpec) -> Fabric:
    if t.kind == "fat-tree":
        return topologies.fat_tree(t.k, t.rate_bps)
    if t.kind == "leaf-spine":
        return topologies.leaf_spine(t.leaves, t.spines, t.hosts_per_leaf, t.rate_bps)
    return topologies.single_switch(t.hosts, t.rate_bps)


def config_for(base: SweepBase, values: Mapping[str, Any]) -> SimConfig:
    """The engine configuration of one point: the base settings with the point's knobs applied."""
    ecn_kw: dict[str, Any] = {f"{k}_bytes" if k != "pmax" else k: float(values[k])
                              for k in ("kmin", "kmax", "pmax") if k in values}
    pfc_kw: dict[str, Any] = {f"{k}_bytes": float(values[k]) for k in ("headroom", "xoff") if k in values}
    ecn = dataclasses.replace(base.ecn, **ecn_kw)
    pfc = dataclasses.replace(base.pfc, **pfc_kw)
    firmware = dataclasses.replace(FirmwareDcqcn(), **{k.split(".", 1)[1]: v for k, v in values.items()
                                                       if k.startswith("firmware.")})
    paper = dataclasses.replace(PaperDcqcn(), **{k.split(".", 1)[1]: v for k, v in values.items()
                                                 if k.startswith("paper.")})
    return SimConfig(step_s=base.step_s, duration_s=base.duration_s, dcqcn=values.get("dcqcn", base.dcqcn),
                     firmware=firmware, paper=paper, ecn=ecn, pfc=pfc, seed=int(values.get("seed", 0)))


def _placement(value: str) -> tuple[int, int, bool]:
    tp, _, rest = value.removeprefix("tp").partition("xpp")
    pp, _, how = rest.partition("-")
    return int(tp), int(pp), how == "spread"


def place(fabric: Fabric, placement: str) -> list[list[str]]:
    """The hosts of each PP stage (TP ranks in order): packed fills one ToR after another, spread deals the
    ranks round-robin over the ToRs, so every TP ring and PP hop crosses the fabric."""
    tp, pp, spread = _placement(placement)
    tors = attach(fabric)
    hosts = [h.name for h in fabric.hosts if h.name in tors]
    if tp * pp > len(hosts):
        raise InputError(f"placement {placement}: needs {tp * pp} hosts; the fabric has {len(hosts)}")
    by_tor: dict[str, list[str]] = {}
    for h in hosts:
        by_tor.setdefault(tors[h], []).append(h)
    if spread:
        order = [h for row in _round_robin(list(by_tor.values())) for h in row]
    else:
        order = [h for group in by_tor.values() for h in group]
    ranks = order[:tp * pp]
    return [ranks[s * tp:(s + 1) * tp] for s in range(pp)]


def _round_robin(groups: list[list[str]]) -> Iterator[list[str]]:
    for i in range(max(map(len, groups))):
        yield [g[i] for g in groups if i < len(g)]


def decode_flows(stages: list[list[str]], w: WorkloadSpec) -> list[Flow]:
    """Each token: every stage runs its layers (two ring all-reduces each across its TP ranks), then each rank
    hands its 1/TP share of the activations to the same rank of the next stage (vLLM splits the PP send over the
    TP group and all-gathers it after). One chain: a step starts when the previous one has finished."""
    tp, pp = len(stages[0]), len(stages)
    model = ModelShape(layers=max(1, math.ceil(w.layers / pp)), batch=w.batch, hidden=w.hidden)
    flows: list[Flow] = []
    stage = 1
    for token in range(w.tokens):
        for s, group in enumerate(stages):
            if tp > 1:
                ring = tp_decode(group, model, 1, layer_compute_s=w.compute_s, first_stage=stage)
                flows += [dataclasses.replace(f, token=token) for f in ring]
                stage = ring[-1].stage + 1
            if s + 1 < pp:
                gap = 0.0 if tp > 1 else w.compute_s * model.layers
                size = 2 * model.decode_allreduce_bytes / tp
                flows += [Flow(a, b, size, stage=stage, gap_s=gap, token=token, tag="pp-activation")
                          for a, b in zip(group, stages[s + 1], strict=True)]
                stage += 1
    return flows


def background_flows(fabric: Fabric, load: float, w: WorkloadSpec, seed: int) -> list[Flow]:
    """Poisson arrivals at each host during the window, offered load x its line rate, to uniform destinations."""
    hosts = [h for h in fabric.hosts if h.nics]
    if load <= 0 or len(hosts) < 2:
        return []
    rng = np.random.default_rng([seed, 0xB6])
    flows = []
    for i, host in enumerate(hosts):
        mean_gap = w.background_size_bytes * 8 / (load * host.nics[0].speed_bps)
        t = float(rng.exponential(mean_gap))
        while t < w.window_s:
            j = int(rng.integers(len(hosts) - 1))
            flows.append(Flow(host.name, hosts[j + (j >= i)].name, w.background_size_bytes, start_s=t,
                              tag="background"))
            t += float(rng.exponential(mean_gap))
    return flows


def _nearest_rank(sorted_values: list[float], q: float) -> float | None:
    value = sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]
    return None if math.isinf(value) else value


def run_point(base: SweepBase, point: SweepPoint) -> dict[str, Any]:
    """Run one scenario on the engine and reduce it to a row (an ``error`` row if the simulator refuses it)."""
    values = point.values()
    cfg = config_for(base, values)
    row: dict[str, Any] = {"id": point.id, "index": point.index, **{_column(k): v for k, v in values.items()},
                           "dcqcn": cfg.dcqcn, "kmin_bytes": cfg.ecn.kmin_bytes, "kmax_bytes": cfg.ecn.kmax_bytes,
                           "pmax": cfg.ecn.pmax, "xoff_bytes": cfg.pfc.xoff_bytes,
                           "headroom_bytes": cfg.pfc.headroom_bytes}
    try:
        stages = place(base.fabric, str(values.get("placement", "tp2xpp1-packed")))
        flows = decode_flows(stages, base.workload)
        flows += background_flows(base.fabric, float(values.get("load", 0.0)), base.workload, cfg.seed)
        net = compile_network(base.fabric, flows, cfg)
        trace = run(net, cfg)
    except (InputError, SimulationError) as exc:
        return {**row, **dict.fromkeys(_OUTCOME), "error": str(exc)}
    result = summarize("sweep", {}, net, trace, 0.0)
    fct = sorted(f.fct_s if f.fct_s is not None else math.inf for f in result.flows)
    worst = int(np.argmax(trace.edge_paused_s))
    end = trace.sim_time_s
    tokens: list[float] = []
    for tok in range(base.workload.tokens):
        mine = [f for f, fl in zip(result.flows, net.flows, strict=True) if fl.token == tok]
        if any(f.fct_s is None or f.start_s is None for f in mine):
            tokens.append(math.inf)
        elif mine:
            tokens.append(max((f.start_s or 0) + (f.fct_s or 0) for f in mine) - min(f.start_s or 0 for f in mine))
    return {**row, "flows": len(fct), "unfinished": sum(math.isinf(x) for x in fct),
            "fct_p50_s": _nearest_rank(fct, 0.5), "fct_p99_s": _nearest_rank(fct, 0.99),
            "fct_max_s": _nearest_rank(fct, 1.0),
            "token_latency_s": None if not tokens or math.isinf(max(tokens)) else max(tokens),
            "paused_fraction": float(trace.edge_paused_s[worst] / end),
            "paused_port": port_name(net, worst) if trace.edge_paused_s[worst] > 0 else None,
            "paused_ports": int(result.pause["paused_ports"]), "pause_frames": float(result.pause["frames_total"]),
            "drops_bytes": float(result.drops_bytes), "queue_max_bytes": float(result.queues["max_bytes"]),
            "sim_time_s": float(end), "steps": int(trace.steps), "engine": trace.engine, "error": None}


_OUTCOME = ("flows", "unfinished", "fct_p50_s", "fct_p99_s", "fct_max_s", "token_latency_s", "paused_fraction",
            "paused_port", "paused_ports", "pause_frames", "drops_bytes", "queue_max_bytes", "sim_time_s", "steps",
            "engine")


def _column(name: str) -> str:
    return PARAMS[name].column


@dataclass(frozen=True)
class SweepPlan:
    spec: SweepSpec
    base: SweepBase
    points: tuple[SweepPoint, ...]
    skipped: int
    why_skipped: str


def plan_sweep(spec: SweepSpec, fabric: Fabric | None = None, ecn: EcnConfig | None = None) -> SweepPlan:
    """Every scenario of ``spec``, each checked as the engine would check it (InputError before any run).

    ``fabric`` (and its ECN profile ``ecn``) come from the spec's ``fabric:`` file, which the CLI reads."""
    if fabric is None:
        if spec.topology is None:
            raise InputError(f"sweep {spec.name}: 'fabric: {spec.fabric}' must be read by the caller")
        fabric = build_topology(spec.topology)
    base = SweepBase(fabric, spec.workload, spec.step_s, spec.duration_s, spec.dcqcn, ecn or ECN_DEFAULT,
                     PfcConfig())
    fastest = max((link.speed_bps for link in fabric.links), default=100e9)
    n_hosts = len(attach(fabric))

    def valid(values: Mapping[str, Any]) -> str | None:
        kmin, kmax = values.get("kmin", base.ecn.kmin_bytes), values.get("kmax", base.ecn.kmax_bytes)
        if kmin >= kmax:
            return f"Kmin {format_size(kmin, binary=False)} not below Kmax {format_size(kmax, binary=False)}"
        try:
            config_for(base, values).check_rate(fastest)
            tp, pp, _ = _placement(str(values.get("placement", "tp2xpp1-packed")))
            if tp * pp > n_hosts:
                return f"placement {values['placement']} needs {tp * pp} hosts; the fabric has {n_hosts}"
        except InputError as exc:
            return str(exc)
        return None

    # The base settings alone must run: a bad step or duration is the spec's mistake, not a skipped combination.
    config_for(base, {}).check_rate(fastest)
    expansion = expand(spec, base.fingerprint(), valid)
    return SweepPlan(spec, base, expansion.points, expansion.skipped, expansion.why_skipped)


def read_journal(path: Path) -> list[dict[str, Any]]:
    """Rows written so far; a last line cut by a kill is dropped (and cut off the file, so appends stay whole)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    keep = data if data.endswith(b"\n") or not data else data[:data.rfind(b"\n") + 1]
    if len(keep) != len(data):
        with open(path, "r+b") as handle:
            handle.truncate(len(keep))
    rows = []
    for number, line in enumerate(keep.decode("utf-8", "replace").splitlines(), 1):
        try:
            row = load_json(line, what="a sweep row", source=str(path), first_line=number)
        except InputError:
            raise InputError(f"{path}:{number}: not a sweep row; it is not this tool's journal (use --force to "
                             "start over)") from None
        if not isinstance(row, dict) or "id" not in row:
            raise InputError(f"{path}:{number}: not a sweep row (no id); use --force to start over")
        rows.append(row)
    return rows


@dataclass(frozen=True)
class SweepRun:
    rows: tuple[dict[str, Any], ...]
    """One per scenario of the plan, in scenario order."""
    ran: int
    resumed: int
    """Rows found in the journal and not run again."""
    ignored: int
    """Journal rows of scenarios this plan does not have (another spec's, or another version's)."""
    wall_s: float


def prepare_output(out: Path, *, resume: bool, force: bool) -> None:
    """Refuse to touch a previous sweep's files unless told: --resume continues it, --force starts over."""
    if resume and force:
        raise InputError("--resume continues a sweep and --force starts it over; give one of them")
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {str(out)!r} is not a directory")
    existing = [name for name in OUTPUT_NAMES if (out / name).exists()]
    if existing and not (resume or force):
        raise InputError(f"{out / existing[0]} exists: --resume continues that sweep, --force starts it over, or "
                         "choose another --out")
    if force:
        for name in existing:
            (out / name).unlink()
    out.mkdir(parents=True, exist_ok=True)


def pending(plan: SweepPlan, out: Path) -> list[SweepPoint]:
    """The plan's points that ``out``'s journal does not hold yet (all of them for a new sweep)."""
    done = {row["id"] for row in read_journal(out / JOURNAL)}
    return [p for p in plan.points if p.id not in done]


def run_sweep(plan: SweepPlan, out: Path, executor: Executor, *, advance: Callable[[float], None] | None = None,
              clock: Callable[[], float] = time.perf_counter) -> SweepRun:
    """Run every point of ``plan`` not already in ``out``'s journal; append each row to it as it arrives.

    Call :func:`prepare_output` first. The journal is flushed row by row, so an interrupt (the executor's
    workers are stopped by its ``close``) loses only the scenarios in flight."""
    start = clock()
    journal = out / JOURNAL
    wanted = {p.id for p in plan.points}
    found = read_journal(journal)
    done = {row["id"]: row for row in found if row["id"] in wanted}
    ignored = len({row["id"] for row in found} - wanted)
    todo = [p for p in plan.points if p.id not in done]
    ran = 0
    with open(journal, "a", encoding="utf-8") as handle:
        try:
            for row in executor.map_unordered(run_point, plan.base, todo):
                handle.write(json.dumps(row, separators=(",", ":")) + "\n")
                handle.flush()
                done[row["id"]] = row
                ran += 1
                if advance is not None:
                    advance(1)
        finally:
            executor.close()
            handle.flush()
            os.fsync(handle.fileno())
    # A row resumed from another version of the spec keeps its outcome; its position is this plan's.
    rows = tuple({**done[p.id], "index": p.index} for p in plan.points)
    return SweepRun(rows, ran, len(plan.points) - ran, ignored, clock() - start)
