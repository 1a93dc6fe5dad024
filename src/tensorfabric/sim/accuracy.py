"""How far to trust a simulated FCT: error against the packet-level references, measured and shipped.

Two tables, one per reference. ``benchmarks/sim_vs_packet.py --write-table`` runs the issue-20 scenarios
through htsim (PFC alone: htsim's RoCE has no DCQCN) and writes ``data/accuracy.json``;
``benchmarks/sim_vs_ns3.py --write-table`` turns its saved ns-3 HPCC comparison (DCQCN, paper and firmware
parameters) into ``data/accuracy_dcqcn.json``. :func:`nearest` and :func:`nearest_dcqcn` pick the measured
scenario closest to a run (same traffic kind, then nearest host count and flow size on a log scale) so
``simulate`` can print the error measured there next to its own FCTs. The tables say nothing about scenarios
unlike any measured one; both return the distance so the caller can say how far the match is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tensorfabric.errors import InputError

__all__ = ["DCQCN_TABLE_PATH", "FAR", "PFC_ALONE", "QUANTILES", "TABLE_PATH", "WITHIN", "Measured", "MeasuredDcqcn",
           "dcqcn_error", "error_summary", "for_flows", "load_table", "nearest", "nearest_dcqcn"]

TABLE_PATH = Path(__file__).resolve().parent / "data" / "accuracy.json"
DCQCN_TABLE_PATH = Path(__file__).resolve().parent / "data" / "accuracy_dcqcn.json"
PFC_ALONE = "measured with PFC alone; the reference has no DCQCN"
"""htsim's note on a DCQCN run (its figure speaks for the run's PFC part; ``dcqcn`` holds ns-3's)."""
WITHIN = 0.10
"""The acceptance bound of issue 32: a quantile whose |error| exceeds it is shown with a warning."""
QUANTILES = {"p10": 10.0, "p50": 50.0, "p90": 90.0, "p99": 99.0, "max": 100.0}
FAR = 2.0
"""A nearest match farther than this (a kind mismatch counts 4, each factor 2 in hosts or flow size 1) is
only indicative."""


def _quantiles(x: npt.NDArray[np.float64]) -> dict[str, float]:
    return {name: float(np.percentile(x, q)) for name, q in QUANTILES.items()}


def error_summary(model: npt.ArrayLike, reference: npt.ArrayLike) -> dict[str, Any]:
    """Quantiles of both, the model's relative error at each, and the flow-by-flow median |relative error|.

    Flows unfinished in either run are left out of the flow-by-flow figure and counted.
    """
    m, r = np.asarray(model, dtype=float), np.asarray(reference, dtype=float)
    if m.shape != r.shape or m.ndim != 1 or m.size == 0:
        raise InputError(f"error summary: model {m.shape} and reference {r.shape} must be equal, non-empty 1-D")
    both = ~(np.isnan(m) | np.isnan(r))
    if not both.any():
        raise InputError("error summary: no flow finished in both runs")
    qm, qr = _quantiles(m[both]), _quantiles(r[both])
    return {
        "model": qm, "reference": qr,
        "rel_error": {k: qm[k] / qr[k] - 1.0 for k in QUANTILES},
        "flow_median_abs_rel_error": float(np.median(np.abs(m[both] / r[both] - 1.0))),
        "flow_p90_abs_rel_error": float(np.percentile(np.abs(m[both] / r[both] - 1.0), 90)),
        "unfinished_model": int(np.isnan(m).sum()), "unfinished_reference": int(np.isnan(r).sum()),
    }


@dataclass(frozen=True)
class Measured:
    name: str
    kind: str
    hosts: int
    flow_bytes: float
    rel_error: dict[str, float]
    flow_median_abs_rel_error: float
    reference_self_rel_error: dict[str, float]
    worst_abs_rel_error: dict[str, float]
    """Over all the reference's ECMP draws measured (``draws``), the largest |error| at each quantile."""
    draws: int
    distance: float
    """0 when the run matches the measured scenario's kind, hosts and flow size; grows with log ratios."""


@cache
def load_table(path: Path = TABLE_PATH) -> tuple[dict[str, Any], ...]:
    try:
        doc = json.loads(path.read_text())
        rows = tuple(doc["scenarios"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"accuracy table {path}: unreadable ({exc})") from None
    return rows


@cache
def _dcqcn_doc(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc["scenarios"], list) or not isinstance(doc["reference"]["name"], str):
            raise TypeError("scenarios must be a list, reference.name a string")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"DCQCN accuracy table {path}: unreadable ({exc})") from None
    return dict(doc)


@dataclass(frozen=True)
class MeasuredDcqcn:
    """One ns-3 scenario of the DCQCN table: the model on the reference's own ECMP paths, and on its own hash."""

    name: str
    params: str
    kind: str
    label: str
    """The scenario in words, e.g. "16→1 incast of 4 MB, k = 8 fat tree"."""
    hosts: int
    flow_bytes: float
    ecn: dict[str, float]
    rel_error: dict[str, float]
    own_ecmp_rel_error: dict[str, float]
    flow_median_abs_rel_error: float
    gap: str
    """Why a quantile is outside :data:`WITHIN` here, as measured (empty when all are inside)."""
    distance: float


def nearest_dcqcn(params: str, kind: str, hosts: int, flow_bytes: float, *,
                  path: Path = DCQCN_TABLE_PATH) -> MeasuredDcqcn | None:
    """The ns-3 scenario measured with DCQCN form ``params`` nearest to a run; None when that form has none."""
    best = _nearest_row((r for r in _dcqcn_doc(path)["scenarios"] if r["params"] == params), kind, hosts, flow_bytes)
    if best is None:
        return None
    d, row = best
    return MeasuredDcqcn(name=row["name"], params=row["params"], kind=row["kind"], label=row["label"],
                         hosts=int(row["hosts"]), flow_bytes=float(row["flow_bytes"]), ecn=dict(row["ecn"]),
                         rel_error=dict(row["rel_error"]), own_ecmp_rel_error=dict(row["own_ecmp_rel_error"]),
                         flow_median_abs_rel_error=float(row["flow_median_abs_rel_error"]), gap=row.get("gap", ""),
                         distance=d)


def _marking(ecn: dict[str, float]) -> str:
    return f"Kmin {ecn['kmin_bytes'] / 1e3:g} KB / Kmax {ecn['kmax_bytes'] / 1e3:g} KB / Pmax {ecn['pmax']:.3g}"


def dcqcn_error(params: str, kind: str, hosts: int, flow_bytes: float, ecn: dict[str, float] | None = None, *,
                path: Path = DCQCN_TABLE_PATH) -> dict[str, Any] | None:
    """The ns-3 figure for a DCQCN run as a JSON-able record; None for a form the reference was not run with.

    ``ecn`` (kmin_bytes, kmax_bytes, pmax) is the run's marking; a run marking otherwise than the measured
    scenario gets a note, since DCQCN's error depends on how often it is told to cut.
    """
    m = nearest_dcqcn(params, kind, hosts, flow_bytes, path=path)
    if m is None:
        return None
    doc = _dcqcn_doc(path)
    notes = []
    if m.distance > FAR:
        notes.append(f"far from this run ({kind}, {hosts} hosts): indicative only")
    if ecn is not None and any(not math.isclose(float(ecn[k]), float(m.ecn[k])) for k in m.ecn if k in ecn):
        notes.append(f"measured with ECN {_marking(m.ecn)}, this run {_marking({**m.ecn, **ecn})}")
    outside = {q: m.rel_error[q] for q in ("p50", "p99", "max") if abs(m.rel_error[q]) > WITHIN}
    warning = None
    if outside:
        figures = ", ".join(f"{q} {v:+.1%}" for q, v in outside.items())
        warning = f"outside {WITHIN:.0%} of {doc['reference']['name']} on {m.name}: {figures}" + (
            f" ({m.gap})" if m.gap else "")
    return {"reference": doc["reference"]["name"], "reference_detail": doc["reference"].get("simulator"),
            "params": m.params, "nearest": m.name, "scenario": m.label, "distance": round(m.distance, 3),
            "rel_error": m.rel_error, "own_ecmp_rel_error": m.own_ecmp_rel_error,
            "flow_median_abs_rel_error": m.flow_median_abs_rel_error, "ecn": m.ecn,
            "within": WITHIN, "warning": warning, "notes": notes}


def _nearest_row(rows: Iterable[dict[str, Any]], kind: str, hosts: int,
                 flow_bytes: float) -> tuple[float, dict[str, Any]] | None:
    """The row nearest a run, and its distance: octaves of hosts plus octaves of flow size, plus 4 for the other
    traffic shape (an incast is never a good stand-in for a permutation)."""
    best: tuple[float, dict[str, Any]] | None = None
    for row in rows:
        d = abs(math.log2(hosts / row["hosts"])) + abs(math.log2(flow_bytes / row["flow_bytes"]))
        d += 0.0 if row["kind"] == kind else 4.0
        if best is None or d < best[0]:
            best = (d, row)
    return best


def nearest(kind: str, hosts: int, flow_bytes: float, *, path: Path = TABLE_PATH) -> Measured | None:
    """The measured scenario nearest to a run of ``kind`` ('incast' or 'perm') on ``hosts`` hosts."""
    best = _nearest_row(load_table(path), kind, hosts, flow_bytes)
    if best is None:
        return None
    d, row = best
    return Measured(name=row["name"], kind=row["kind"], hosts=int(row["hosts"]), flow_bytes=float(row["flow_bytes"]),
                    rel_error=dict(row["rel_error"]), flow_median_abs_rel_error=float(row["flow_median_abs_rel_error"]),
                    reference_self_rel_error=dict(row["reference_self_rel_error"]),
                    worst_abs_rel_error=dict(row.get("worst_abs_rel_error") or
                                             {q: abs(v) for q, v in row["rel_error"].items()}),
                    draws=int(row.get("draws", 1)), distance=d)


def for_flows(dsts: Sequence[str], sizes: Sequence[float], hosts: int, dcqcn: str, *,
              ecn: dict[str, float] | None = None, ecn_enabled: bool = True) -> dict[str, Any] | None:
    """The measured error to print next to a run's FCTs, as a JSON-able record; None without a table row.

    The traffic kind is ``incast`` when every flow has one destination, else ``perm``; the size is the median
    flow size. The record is htsim's (PFC alone); a DCQCN run with ECN on also gets ``dcqcn``, the ns-3
    figure for its form (:func:`dcqcn_error`), None for a form ns-3 was not run with.
    """
    if not dsts or not sizes:
        return None
    kind = "incast" if len(set(dsts)) == 1 and len(dsts) > 1 else "perm"
    m = nearest(kind, hosts, float(np.median(sizes)))
    if m is None:
        return None
    notes = []
    if m.distance > FAR:
        notes.append(f"far from this run ({kind}, {hosts} hosts): indicative only")
    extra: dict[str, Any] = {}
    if dcqcn != "none" and ecn_enabled:
        notes.append(PFC_ALONE)
        extra["dcqcn"] = dcqcn_error(dcqcn, kind, hosts, float(np.median(sizes)), ecn)
    elif dcqcn != "none":
        notes.append("ECN is off, so DCQCN gets no marks: PFC alone, as measured here")
    return {"nearest": m.name, "distance": round(m.distance, 3), "rel_error": m.rel_error,
            "flow_median_abs_rel_error": m.flow_median_abs_rel_error,
            "worst_abs_rel_error": m.worst_abs_rel_error, "draws": m.draws,
            "reference_self_rel_error": m.reference_self_rel_error, "notes": notes,
            "reference": "htsim", **extra}
