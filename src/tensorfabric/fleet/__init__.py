"""Many hosts at once: gather doctor reports, compare them across hosts, test the data path pair by pair.

* :func:`check_fleet` runs the fleet rules (:data:`RULES`) over :class:`HostReport` records -- from
  :func:`read_reports` (``fleet check FILE|DIR``) or gathered online by :func:`fleet_rank`.
* :func:`round_robin` / :func:`ring` / :func:`schedule`: which pairs the data-path test measures, in which rounds.
* :func:`run_fleet`: the ranks through the one launcher, wherever :func:`tensorfabric.transfer.launch.placement`
  puts them (inside a torchrun, Slurm or Open MPI job, in this process, as local processes, or in a lab).
"""

from __future__ import annotations

from tensorfabric.fleet.check import FleetReport, check_fleet
from tensorfabric.fleet.facts import HostReport, host_facts
from tensorfabric.fleet.pairs import PairResult, Thresholds
from tensorfabric.fleet.reports import ReportSet, read_report_text, read_reports
from tensorfabric.fleet.rules import RULES
from tensorfabric.fleet.schedule import PAIR_MODES, Schedule, ring, round_robin, schedule

__all__ = ["PAIR_MODES", "RULES", "FleetReport", "HostReport", "PairResult", "ReportSet", "Schedule", "Thresholds",
           "check_fleet", "host_facts", "read_report_text", "read_reports", "ring", "round_robin", "schedule"]


def __getattr__(name: str) -> object:
    # The online pieces import the transfer runtime (and torch when a rank starts): only on use.
    if name in ("fleet_rank", "FleetConfig"):
        from tensorfabric.fleet import online

        return getattr(online, name)
    if name == "run_fleet":
        from tensorfabric.fleet import launch

        return getattr(launch, name)
    raise AttributeError(name)
