"""Start the fleet's ranks: under a cluster launcher (torchrun, Slurm, Open MPI), as local processes, or one per
host of a lab; and wait for rank 0's report.

Rank 0 is the authority: once it has returned its :class:`~tensorfabric.fleet.check.FleetReport` (which names any
rank that did not answer), the other ranks get a short grace to finish and are then stopped. So a hung or killed
rank costs one ``--timeout``, not the launcher's whole budget, and the hosts that answered are still reported.

Launchers that are not torchrun set their own variables; :func:`rank_variables` (the one launcher's,
:mod:`tensorfabric.transfer.launch`) maps them to the torchrun names that torch.distributed's ``env://``
rendezvous reads:

    Slurm ``srun``      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (MASTER_ADDR/MASTER_PORT must be exported)
    Open MPI            OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
    MPICH / Intel MPI   PMI_RANK, PMI_SIZE (MPI_LOCALRANKID)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from tensorfabric.errors import InputError, TransferError
from tensorfabric.fleet.check import FleetReport
from tensorfabric.fleet.online import LAB_HOST_ENV, FleetConfig, fleet_rank
from tensorfabric.fleet.schedule import schedule
from tensorfabric.signals import terminate_as_interrupt
from tensorfabric.transfer.launch import Placement, SpawnError, launch
from tensorfabric.transfer.launch import rank_variables as rank_variables

__all__ = ["FleetLaunchError", "launch_budget_s", "rank_variables", "run_in_lab", "run_local"]

_GRACE_S = 3.0


RankFn = Callable[[int, FleetConfig], Any]


class FleetLaunchError(TransferError):
    """Rank 0 produced no report: it raised, died, or outlived the launcher's budget."""

    display_name = "fleet"


def launch_budget_s(config: FleetConfig, ranks: int) -> float:
    """The most a launch may take before the launcher gives up on rank 0: every step rank 0 waits on is bounded
    by one timeout (rendezvous, reports, go, clock pings, each exchange of a round, figures), plus start-up."""
    rounds = len(schedule(ranks, config.pairs).rounds)
    exchanges = 2 * config.pings + 16  # per round: pings, bulk both ways, acks, barrier
    return 120.0 + config.timeout_s * (4 + ranks) + rounds * min(exchanges * config.timeout_s, 3600.0)


# -- local processes ----------------------------------------------------------------------------------------
def run_local(config: FleetConfig, nprocs: int, *, env: Mapping[str, str] | None = None,
              budget_s: float | None = None, rank_fn: RankFn = fleet_rank) -> FleetReport:
    """``nprocs`` ranks as local processes (a rehearsal on one machine: every host is this one). ``rank_fn`` (a
    module-level function, :func:`fleet_rank` or one that wraps it) is what each process runs."""
    if nprocs < 1:
        raise InputError(f"--nproc: {nprocs} must be at least 1")
    budget = budget_s if budget_s is not None else launch_budget_s(config, nprocs)
    started = time.monotonic()
    try:
        # Rank 0 is the authority: its report ends the launch, whatever became of the others.
        values = launch(rank_fn, Placement("local", nprocs, nprocs), args=(config,), timeout_s=budget,
                        grace_s=_GRACE_S, env=env, authority=0)
    except SpawnError as exc:
        cause = exc.causes.get(0) or next(iter(exc.causes.values()))
        why = f"{cause.error}: {cause.message}" if cause.error else f"rank 0 {cause.message}"
        error = FleetLaunchError(f"rank 0 gave no report: {why}", op="fleet")
        error.add_note(cause.detail)
        raise error from None
    return _finish(values[0], started)


def _finish(report: Any, started: float) -> FleetReport:
    assert isinstance(report, FleetReport), f"rank 0 returned {type(report).__name__}, not a FleetReport"
    return replace(report, timings={"launch_s": time.monotonic() - started, **report.timings})


# -- lab hosts ----------------------------------------------------------------------------------------------
def run_in_lab(config: FleetConfig, *, lab_name: str | None = None, spec: str | None = None,
               host_env: Mapping[str, Mapping[str, str]] | None = None,
               state_dir: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
               python: str | None = None) -> FleetReport:
    """One rank per host of a lab: the existing lab ``lab_name`` (``tensorfabric lab up``), or a fresh ``spec``
    (``8x1gbit``) built for this run and torn down after it. ``host_env`` adds variables to one host's rank only
    (rehearsing a misconfigured host)."""
    from tensorfabric.lab.lab import Lab
    from tensorfabric.lab.spec import parse_short_spec

    if spec is None and lab_name is None:
        raise InputError("a lab run needs --lab SPEC (a fresh lab) or --lab-name NAME (an existing one)")
    started = time.monotonic()
    with terminate_as_interrupt():
        if spec is not None:
            hosts, rate = parse_short_spec(spec)
            lab = Lab(hosts=hosts, rate=rate, name=lab_name, state_dir=state_dir)
            lab.up()
        else:
            assert lab_name is not None
            lab = Lab.attach(lab_name, state_dir=state_dir)
        bring_up = time.monotonic() - started
        try:
            unknown = sorted(set(host_env or {}) - set(lab.hosts))
            if unknown:
                raise InputError(f"--host-env: {', '.join(unknown)} is not a host of lab {lab.name!r} "
                                 f"(hosts: {', '.join(lab.hosts)})")
            return _lab_ranks(lab, config, host_env or {}, env, python, started, bring_up)
        finally:
            if spec is not None:
                lab.down()
            else:
                lab.kill_processes()


def _lab_ranks(lab: Any, config: FleetConfig, host_env: Mapping[str, Mapping[str, str]],
               env: Mapping[str, str] | None, python: str | None, started: float, bring_up: float) -> FleetReport:
    from tensorfabric.lab.launch import run_in

    budget = launch_budget_s(config, len(lab.hosts))
    envs = {host: {**host_env.get(host, {}), LAB_HOST_ENV: host} for host in lab.hosts}
    # Rank 0 is the authority, as for local ranks: its report ends the launch.
    results = run_in(lab, fleet_rank, (config,), timeout_s=budget, grace_s=_GRACE_S, env=env, host_env=envs,
                     python=python)
    report = results[0]
    assert isinstance(report, FleetReport), f"rank 0 returned {type(report).__name__}"
    hosts = dict(enumerate(lab.hosts))
    missing = tuple(_lab_name(m, hosts) for m in report.missing)
    timings = {"bring_up_s": bring_up, "launch_s": time.monotonic() - started - bring_up, **report.timings}
    return replace(report, missing=missing, timings=timings)


def _lab_name(label: str, hosts: Mapping[int, str]) -> str:
    head, _, number = label.partition(" ")
    if head == "rank" and number.isdecimal() and int(number) in hosts:
        return f"{hosts[int(number)]} (rank {number})"
    return label

