"""The fleet's ranks through the one launcher (:func:`tensorfabric.transfer.launch.launch`), wherever
:func:`~tensorfabric.transfer.launch.placement` put them: inside a cluster job (torchrun, Slurm, Open MPI), in this
process, as local processes, or one per host of a lab.

Rank 0 is the authority: once it has returned its :class:`~tensorfabric.fleet.check.FleetReport` (which names any
rank that did not answer), the other ranks get a short grace to finish and are then stopped. So a hung or killed
rank costs one ``--timeout``, not the launcher's whole budget, and the hosts that answered are still reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from tensorfabric.errors import TransferError
from tensorfabric.fleet.check import FleetReport
from tensorfabric.fleet.online import FleetConfig, RoundHook, fleet_rank
from tensorfabric.fleet.schedule import schedule
from tensorfabric.transfer.launch import Placement, SpawnError, launch, post

__all__ = ["FleetLaunchError", "RankFn", "launch_budget_s", "run_fleet"]

_GRACE_S = 3.0


class RankFn(Protocol):
    """What each rank runs: :func:`~tensorfabric.fleet.online.fleet_rank` or a module-level function wrapping it
    (the tests' misbehaving ranks); ``on_round(done, total)`` after each pair round."""

    def __call__(self, rank: int, config: FleetConfig, *, on_round: RoundHook | None = None) -> Any: ...


class FleetLaunchError(TransferError):
    """Rank 0 produced no report: it raised, died, or outlived the launcher's budget."""

    display_name = "fleet"


def launch_budget_s(config: FleetConfig, ranks: int) -> float:
    """The most a launch may take before the launcher gives up on rank 0: every step rank 0 waits on is bounded
    by one timeout (rendezvous, reports, go, clock pings, each exchange of a round, figures), plus start-up."""
    rounds = len(schedule(ranks, config.pairs).rounds)
    exchanges = 2 * config.pings + 16  # per round: pings, bulk both ways, acks, barrier
    return 120.0 + config.timeout_s * (4 + ranks) + rounds * min(exchanges * config.timeout_s, 3600.0)


def run_fleet(config: FleetConfig, where: Placement, *, host_env: Mapping[str, Mapping[str, str]] | None = None,
              env: Mapping[str, str] | None = None, rank_fn: RankFn = fleet_rank, budget_s: float | None = None,
              on_round: Callable[[], None] | None = None) -> FleetReport | None:
    """Rank 0's report with ``launch_s`` in its timings (None on the other ranks of a launched job: rank 0
    reports for everyone). ``host_env`` adds variables to one lab host's rank (rehearsing a misconfigured host);
    ``on_round()`` is called as rank 0 finishes each pair round. A missing report is :class:`FleetLaunchError`."""
    started = time.monotonic()
    budget = budget_s if budget_s is not None else launch_budget_s(config, where.ranks)
    try:
        values = launch(_rank, where, args=(rank_fn, config), timeout_s=budget, grace_s=_GRACE_S, env=env,
                        host_env=host_env, authority=0,
                        on_message=None if on_round is None else lambda rank, _: on_round() if rank == 0 else None)
    except SpawnError as exc:
        cause = exc.causes.get(0) or next(iter(exc.causes.values()))
        why = f"{cause.error}: {cause.message}" if cause.error else f"rank 0 {cause.message}"
        error = FleetLaunchError(f"rank 0 gave no report: {why}", op="fleet")
        error.add_note(cause.detail)
        raise error from None
    report = values.get(0)
    if where.launched and where.rank != 0:
        return None
    assert isinstance(report, FleetReport), f"rank 0 returned {type(report).__name__}, not a FleetReport"
    missing = tuple(_host_label(m, dict(enumerate(where.hosts))) for m in report.missing)
    return replace(report, missing=missing, timings={"launch_s": time.monotonic() - started, **report.timings})


def _rank(rank: int, rank_fn: RankFn, config: FleetConfig) -> Any:
    return rank_fn(rank, config, on_round=_post_round)


def _post_round(done: int, total: int) -> None:
    post(("round", done, total))


def _host_label(label: str, hosts: Mapping[int, str]) -> str:
    """``rank 3`` as ``h3 (rank 3)`` where the placement names the rank's host."""
    head, _, number = label.partition(" ")
    if head == "rank" and number.isdecimal() and int(number) in hosts:
        return f"{hosts[int(number)]} (rank {number})"
    return label
