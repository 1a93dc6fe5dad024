"""What a sweep's rows say: each setting's worst case over the conditions it faced, the Pareto front of p99 FCT
against paused time, the setting to recommend under the user's budgets, and the files a sweep leaves.

A *setting* is one combination of knobs (ECN, PFC, DCQCN values); its rows are the conditions it ran under
(load, placement, seed). A setting meets the budget when its worst row does: every FCT percentile and paused
share within the limit, every flow finished, no scenario refused. Among those, the recommendation is the one
with the most room: the smallest largest share of any budget it uses (a drops=0 limit is pass or fail only),
ties broken by the lower p99. With none meeting it, the closest is named instead, and the sweep exits 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorfabric.errors import InputError
from tensorfabric.sim.sweep import JOURNAL, SweepPlan, SweepRun
from tensorfabric.sim.sweep_spec import PARAMS, parse_fraction
from tensorfabric.units import format_duration, format_rate, format_size, parse_duration, parse_size

__all__ = ["BUDGET_KEYS", "Budget", "SettingOutcome", "Summary", "pareto_front", "parse_budget", "settings_of",
           "summarize_sweep", "write_outputs"]

BUDGET_KEYS: dict[str, str] = {"p50": "fct_p50_s", "p99": "fct_p99_s", "max": "fct_max_s",
                               "token": "token_latency_s", "paused": "paused_fraction", "drops": "drops_bytes"}
"""--budget key -> the row column it limits."""


@dataclass(frozen=True, slots=True)
class Budget:
    limits: tuple[tuple[str, float], ...]
    """(row column, upper limit) pairs."""
    text: str

    def to_dict(self) -> dict[str, float]:
        return dict(self.limits)


def parse_budget(value: str | Mapping[str, Any], what: str = "--budget") -> Budget:
    """``p99=2ms,paused=1%`` (or the spec's mapping) as a :class:`Budget`."""
    if isinstance(value, str):
        pairs = []
        for part in filter(None, (p.strip() for p in value.split(","))):
            key, sep, limit = part.partition("=")
            if not sep:
                raise InputError(f"{what}: {part!r} must be KEY=LIMIT, e.g. p99=2ms,paused=1%")
            pairs.append((key.strip(), limit.strip()))
    else:
        pairs = [(str(k), v) for k, v in value.items()]
    if not pairs:
        raise InputError(f"{what}: empty; give limits such as p99=2ms,paused=1%")
    limits: dict[str, float] = {}
    for key, limit in pairs:
        if key not in BUDGET_KEYS:
            raise InputError(f"{what}: {key!r} is not one of {', '.join(BUDGET_KEYS)}")
        where = f"{what} {key}"
        if key == "paused":
            limits[BUDGET_KEYS[key]] = parse_fraction(limit, where, allow_zero=True)
        elif key == "drops":
            limits[BUDGET_KEYS[key]] = float(parse_size(limit, what=where, allow_zero=True))
        else:
            limits[BUDGET_KEYS[key]] = parse_duration(limit, what=where)
    text = ",".join(f"{key}={_show(BUDGET_KEYS[key], limits[BUDGET_KEYS[key]])}" for key, _ in pairs)
    return Budget(tuple(limits.items()), text)


def _show(column: str, value: float | None) -> str:
    if value is None:
        return "unfinished"
    if column.endswith("_s"):
        return format_duration(value)
    if column == "paused_fraction" or column == "pmax" or column == "load":
        return f"{value:.3g}" if column != "paused_fraction" else f"{value * 100:.3g}%"
    if column.endswith("_bytes"):
        return format_size(value, binary=False)
    if column.endswith("_bps"):
        return format_rate(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def show_setting(setting: Mapping[str, Any]) -> str:
    """``kmin 100KB, kmax 400KB, pmax 0.2`` -- the knobs as a user would write them."""
    return ", ".join(f"{name} {_show(PARAMS[name].column, v) if isinstance(v, float) else v}"
                     for name, v in setting.items())


@dataclass(frozen=True)
class SettingOutcome:
    setting: dict[str, Any]
    rows: int
    errors: int
    unfinished: int
    worst: dict[str, float]
    """Per outcome column, the worst (largest) value over the setting's rows; inf where a flow did not finish."""
    meets: bool
    score: float
    """The largest share of a budget limit the setting uses (inf: refused or unfinished)."""

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting, "rows": self.rows, "errors": self.errors, "unfinished": self.unfinished,
                "worst": {k: (None if math.isinf(v) else v) for k, v in self.worst.items()}, "meets": self.meets,
                "score": None if math.isinf(self.score) else self.score}


_WORST = ("fct_p50_s", "fct_p99_s", "fct_max_s", "token_latency_s", "paused_fraction", "drops_bytes")


def settings_of(plan: SweepPlan, rows: Sequence[Mapping[str, Any]], budget: Budget | None) -> list[SettingOutcome]:
    """Each setting's worst case over its conditions, in the order the settings first appear."""
    groups: dict[tuple[tuple[str, Any], ...], list[Mapping[str, Any]]] = {}
    for point, row in zip(plan.points, rows, strict=True):
        groups.setdefault(point.setting, []).append(row)
    out = []
    for setting, members in groups.items():
        errors = sum(r.get("error") is not None for r in members)
        worst = {c: max((math.inf if r.get(c) is None else float(r[c]) for r in members), default=math.inf)
                 for c in _WORST}
        unfinished = sum(int(r.get("unfinished") or 0) for r in members)
        score, meets = math.inf, False
        if errors == 0 and unfinished == 0:
            shares = [worst[c] / limit for c, limit in (budget.limits if budget else ()) if limit > 0]
            zero_ok = all(worst[c] <= 0 for c, limit in (budget.limits if budget else ()) if limit <= 0)
            score = max(shares) if shares else worst["fct_p99_s"]
            meets = budget is not None and zero_ok and all(s <= 1.0 for s in shares)
        out.append(SettingOutcome(dict(setting), len(members), errors, unfinished, worst, meets, score))
    return out


def pareto_front(outcomes: Sequence[SettingOutcome]) -> list[SettingOutcome]:
    """Settings no other beats on both worst p99 FCT and worst paused share, by increasing p99."""
    ok = sorted((o for o in outcomes if math.isfinite(o.worst["fct_p99_s"]) and o.errors == 0),
                key=lambda o: (o.worst["fct_p99_s"], o.worst["paused_fraction"]))
    front: list[SettingOutcome] = []
    best_paused = math.inf
    for o in ok:
        if o.worst["paused_fraction"] < best_paused:
            front.append(o)
            best_paused = o.worst["paused_fraction"]
    return front


@dataclass(frozen=True)
class Summary:
    name: str
    scenarios: int
    settings: list[SettingOutcome]
    front: list[SettingOutcome]
    budget: Budget | None
    recommended: SettingOutcome | None
    """The setting meeting the budget with the most room; None when none meets it (or no budget)."""
    closest: SettingOutcome | None
    """With a budget nobody meets: the setting that comes nearest."""
    met_by: int
    errors: int
    run: SweepRun
    skipped: int
    why_skipped: str

    def to_dict(self, files: Mapping[str, str] | None = None) -> dict[str, Any]:
        """The summary as JSON-able data; with ``files`` (what :func:`write_outputs` wrote), the ``sweep --json``
        document: the same plus ``files`` and the run's ``wall_s``."""
        doc = {"name": self.name, "scenarios": self.scenarios, "settings": len(self.settings),
                "ran": self.run.ran, "resumed": self.run.resumed, "ignored_rows": self.run.ignored,
                "skipped": self.skipped, "why_skipped": self.why_skipped or None, "errors": self.errors,
                "budget": self.budget.text if self.budget else None,
                "budget_limits": self.budget.to_dict() if self.budget else None, "met_by": self.met_by,
                "recommendation": self.recommended.to_dict() if self.recommended else None,
                "closest": self.closest.to_dict() if self.closest else None,
                "front": [o.to_dict() for o in self.front]}
        return doc if files is None else {**doc, "files": dict(files), "wall_s": self.run.wall_s}


def summarize_sweep(plan: SweepPlan, run: SweepRun, budget: Budget | None) -> Summary:
    outcomes = settings_of(plan, run.rows, budget)
    meeting = sorted((o for o in outcomes if o.meets), key=lambda o: (o.score, o.worst["fct_p99_s"]))
    closest = None
    if budget is not None and not meeting:
        candidates = [o for o in outcomes if math.isfinite(o.score)]
        closest = min(candidates, key=lambda o: (o.score, o.worst["fct_p99_s"]), default=None)
    return Summary(plan.spec.name, len(plan.points), outcomes, pareto_front(outcomes), budget,
                   meeting[0] if meeting else None, closest, len(meeting),
                   sum(r.get("error") is not None for r in run.rows), run, plan.skipped, plan.why_skipped)


def _rows_jsonl(rows: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(row, separators=(",", ":")) + "\n" for row in rows)


def _rows_parquet(rows: Sequence[Mapping[str, Any]]) -> bytes | None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist([dict(r) for r in rows]), sink)
    return bytes(sink.getvalue().to_pybytes())


def pareto_png(summary: Summary) -> bytes | None:
    """p99 FCT against paused share, one point per setting (its worst condition); None without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tensorfabric.fsutil import figure_png

    pts = [o for o in summary.settings if math.isfinite(o.worst["fct_p99_s"]) and o.errors == 0]
    fig, ax = plt.subplots(figsize=(8.5, 5.5))
    colour_by = strongest_knob(pts)
    xs = [o.worst["fct_p99_s"] * 1e3 for o in pts]
    ys = [o.worst["paused_fraction"] * 100 for o in pts]
    if colour_by is not None:
        column = PARAMS[colour_by].column
        scale, unit = (1e-3, "KB") if column.endswith("_bytes") else (1e-6, "Mbit/s") if column.endswith("_bps") \
            else (1.0, "")
        values = [float(o.setting[colour_by]) * scale for o in pts]
        positive = min(values) > 0 and max(values) / max(min(values), 1e-300) > 20
        norm = matplotlib.colors.LogNorm() if positive else None
        sc = ax.scatter(xs, ys, c=values, cmap="viridis", norm=norm, s=20, alpha=0.85)
        fig.colorbar(sc, ax=ax, label=f"{colour_by}{f' ({unit})' if unit else ''}: the knob most tied to pause")
    else:
        ax.scatter(xs, ys, s=20, alpha=0.85)
    front = summary.front
    ax.step([o.worst["fct_p99_s"] * 1e3 for o in front], [o.worst["paused_fraction"] * 100 for o in front],
            where="post", color="tab:red", lw=1.2, label=f"Pareto front ({len(front)} settings)")
    limits = summary.budget.to_dict() if summary.budget else {}
    if "fct_p99_s" in limits or "paused_fraction" in limits:
        bx = limits.get("fct_p99_s", math.inf) * 1e3
        by = limits.get("paused_fraction", math.inf) * 100
        if math.isfinite(bx):
            ax.axvline(bx, color="tab:green", ls="--", lw=1)
        if math.isfinite(by):
            ax.axhline(by, color="tab:green", ls="--", lw=1)
        ax.fill_between([0, bx if math.isfinite(bx) else max(xs, default=1) * 1.05], 0,
                        by if math.isfinite(by) else max(ys, default=1) * 1.05, color="tab:green", alpha=0.08,
                        label=f"budget {summary.budget.text if summary.budget else ''}")
    pick = summary.recommended or summary.closest
    if pick is not None and math.isfinite(pick.worst["fct_p99_s"]):
        ax.scatter([pick.worst["fct_p99_s"] * 1e3], [pick.worst["paused_fraction"] * 100], marker="*", s=260,
                   color="gold", edgecolor="black", zorder=5,
                   label=("recommended: " if summary.recommended else "closest: ") + show_setting(pick.setting))
    ax.set_xlabel("p99 flow completion time, worst condition (ms)")
    ax.set_ylabel("most paused port, worst condition (% of time)")
    ax.set_xlim(left=0)
    # Linear below 1 % (where budgets sit), logarithmic above: a 20 % outlier does not flatten the budget's corner.
    ax.set_yscale("symlog", linthresh=1.0, linscale=1.5)
    top = max([*ys, 1.0])
    ax.set_yticks([t for t in (0, 0.25, 0.5, 0.75, 1, 2, 5, 10, 20, 50, 100) if t <= top * 1.5])
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.set_ylim(0, top * 1.3)
    ax.set_title(f"sweep {summary.name}: {len(summary.settings)} settings x conditions = {summary.scenarios} "
                 f"scenarios", fontsize=10)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return figure_png(fig, dpi=110)


def strongest_knob(outcomes: Sequence[SettingOutcome]) -> str | None:
    """The numeric knob whose values rank most closely with the worst paused share (|Spearman rho|)."""
    import numpy as np

    if len(outcomes) < 3:
        return None
    def ranks(values: list[float]) -> Any:
        """Ranks with ties averaged: a grid repeats each knob value many times."""
        _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        return (np.cumsum(counts) - (counts - 1) / 2.0)[inverse]

    paused = ranks([o.worst["paused_fraction"] for o in outcomes])
    best, best_rho = None, -1.0
    for name, value in outcomes[0].setting.items():
        if not isinstance(value, int | float):
            continue
        knob = ranks([float(o.setting[name]) for o in outcomes])
        rho = 0.0 if np.ptp(knob) == 0 or np.ptp(paused) == 0 else abs(float(np.corrcoef(knob, paused)[0, 1]))
        if rho > best_rho:
            best, best_rho = name, rho
    return best


def write_outputs(out: Path, summary: Summary, extra: Mapping[str, Any] | None = None) -> dict[str, str]:
    """rows.jsonl rewritten in scenario order, rows.parquet (pyarrow), pareto.png (matplotlib), summary.json.

    Returns what each written file is, by name; every file is replaced atomically."""
    from tensorfabric.fsutil import write_files

    rows = summary.run.rows
    files: dict[str, str | bytes] = {JOURNAL: _rows_jsonl(rows)}
    parquet = _rows_parquet(rows)
    if parquet is not None:
        files["rows.parquet"] = parquet
    png = pareto_png(summary)
    if png is not None:
        files["pareto.png"] = png
    names = {name: str(out / name) for name in [*files, "summary.json"]}
    doc = {**summary.to_dict(), **(extra or {}), "files": names}
    files["summary.json"] = json.dumps(doc, indent=1) + "\n"
    write_files([(out / name, content, None) for name, content in files.items()])
    return names
