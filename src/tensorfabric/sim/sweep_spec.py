"""A sweep spec: which scenario parameters vary, how (grid or seeded random search), over which fabric and
inference workload -- and its expansion into the scenarios one sweep runs.

    name: tune-ecn
    topology: {kind: fat-tree, k: 4, rate: 100G}    # or  fabric: fabric.yaml  (a fabric spec, read by the CLI)
    search: random                                   # grid (default) | random
    samples: 250                                     # random: settings drawn
    seed: 7                                          # random: the draw's seed
    step: 2us
    duration: 10ms                                   # a cap: a run ends when its last flow finishes
    workload: {layers: 2, tokens: 1, background_size: 1MB, window: 500us}
    budget: {p99: 2ms, paused: 1%}
    parameters:
      kmin: {min: 20KB, max: 400KB, scale: log}      # random: drawn; grid: give steps: N
      kmax: [200KB, 800KB, 3MB]
      pmax: [0.05, 0.2, 1.0]
      firmware.ai_bps: [5Mbit, 20Mbit]
      load: [0.3, 0.6]
      placement: [tp4, tp2xpp2-spread]

A parameter is a *knob* (a setting the operator chooses: ECN, PFC, DCQCN) or a *condition* (what the fabric
faces: offered load, TP/PP placement, the seed of the traffic and ECMP draws). Grid search runs every knob
combination under every condition. Random search draws ``samples`` knob settings; a condition given as a list
is crossed with every setting (each setting faces every listed condition), a condition given as a range is drawn
with the setting. A combination the simulator refuses (Kmin not below Kmax) is skipped in a grid and redrawn in
a random search. Every scenario gets an id hashed from its inputs: what resume uses to skip finished ones.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from tensorfabric.errors import InputError
from tensorfabric.sim.dcqcn import FirmwareDcqcn, PaperDcqcn
from tensorfabric.sim.reaction import REACTION_POINTS
from tensorfabric.units import parse_duration, parse_rate, parse_size

__all__ = ["PARAMS", "Param", "SweepPoint", "SweepSpec", "TopologySpec", "WorkloadSpec", "expand", "parse_fraction",
           "parse_placement", "parse_spec"]

ROW_VERSION = 1
"""Part of every scenario id: bump it when a row's meaning changes, so --resume never mixes the two."""
MAX_SCENARIOS = 1_000_000
_PLACEMENT = re.compile(r"^(?:tp(?P<tp>\d{1,4}))?(?:x?pp(?P<pp>\d{1,4}))?(?:-(?P<how>packed|spread))?$")
_REDRAWS = 100


def parse_fraction(value: Any, what: str, *, allow_zero: bool = False, most: float = 1.0) -> float:
    """``0.2``, ``20%`` or ``"0.2"`` as a fraction in (0, most] ([0, most] with ``allow_zero``)."""
    text = str(value).strip()
    scale = 0.01 if text.endswith("%") else 1.0
    try:
        number = float(text.removesuffix("%")) * scale
    except ValueError:
        raise InputError(f"{what}: {value!r} is not a fraction; use e.g. 0.2 or 20%") from None
    low_ok = number >= 0 if allow_zero else number > 0
    if isinstance(value, bool) or not (math.isfinite(number) and low_ok and number <= most):
        bounds = f"[0, {most:g}]" if allow_zero else f"(0, {most:g}]"
        raise InputError(f"{what}: {value!r} must be a fraction in {bounds}, e.g. 0.2 or 20%")
    return number


def parse_placement(value: Any, what: str = "placement") -> str:
    """``tp4``, ``tp2xpp2``, ``pp4-spread``: TP degree x PP stages, one rank per host, packed (default) or spread."""
    text = str(value).strip().lower()
    m = _PLACEMENT.match(text)
    if not m or not (m["tp"] or m["pp"]) or int(m["tp"] or 1) * int(m["pp"] or 1) < 2 or \
            min(int(m["tp"] or 1), int(m["pp"] or 1)) < 1:
        raise InputError(f"{what}: {value!r} must be TP x PP of at least two ranks, e.g. tp4, tp2xpp2, pp4-spread")
    return f"tp{int(m['tp'] or 1)}xpp{int(m['pp'] or 1)}-{m['how'] or 'packed'}"


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{what}: {value!r} must be a whole number")
    try:
        number = int(value) if not isinstance(value, float) or value.is_integer() else None
    except ValueError:
        number = None
    if number is None or number < 0:
        raise InputError(f"{what}: {value!r} must be a whole number >= 0")
    return number


def _number(value: Any, what: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise InputError(f"{what}: {value!r} must be a finite number")
    return number


@dataclass(frozen=True)
class Param:
    """One parameter a sweep can vary: how its values parse, whether it is a knob, the row column it fills."""

    name: str
    role: Literal["knob", "condition"]
    parse: Callable[[Any, str], Any]
    column: str
    numeric: bool = True
    """Ranges ({min, max}) are allowed; otherwise only lists of values."""


def _dcqcn_params(prefix: str, cls: type) -> list[Param]:
    out = []
    for f in dataclasses.fields(cls):
        if f.type in ("bool", bool):
            continue
        parse: Callable[[Any, str], Any]
        if f.name.endswith("_bps"):
            parse = lambda v, w: parse_rate(v, what=w)  # noqa: E731 -- a table of one-line parsers
        elif f.name.endswith("_s"):
            parse = lambda v, w: parse_duration(v, what=w, allow_zero=True)  # noqa: E731
        elif f.name.endswith("_bytes"):
            parse = lambda v, w: float(parse_size(v, what=w))  # noqa: E731
        elif f.type in ("int", int):
            parse = _integer
        else:
            parse = _number
        out.append(Param(f"{prefix}.{f.name}", "knob", parse, f"{prefix}.{f.name}"))
    return out


PARAMS: dict[str, Param] = {p.name: p for p in [
    Param("kmin", "knob", lambda v, w: float(parse_size(v, what=w, allow_zero=True)), "kmin_bytes"),
    Param("kmax", "knob", lambda v, w: float(parse_size(v, what=w)), "kmax_bytes"),
    Param("pmax", "knob", lambda v, w: parse_fraction(v, w), "pmax"),
    Param("headroom", "knob", lambda v, w: float(parse_size(v, what=w, allow_zero=True)), "headroom_bytes"),
    Param("xoff", "knob", lambda v, w: float(parse_size(v, what=w)), "xoff_bytes"),
    Param("dcqcn", "knob", lambda v, w: _choice(v, w, REACTION_POINTS.names()), "dcqcn", numeric=False),
    *_dcqcn_params("firmware", FirmwareDcqcn),
    *_dcqcn_params("paper", PaperDcqcn),
    Param("load", "condition", lambda v, w: parse_fraction(v, w, allow_zero=True), "load"),
    Param("placement", "condition", parse_placement, "placement", numeric=False),
    Param("seed", "condition", _integer, "seed", numeric=False),
]}


def _choice(value: Any, what: str, accepted: Sequence[str]) -> str:
    if value not in accepted:
        raise InputError(f"{what}: {value!r} is not one of {', '.join(accepted)}")
    return str(value)


@dataclass(frozen=True)
class Range:
    """A numeric range: drawn uniformly (log: in log space) by random search, or ``steps`` values for a grid."""

    low: float
    high: float
    log: bool
    steps: int | None

    def grid(self) -> list[float]:
        assert self.steps is not None
        if self.steps == 1:
            return [self.low]
        space = np.geomspace if self.log else np.linspace
        return [float(x) for x in space(self.low, self.high, self.steps)]

    def draw(self, rng: np.random.Generator) -> float:
        if self.log:
            return float(math.exp(rng.uniform(math.log(self.low), math.log(self.high))))
        return float(rng.uniform(self.low, self.high))


@dataclass(frozen=True)
class Axis:
    """One swept parameter: a list of values or a range."""

    param: Param
    values: tuple[Any, ...] | None
    range: Range | None = None


@dataclass(frozen=True, slots=True)
class TopologySpec:
    """A built-in topology (sim/topologies.py) by kind and size."""

    kind: Literal["fat-tree", "leaf-spine", "single-switch"]
    rate_bps: float = 100e9
    k: int = 4
    leaves: int = 2
    spines: int = 2
    hosts_per_leaf: int = 4
    hosts: int = 8


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """What each scenario sends: the decode steps of one TP x PP model instance, and background traffic."""

    layers: int = 2
    """Transformer layers simulated per token (two TP all-reduces each), split over the PP stages."""
    tokens: int = 1
    batch: int = 8
    hidden: int = 8192
    compute_s: float = 2e-6
    """Compute between one layer's all-reduces and the next layer's."""
    background_size_bytes: float = 1e6
    """Each background flow's size (KV-cache and other tenants' transfers)."""
    window_s: float = 500e-6
    """Background flows arrive (Poisson, per host, offered load x line rate) during this window."""


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One scenario of a sweep: its position, its id and the value of every swept parameter (base units)."""

    index: int
    id: str
    setting: tuple[tuple[str, Any], ...]
    """Knob values: the settings the recommendation chooses among."""
    condition: tuple[tuple[str, Any], ...]

    def values(self) -> dict[str, Any]:
        return dict(self.setting + self.condition)


@dataclass(frozen=True)
class SweepSpec:
    name: str
    search: Literal["grid", "random"]
    samples: int
    seed: int
    axes: tuple[Axis, ...]
    step_s: float = 2e-6
    duration_s: float = 10e-3
    dcqcn: str = "firmware"
    topology: TopologySpec | None = None
    fabric: str | None = None
    """Path of a fabric spec (relative paths are relative to the sweep spec's folder); the CLI reads it."""
    workload: WorkloadSpec = WorkloadSpec()
    budget: Mapping[str, Any] | None = None
    """The spec's ``budget:`` mapping as written (parsed with --budget's rules); --budget replaces it."""


_TOP = {"name", "topology", "fabric", "search", "samples", "seed", "step", "duration", "dcqcn", "workload", "budget",
        "parameters"}


def parse_spec(doc: Any, source: str = "sweep spec") -> SweepSpec:
    """A validated :class:`SweepSpec` from a parsed YAML mapping; InputError naming the key on any mistake."""
    if not isinstance(doc, dict):
        raise InputError(f"{source}: must be a mapping with 'parameters' (and 'topology' or 'fabric')")
    unknown = sorted(set(map(str, doc)) - _TOP)
    if unknown:
        raise InputError(f"{source}: unknown key {unknown[0]!r}; accepted: {', '.join(sorted(_TOP))}")
    if ("topology" in doc) == ("fabric" in doc):
        raise InputError(f"{source}: give exactly one of 'topology' (e.g. {{kind: fat-tree, k: 4}}) or 'fabric' "
                         "(a fabric spec file)")
    search = doc.get("search", "grid")
    if search not in ("grid", "random"):
        raise InputError(f"{source}: search: {search!r} is not one of grid, random")
    samples = _integer(doc.get("samples", 0 if search == "grid" else 100), f"{source}: samples")
    if search == "random" and samples < 1:
        raise InputError(f"{source}: samples: random search needs samples >= 1")
    params = doc.get("parameters")
    if not isinstance(params, dict) or not params:
        raise InputError(f"{source}: parameters: must map parameter names to values, e.g. kmin: [50KB, 100KB]; "
                         f"known: {', '.join(n for n in PARAMS if '.' not in n)}, firmware.<field>, paper.<field>")
    fabric = doc.get("fabric")
    if fabric is not None and not isinstance(fabric, str):
        raise InputError(f"{source}: fabric: {fabric!r} must be a file path")
    name = doc.get("name", "sweep")
    return SweepSpec(
        name=str(name), search=search, samples=samples, seed=_integer(doc.get("seed", 0), f"{source}: seed"),
        axes=tuple(_axis(str(k), v, search, source) for k, v in params.items()),
        step_s=parse_duration(doc.get("step", "2us"), what=f"{source}: step"),
        duration_s=parse_duration(doc.get("duration", "10ms"), what=f"{source}: duration"),
        dcqcn=_choice(doc.get("dcqcn", "firmware"), f"{source}: dcqcn", REACTION_POINTS.names()),
        topology=_topology(doc["topology"], source) if "topology" in doc else None, fabric=fabric,
        workload=_workload(doc.get("workload", {}), source),
        budget=_budget_doc(doc.get("budget"), source))


def _budget_doc(value: Any, source: str) -> Mapping[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InputError(f"{source}: budget: must be a mapping such as {{p99: 2ms, paused: 1%}}")
    return {str(k): v for k, v in value.items()}


def _axis(name: str, value: Any, search: str, source: str) -> Axis:
    param = PARAMS.get(name)
    where = f"{source}: parameters.{name}"
    if param is None:
        raise InputError(f"{where}: unknown parameter; known: {', '.join(n for n in PARAMS if '.' not in n)}, "
                         f"firmware.<{'|'.join(n.split('.')[1] for n in PARAMS if n.startswith('firmware.'))}>, "
                         "paper.<field>")
    if isinstance(value, dict):
        if not param.numeric:
            raise InputError(f"{where}: takes a list of values, not a range")
        extra = sorted(set(map(str, value)) - {"min", "max", "scale", "steps"})
        if extra or "min" not in value or "max" not in value:
            raise InputError(f"{where}: a range is {{min: .., max: .., scale: linear|log, steps: N}}"
                             + (f"; unknown key {extra[0]!r}" if extra else ""))
        low, high = param.parse(value["min"], f"{where}.min"), param.parse(value["max"], f"{where}.max")
        scale = value.get("scale", "linear")
        if scale not in ("linear", "log") or (scale == "log" and low <= 0) or high < low:
            raise InputError(f"{where}: needs min <= max (and min > 0 for scale: log); scale is linear or log")
        steps = _integer(value["steps"], f"{where}.steps") if "steps" in value else None
        if steps is not None and steps < 1:
            raise InputError(f"{where}.steps: must be at least 1")
        if search == "grid" and steps is None:
            raise InputError(f"{where}: a grid needs 'steps: N' on a range (or a list of values, or search: random)")
        rng = Range(float(low), float(high), scale == "log", steps)
        if steps is not None:
            return Axis(param, tuple(dict.fromkeys(_fit(param, v) for v in rng.grid())))
        return Axis(param, None, rng)
    items = value if isinstance(value, list) else [value]
    if not items:
        raise InputError(f"{where}: an empty list sweeps nothing; give at least one value")
    parsed = tuple(param.parse(v, f"{where}[{i}]") for i, v in enumerate(items))
    if len(set(parsed)) != len(parsed):
        raise InputError(f"{where}: lists a value twice")
    return Axis(param, parsed)


def _topology(value: Any, source: str) -> TopologySpec:
    if not isinstance(value, dict) or "kind" not in value:
        raise InputError(f"{source}: topology: must be a mapping with kind: fat-tree | leaf-spine | single-switch")
    kind = _choice(value["kind"], f"{source}: topology.kind", ("fat-tree", "leaf-spine", "single-switch"))
    fields = {"k", "leaves", "spines", "hosts_per_leaf", "hosts"}
    extra = sorted(set(map(str, value)) - fields - {"kind", "rate"})
    if extra:
        raise InputError(f"{source}: topology: unknown key {extra[0]!r}")
    counts = {k: _integer(v, f"{source}: topology.{k}") for k, v in value.items() if k in fields}
    rate = parse_rate(value.get("rate", "100G"), what=f"{source}: topology.rate")
    return TopologySpec(kind, rate, **counts)  # type: ignore[arg-type]


def _workload(value: Any, source: str) -> WorkloadSpec:
    if not isinstance(value, dict):
        raise InputError(f"{source}: workload: must be a mapping, e.g. {{layers: 2, tokens: 1}}")
    parsers: dict[str, tuple[str, Callable[[Any, str], Any]]] = {
        "layers": ("layers", _integer), "tokens": ("tokens", _integer), "batch": ("batch", _integer),
        "hidden": ("hidden", _integer),
        "compute": ("compute_s", lambda v, w: parse_duration(v, what=w, allow_zero=True)),
        "background_size": ("background_size_bytes", lambda v, w: float(parse_size(v, what=w))),
        "window": ("window_s", lambda v, w: parse_duration(v, what=w)),
    }
    extra = sorted(set(map(str, value)) - set(parsers))
    if extra:
        raise InputError(f"{source}: workload: unknown key {extra[0]!r}; accepted: {', '.join(parsers)}")
    kw = {parsers[k][0]: parsers[k][1](v, f"{source}: workload.{k}") for k, v in value.items()}
    for key in ("layers", "tokens", "batch", "hidden"):
        if kw.get(key, 1) < 1:
            raise InputError(f"{source}: workload.{key}: must be at least 1")
    return WorkloadSpec(**kw)


def scenario_id(base: str, values: Mapping[str, Any]) -> str:
    """A stable id for a scenario's inputs: the same inputs give the same id in any process or run."""
    text = json.dumps({"v": ROW_VERSION, "base": base, "values": values}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Expansion:
    points: tuple[SweepPoint, ...]
    skipped: int
    """Combinations the simulator refuses (e.g. Kmin not below Kmax): left out of a grid, redrawn at random."""
    why_skipped: str


def expand(spec: SweepSpec, base: str, valid: Callable[[Mapping[str, Any]], str | None]) -> Expansion:
    """Every scenario of the sweep. ``base`` fingerprints what the spec fixes (topology, workload, step);
    ``valid(values)`` is None for a runnable combination or the reason it is not."""
    knobs = [a for a in spec.axes if a.param.role == "knob"]
    conds = [a for a in spec.axes if a.param.role == "condition"]
    crossed = [a for a in conds if a.values is not None]
    cond_grid = [tuple(zip([a.param.name for a in crossed], combo, strict=True))
                 for combo in itertools.product(*(a.values or () for a in crossed))]
    drawn_conds = [a for a in conds if a.values is None]
    rng = np.random.default_rng(spec.seed)
    skipped, why = 0, ""
    if spec.search == "grid":
        total = math.prod(len(a.values or ()) for a in spec.axes)
        if total > MAX_SCENARIOS:
            raise InputError(f"sweep: the grid has {total} scenarios, over the {MAX_SCENARIOS} limit; "
                             "use search: random with samples: N")
        combos = [tuple(zip([a.param.name for a in knobs], c, strict=True))
                  for c in itertools.product(*(a.values or () for a in knobs))]
        pairs = [(s, c) for s in combos for c in cond_grid]
    else:
        if spec.samples * len(cond_grid) > MAX_SCENARIOS:
            raise InputError(f"sweep: {spec.samples} samples x {len(cond_grid)} conditions is over the "
                             f"{MAX_SCENARIOS} limit")
        pairs = []
        for _ in range(spec.samples):
            for _attempt in range(_REDRAWS):
                setting = tuple((a.param.name, _draw(a, rng)) for a in knobs)
                drawn = tuple((a.param.name, _draw(a, rng)) for a in drawn_conds)
                reason = valid(dict(setting + drawn + (cond_grid[0] if cond_grid else ())))
                if reason is None:
                    break
                skipped, why = skipped + 1, why or reason
            else:
                raise InputError(f"sweep: {_REDRAWS} draws in a row were refused ({why}); narrow the ranges")
            pairs.extend((setting, drawn + c) for c in cond_grid)
    points: list[SweepPoint] = []
    for setting, cond in pairs:
        values = dict(setting + cond)
        reason = valid(values)
        if reason is not None:
            skipped, why = skipped + 1, why or reason
            continue
        points.append(SweepPoint(len(points), scenario_id(base, values), setting, cond))
    if not points:
        raise InputError(f"sweep: no runnable scenario ({why})")
    return Expansion(tuple(points), skipped, why)


def _draw(axis: Axis, rng: np.random.Generator) -> Any:
    if axis.values is not None:
        return axis.values[int(rng.integers(len(axis.values)))]
    assert axis.range is not None
    return _fit(axis.param, axis.range.draw(rng))


def _fit(param: Param, value: float) -> Any:
    """Sizes in whole bytes and counts in whole numbers, as a spec would write them."""
    if param.column.endswith("_bytes"):
        return float(round(value))
    if param.parse is _integer:
        return int(round(value))
    return value
