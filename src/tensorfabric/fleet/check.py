"""Run the fleet rules over host reports (and pair figures) and keep everything the outputs need.

:func:`check_fleet` is what both modes end in: ``fleet check FILE|DIR`` over collected ``doctor --json`` reports,
and the online ``tensorfabric fleet`` once rank 0 has gathered the reports and the pair figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tensorfabric.findings import Finding, exit_code_for, sort_key
from tensorfabric.fleet.facts import HostReport
from tensorfabric.fleet.pairs import HostFigures, PairResult, Thresholds, host_figures
from tensorfabric.fleet.reports import ReportSet
from tensorfabric.fleet.rules import RULES, FleetContext
from tensorfabric.fleet.rules.config import shared_doctor_rules
from tensorfabric.fleet.schedule import Schedule

__all__ = ["FleetReport", "HostState", "check_fleet"]

HostState = Literal["ok", "warning", "error", "missing"]
_CELL_RANK = {"-": 0, "ok": 0, "warn": 1, "link": 2, "FAIL": 3}


@dataclass(frozen=True, slots=True)
class FleetReport:
    hosts: tuple[HostReport, ...]
    findings: tuple[Finding, ...]
    rules: tuple[tuple[str, str], ...]
    """(rule id, table column) of every rule that ran, in registry order."""
    pairs: tuple[PairResult, ...] = ()
    schedule: Schedule | None = None
    read: ReportSet | None = None
    """What ``fleet check`` read (None for an online run)."""
    missing: tuple[str, ...] = ()
    """Ranks or hosts that did not answer (online)."""
    error: str | None = None
    """Why an online run stopped early (a named timeout or failure), with the hosts that answered still reported."""
    timings: Mapping[str, float] = field(default_factory=dict)
    line_rate_bps: float | None = None
    thresholds: Thresholds = Thresholds()
    engine: str = ""

    @property
    def exit_code(self) -> int:
        return 1 if self.error or self.missing else exit_code_for(self.findings)

    @property
    def shared_doctor_rules(self) -> Mapping[str, int]:
        return shared_doctor_rules(self.hosts)

    def figures(self) -> dict[str, HostFigures]:
        return host_figures(self.pairs)

    def index(self) -> dict[str, list[Finding]]:
        """Host -> the findings about it (built once per output: 10,000 hosts x every finding is too slow)."""
        out: dict[str, list[Finding]] = {}
        for f in self.findings:
            for host in f.evidence.get("hosts", ()):
                out.setdefault(host, []).append(f)
        return out

    def host_state(self, host: str, index: Mapping[str, list[Finding]] | None = None) -> HostState:
        if host in self.missing:
            return "missing"
        found = (index if index is not None else self.index()).get(host, ())
        if any(f.severity == "error" for f in found):
            return "error"
        return "warning" if any(f.severity == "warning" for f in found) else "ok"

    def cells(self, host: str, index: Mapping[str, list[Finding]] | None = None,
              measured: set[str] | None = None) -> dict[str, str]:
        """Column -> ``ok`` / ``warn`` / ``link`` (only a link of this host is bad) / ``FAIL`` for one host; ``-``
        where nothing was measured for it (an offline check has no pairs and no clock offsets)."""
        out = {column: "ok" for _, column in self.rules}
        column_of = dict(self.rules)
        measured = measured if measured is not None else {h for p in self.pairs for h in (p.a, p.b)}
        if "fleet.datapath" in column_of and host not in measured:
            out[column_of["fleet.datapath"]] = "-"
        if "fleet.clock" in column_of and not self.pairs and self.schedule is None:
            out[column_of["fleet.clock"]] = "-"
        for f in (index if index is not None else self.index()).get(host, ()):
            if f.severity == "info":
                continue
            column = column_of.get(f.rule, f.rule)
            cell = "link" if f.evidence.get("kind") == "link" else ("FAIL" if f.severity == "error" else "warn")
            if _CELL_RANK[cell] > _CELL_RANK[out.get(column, "ok")]:
                out[column] = cell
        return out

    def for_host(self, host: str) -> list[Finding]:
        return list(self.index().get(host, ()))

    def to_dict(self) -> dict[str, Any]:
        index = self.index()
        measured = {h for p in self.pairs for h in (p.a, p.b)}
        out: dict[str, Any] = {
            # Per host its state and the checks it did not pass; a check not listed passed (or measured nothing).
            "hosts": [{**h.to_dict(), "state": self.host_state(h.host, index),
                       "failed": {c: v for c, v in self.cells(h.host, index, measured).items() if v not in ("ok", "-")}}
                      for h in self.hosts],
            "findings": [f.to_dict() for f in self.findings],
            "rules": [{"rule": r, "column": c} for r, c in self.rules],
            "shared_doctor_findings": dict(self.shared_doctor_rules),
            "missing": list(self.missing), "error": self.error, "timings_s": dict(self.timings),
            "line_rate_bps": self.line_rate_bps, "thresholds": self.thresholds.to_dict(),
        }
        if self.pairs or self.schedule is not None:
            out["pairs"] = [p.to_dict() for p in self.pairs]
            out["per_host"] = {h: f.to_dict() for h, f in self.figures().items()}
            out["schedule"] = self.schedule.to_dict() if self.schedule else None
            out["engine"] = self.engine
        if self.read is not None:
            out["read"] = self.read.to_dict()
        return out


def check_fleet(hosts: Sequence[HostReport], *, pairs: Sequence[PairResult] = (), line_rate_bps: float | None = None,
                thresholds: Thresholds = Thresholds(), rules: Sequence[str] | None = None,
                schedule: Schedule | None = None, read: ReportSet | None = None, missing: Sequence[str] = (),
                error: str | None = None, timings: Mapping[str, float] | None = None,
                engine: str = "") -> FleetReport:
    """Every fleet rule (or the ``rules`` named) over ``hosts``; findings most severe first."""
    ctx = FleetContext(tuple(hosts), tuple(pairs), line_rate_bps, thresholds)
    chosen = [RULES.get(name) for name in (rules if rules is not None else RULES.names())]
    findings = [f for rule in chosen for f in rule.check(ctx)]
    return FleetReport(tuple(hosts), tuple(sorted(findings, key=sort_key)), tuple((r.name, r.column) for r in chosen),
                       tuple(pairs), schedule, read, tuple(missing), error, dict(timings or {}), line_rate_bps,
                       thresholds, engine)
