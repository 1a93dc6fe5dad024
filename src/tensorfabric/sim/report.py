"""What ``tensorfabric simulate`` reports: one run's result with the measured model error next to it.

:class:`SimulateReport` is the verb's typed report; :meth:`SimulateReport.to_json` is the ``--json`` document
(the run's :meth:`SimResult.to_dict` plus ``reference_error``), and the human renderer in ``cli/simulate.py``
reads the same record. The counter stream a run writes (``--counters``) is made here too, so the CLI only
chooses where the bytes go.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tensorfabric.jsonable import json_default
from tensorfabric.samples import Sample
from tensorfabric.sim.accuracy import for_flows
from tensorfabric.sim.counters import counter_samples
from tensorfabric.sim.results import SimResult

__all__ = ["SimulateReport", "counter_lines", "counter_stream", "simulate_report"]


@dataclass(frozen=True)
class SimulateReport:
    result: SimResult
    reference_error: dict[str, Any] | None
    """The packet-level reference's measured error on the nearest scenario (None: no flow finished): htsim's,
    PFC alone; for a DCQCN run with ECN on, its ``dcqcn`` key holds ns-3 HPCC's for that DCQCN form."""

    @property
    def exit_code(self) -> int:
        """1 when bytes were dropped in a run meant to be lossless (PFC on), else 0."""
        return 1 if self.result.drops_bytes > 0 and self.result.params.get("pfc", True) else 0

    @property
    def completion_s(self) -> tuple[float, ...]:
        """The finished flows' completion times, shortest first."""
        return tuple(sorted(f.fct_s for f in self.result.flows if f.fct_s is not None))

    def to_dict(self) -> dict[str, Any]:
        return {**self.result.to_dict(), "reference_error": self.reference_error}

    def to_json(self) -> str:
        """The ``--json`` document, newline-terminated, keys in the contract's order."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=json_default) + "\n"


def simulate_report(result: SimResult) -> SimulateReport:
    """The report of one run: its result and the model error measured on the nearest reference scenario."""
    done = [f for f in result.flows if f.fct_s is not None]
    p = result.params
    ecn = {k: float(p[k]) for k in ("kmin_bytes", "kmax_bytes", "pmax") if p.get(k) is not None}
    error = for_flows([f.dst for f in done], [f.bytes for f in done], len(result.network.fabric.hosts),
                      str(p.get("dcqcn", "none")), ecn=ecn or None, ecn_enabled=bool(p.get("ecn", True)))
    return SimulateReport(result=result, reference_error=error)


def counter_stream(result: SimResult) -> Iterator[Sample]:
    """The run's counter snapshots as Sample records, in time order (what ``monitor --source replay`` reads)."""
    cfg = result.params
    return counter_samples(result.network, result.trace, priority=int(cfg["priority"]), mtu=int(cfg["mtu"]),
                           lossless=bool(cfg.get("pfc", True)))


def counter_lines(result: SimResult) -> str:
    """The counter stream as JSON lines, newline-terminated (empty when the run recorded none)."""
    lines = [s.to_json() for s in counter_stream(result)]
    return "\n".join(lines) + ("\n" if lines else "")
