"""Per-host conditions in the Node Problem Detector custom-plugin convention.

NPD's custom plugin monitor runs a command per rule on every node and reads two things: the exit status (0: OK, the
condition is False; 1: NonOK, the condition is True; anything else: Unknown) and the first ``max_output_length``
characters of stdout as the condition's message (kubernetes/node-problem-detector config/custom-plugin-monitor.json,
config/plugin/*.sh). ``tensorfabric fleet check DIR --format npd --host $NODE_NAME`` is such a command: a
DaemonSet's NPD container runs it against the reports every node's doctor wrote to a shared volume.
"""

from __future__ import annotations

from collections.abc import Mapping

from tensorfabric.findings import Finding
from tensorfabric.fleet.check import FleetReport

__all__ = ["NPD_NONOK", "NPD_OK", "NPD_UNKNOWN", "npd_all", "npd_condition"]

NPD_OK, NPD_NONOK, NPD_UNKNOWN = 0, 1, 2
DEFAULT_LENGTH = 80
"""NPD's own example configurations cut the message at 80 characters."""


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:max(limit - 3, 0)] + "..."


def _match(report: FleetReport, host: str) -> str | None:
    names = [h.host for h in report.hosts]
    if host in names:
        return host
    short = host.split(".")[0]
    found = [n for n in names if n.split(".")[0] == short]
    return found[0] if len(found) == 1 else None


def npd_condition(report: FleetReport, host: str, *, max_length: int = DEFAULT_LENGTH) -> tuple[int, str]:
    """(exit status, message) for ``host``: NonOK when a fleet rule fails on it, Unknown without its report."""
    name = _match(report, host)
    if name is None:
        return NPD_UNKNOWN, _short(f"no fleet report for {host} among {len(report.hosts)} hosts", max_length)
    return _condition(report, name, report.index(), max_length)


def _condition(report: FleetReport, name: str, index: Mapping[str, list[Finding]], max_length: int
               ) -> tuple[int, str]:
    if name in report.missing:
        return NPD_UNKNOWN, _short(f"{name} did not answer the fleet run", max_length)
    bad = [f for f in index.get(name, ()) if f.severity == "error"]
    if not bad:
        return NPD_OK, _short(f"{name} agrees with {len(report.hosts) - 1} other hosts on {len(report.rules)} "
                              "checks", max_length)
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return NPD_NONOK, _short(f"{bad[0].rule}: {bad[0].message}", max_length - len(more)) + more


def npd_all(report: FleetReport, *, max_length: int = DEFAULT_LENGTH) -> tuple[int, list[str]]:
    """Every host's condition as ``host: message`` lines; NonOK when any host is."""
    lines, worst = [], NPD_OK
    index = report.index()
    for host in report.hosts:
        code, message = _condition(report, host.host, index, max_length)
        lines.append(f"{host.host}: {message}")
        worst = max(worst, code if code == NPD_NONOK else NPD_OK)
    for missing in report.missing:
        lines.append(f"{missing}: did not answer the fleet run")
        worst = NPD_NONOK
    return worst, lines
