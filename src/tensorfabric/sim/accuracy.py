"""How far to trust a simulated FCT: error against the packet-level reference, measured and shipped.

``benchmarks/sim_vs_packet.py --write-table`` runs the issue-20 scenarios through htsim and through this
model and writes ``data/accuracy.json``; :func:`nearest` picks the measured scenario closest to a run
(same traffic kind, then nearest host count and flow size on a log scale) so ``simulate`` can print the
error measured there next to its own FCTs. The table says nothing about scenarios unlike any measured one;
:func:`nearest` returns the distance so the caller can say how far the match is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tensorfabric.errors import InputError

__all__ = ["FAR", "QUANTILES", "TABLE_PATH", "Measured", "error_summary", "for_flows", "load_table", "nearest"]

TABLE_PATH = Path(__file__).resolve().parent / "data" / "accuracy.json"
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


def nearest(kind: str, hosts: int, flow_bytes: float, *, path: Path = TABLE_PATH) -> Measured | None:
    """The measured scenario nearest to a run of ``kind`` ('incast' or 'perm') on ``hosts`` hosts."""
    best: tuple[float, dict[str, Any]] | None = None
    for row in load_table(path):
        d = abs(math.log2(hosts / row["hosts"])) + abs(math.log2(flow_bytes / row["flow_bytes"]))
        d += 0.0 if row["kind"] == kind else 4.0
        if best is None or d < best[0]:
            best = (d, row)
    if best is None:
        return None
    d, row = best
    return Measured(name=row["name"], kind=row["kind"], hosts=int(row["hosts"]), flow_bytes=float(row["flow_bytes"]),
                    rel_error=dict(row["rel_error"]), flow_median_abs_rel_error=float(row["flow_median_abs_rel_error"]),
                    reference_self_rel_error=dict(row["reference_self_rel_error"]),
                    worst_abs_rel_error=dict(row.get("worst_abs_rel_error") or
                                             {q: abs(v) for q, v in row["rel_error"].items()}),
                    draws=int(row.get("draws", 1)), distance=d)


def for_flows(dsts: Sequence[str], sizes: Sequence[float], hosts: int, dcqcn: str) -> dict[str, Any] | None:
    """The measured error to print next to a run's FCTs, as a JSON-able record; None without a table row.

    The traffic kind is ``incast`` when every flow has one destination, else ``perm``; the size is the median
    flow size. The table was measured with PFC alone (the reference has no DCQCN); a DCQCN run says so.
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
    if dcqcn != "none":
        notes.append("measured with PFC alone; the reference has no DCQCN")
    return {"nearest": m.name, "distance": round(m.distance, 3), "rel_error": m.rel_error,
            "flow_median_abs_rel_error": m.flow_median_abs_rel_error,
            "worst_abs_rel_error": m.worst_abs_rel_error, "draws": m.draws,
            "reference_self_rel_error": m.reference_self_rel_error, "notes": notes}
