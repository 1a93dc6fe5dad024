"""Start the fleet's ranks: under a cluster launcher (torchrun, Slurm, Open MPI), as local processes, or one per
host of a lab; and wait for rank 0's report.

Rank 0 is the authority: once it has returned its :class:`~tensorfabric.fleet.check.FleetReport` (which names any
rank that did not answer), the other ranks get a short grace to finish and are then stopped. So a hung or killed
rank costs one ``--timeout``, not the launcher's whole budget, and the hosts that answered are still reported.

Launchers that are not torchrun set their own variables; :func:`rank_variables` maps them to the torchrun names
that torch.distributed's ``env://`` rendezvous reads:

    Slurm ``srun``      SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (MASTER_ADDR/MASTER_PORT must be exported)
    Open MPI            OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
    MPICH / Intel MPI   PMI_RANK, PMI_SIZE (MPI_LOCALRANKID)
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from tensorfabric.errors import InputError, LabError, TransferError
from tensorfabric.fleet.check import FleetReport
from tensorfabric.fleet.online import LAB_HOST_ENV, FleetConfig, fleet_rank
from tensorfabric.fleet.schedule import schedule
from tensorfabric.signals import terminate_as_interrupt
from tensorfabric.transfer.launch import free_port, stop_ranks, torchrun_env, under_torchrun

__all__ = ["FleetLaunchError", "launch_budget_s", "rank_variables", "run_in_lab", "run_local"]

_LAUNCHERS = (("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
              ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
              ("MPI (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"))
_GRACE_S = 3.0
_POLL_S = 0.05


RankFn = Callable[[int, FleetConfig], Any]


class FleetLaunchError(TransferError):
    """Rank 0 produced no report: it raised, died, or outlived the launcher's budget."""

    display_name = "fleet"


def rank_variables(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The torchrun variables this process should add (``{}`` under torchrun), or None when no launcher started
    it. InputError when a launcher did but MASTER_ADDR/MASTER_PORT are missing."""
    if under_torchrun(environ):
        return {}
    for name, rank, size, local in _LAUNCHERS:
        if environ.get(rank) and environ.get(size):
            missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(k)]
            if missing:
                raise InputError(f"started by {name} but {' and '.join(missing)} not set: export MASTER_ADDR=<the "
                                 "first node's address> and MASTER_PORT=29500 (docs/fleet.md)")
            return {"RANK": environ[rank], "WORLD_SIZE": environ[size], "LOCAL_RANK": environ.get(local, "0")}
    return None


def launch_budget_s(config: FleetConfig, ranks: int) -> float:
    """The most a launch may take before the launcher gives up on rank 0: every step rank 0 waits on is bounded
    by one timeout (rendezvous, reports, go, clock pings, each exchange of a round, figures), plus start-up."""
    rounds = len(schedule(ranks, config.pairs).rounds)
    exchanges = 2 * config.pings + 16  # per round: pings, bulk both ways, acks, barrier
    return 120.0 + config.timeout_s * (4 + ranks) + rounds * min(exchanges * config.timeout_s, 3600.0)


# -- local processes ----------------------------------------------------------------------------------------
def _local_child(rank: int, config: FleetConfig, env: dict[str, str], results: Any, rank_fn: RankFn) -> None:
    os.environ.update(env)
    try:
        payload = pickle.dumps(rank_fn(rank, config))
    except BaseException as exc:  # noqa: BLE001 -- every failure goes back to the parent
        results.put((rank, False, f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}",
                     traceback.format_exc()))
        return
    results.put((rank, True, payload, ""))


def run_local(config: FleetConfig, nprocs: int, *, env: Mapping[str, str] | None = None,
              budget_s: float | None = None, rank_fn: RankFn = fleet_rank) -> FleetReport:
    """``nprocs`` ranks as local processes (a rehearsal on one machine: every host is this one). ``rank_fn`` (a
    module-level function, :func:`fleet_rank` or one that wraps it) is what each process runs."""
    if nprocs < 1:
        raise InputError(f"--nproc: {nprocs} must be at least 1")
    budget = budget_s if budget_s is not None else launch_budget_s(config, nprocs)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    started = time.monotonic()
    with terminate_as_interrupt():
        procs = [ctx.Process(target=_local_child, name=f"tensorfabric-fleet{r}", daemon=True,
                             args=(r, config, torchrun_env(r, nprocs, port, env, parent=os.environ), results,
                                   rank_fn))
                 for r in range(nprocs)]
        try:
            for proc in procs:
                proc.start()
            outcome = _wait_rank0(procs, results, started + budget)
        finally:
            stop_ranks(procs)
            results.close()
    return _finish(outcome, started, budget, {})


def _wait_rank0(procs: list[Any], results: Any, deadline: float) -> tuple[bool, Any, str]:
    """(ok, payload, detail) of rank 0; (False, None, why) when it died or the deadline passed."""
    while time.monotonic() < deadline:
        try:
            rank, ok, payload, detail = results.get(timeout=_POLL_S)
        except queue.Empty:
            if procs[0].exitcode is not None:
                try:
                    rank, ok, payload, detail = results.get(timeout=_GRACE_S)
                except queue.Empty:
                    return False, None, f"rank 0 exited with code {procs[0].exitcode} without a report"
            else:
                continue
        if rank == 0:
            return ok, payload, detail
    return False, None, "rank 0 produced no report within the launch budget"


def _finish(outcome: tuple[bool, Any, str], started: float, budget: float, timings: Mapping[str, float]
            ) -> FleetReport:
    ok, payload, detail = outcome
    if not ok:
        message = payload if isinstance(payload, str) else detail
        error = FleetLaunchError(f"rank 0 gave no report: {message}", op="fleet")
        error.add_note(detail if isinstance(payload, str) else "")
        raise error
    report = pickle.loads(payload) if isinstance(payload, bytes) else payload
    assert isinstance(report, FleetReport), f"rank 0 returned {type(report).__name__}, not a FleetReport"
    return replace(report, timings={**timings, "launch_s": time.monotonic() - started, **report.timings})


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
    budget = launch_budget_s(config, len(lab.hosts))
    with tempfile.TemporaryDirectory(prefix="tf-fleet-") as job:
        Path(job, "job.pkl").write_bytes(pickle.dumps((fleet_rank, (config,))))
        envs = lab.rank_envs({**(os.environ if env is None else env)})
        errs = [open(Path(job, f"rank{r}.err"), "w+b") for r in range(len(lab.hosts))]  # noqa: SIM115
        try:
            procs = [lab.popen(host, [python or sys.executable, "-m", "tensorfabric.lab.rank", job],
                               env={**envs[r], **host_env.get(host, {}), LAB_HOST_ENV: host},
                               stdout=errs[r], stderr=errs[r])
                     for r, host in enumerate(lab.hosts)]
            deadline = started + bring_up + budget
            while procs[0].poll() is None and time.monotonic() < deadline:
                time.sleep(_POLL_S)
            until = time.monotonic() + _GRACE_S
            while any(p.poll() is None for p in procs[1:]) and time.monotonic() < until:
                time.sleep(_POLL_S)
            lab.kill_processes()
            result = Path(job, "rank0.result")
            if not result.exists():
                code = procs[0].returncode
                status = f"exit status {code}" if code is not None else "still running at the launch budget"
                raise LabError(f"lab {lab.name!r}: rank 0 (host {lab.hosts[0]}) gave no report ({status}):\n"
                               + _tail(errs[0]))
            report = pickle.loads(result.read_bytes())
            assert isinstance(report, FleetReport), f"rank 0 returned {type(report).__name__}"
        finally:
            for handle in errs:
                handle.close()
    hosts = dict(enumerate(lab.hosts))
    missing = tuple(_lab_name(m, hosts) for m in report.missing)
    timings = {"bring_up_s": bring_up, "launch_s": time.monotonic() - started - bring_up, **report.timings}
    return replace(report, missing=missing, timings=timings)


def _lab_name(label: str, hosts: Mapping[int, str]) -> str:
    head, _, number = label.partition(" ")
    if head == "rank" and number.isdecimal() and int(number) in hosts:
        return f"{hosts[int(number)]} (rank {number})"
    return label


def _tail(handle: Any, chars: int = 2000) -> str:
    handle.flush()
    handle.seek(0)
    return handle.read().decode("utf-8", errors="replace")[-chars:].rstrip() or "(no output)"
