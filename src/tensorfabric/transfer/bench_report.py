"""What ``tensorfabric bench`` reports: one sweep's result, and the uncompressed sweep beside it for a plot.

:class:`BenchReport` is the verb's typed report; :meth:`BenchReport.to_json` is the ``--json`` document (the
sweep's :meth:`~tensorfabric.transfer.bench.BenchResult.to_dict`). The human form is the nccl-tests table,
written by :mod:`tensorfabric.host.nccl_tests_table` (the one formatter, the one ``doctor`` reads back).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tensorfabric.jsonable import json_default
from tensorfabric.transfer.bench import BenchConfig, BenchResult

__all__ = ["BenchReport", "plot_busbw"]


@dataclass(frozen=True)
class BenchReport:
    result: BenchResult
    config: BenchConfig
    """The sweep asked for (the table's header names it)."""
    baseline: BenchResult | None = None
    """The same sweep uncompressed, on the same ranks (measured only for a codec run's ``--plot``)."""
    streamed: bool = False
    """The header and rows were printed as they were measured; only the footer is left to show."""

    @property
    def exit_code(self) -> int:
        """1 when any checked result was wrong (nccl-tests' ``#wrong``), else 0."""
        return 1 if self.result.wrong else 0

    @property
    def curves(self) -> tuple[BenchResult, ...]:
        """The sweeps a plot overlays, the measured one first."""
        return (self.result,) if self.baseline is None else (self.result, self.baseline)

    def to_dict(self) -> dict[str, Any]:
        return self.result.to_dict()

    def to_json(self) -> str:
        """The ``--json`` document, newline-terminated, keys in the contract's order."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=json_default) + "\n"


def plot_busbw(path: str, report: BenchReport) -> None:
    """busbw against size for each curve, written to ``path`` (PNG) atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tensorfabric.fsutil import atomic_write_figure

    fig, ax = plt.subplots(figsize=(7, 4))
    for res in report.curves:
        label = res.codec if res.codec != "none" else "uncompressed"
        ax.plot([r.size for r in res.rows], [r.busbw for r in res.rows], marker="o", ms=3, label=label)
    first = report.result
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{first.op}, {first.nranks} ranks, {first.backend}, {first.dtype}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    atomic_write_figure(path, fig, dpi=110, bbox_inches="tight")
