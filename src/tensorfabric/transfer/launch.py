"""The one launcher: decide where ranks run (:func:`placement`), run them there (:func:`launch`).

Four places, one contract (``fn(rank, *args)`` picklable at module level, results by rank, one failure type):

* ``job`` -- this process is already a rank of a launched job (torchrun, Slurm ``srun``, Open MPI or any
  PMI launcher, whose variables :func:`placement` maps to torchrun's): ``fn`` runs here as that rank;
* ``inprocess`` -- a world of one rank: ``fn(0, *args)`` runs here, no process is started;
* ``local`` -- ``N`` fresh local processes (:func:`spawn`, below);
* ``lab`` -- one rank per host of a network-namespace lab, built for the run from a spec (``2x1gbit``) or one
  already running (``tensorfabric lab up NAME``): the target registered in :data:`TARGETS` as ``lab``
  (:mod:`tensorfabric.lab.launch`).

A rank may send the launcher messages while it runs (:func:`post`, e.g. rank 0's tokens as they are generated):
over its result pipe when spawned, straight to the callback in process or inside a job.

Local ranks and the one failure type (:class:`SpawnError`, each rank's :class:`RankFailure` in its ``causes``) are
:mod:`tensorfabric.transfer.spawn`'s; their names are importable from here too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tensorfabric.errors import InputError, TensorFabricError, TransferError
from tensorfabric.registry import Registry
from tensorfabric.transfer.spawn import (
    NATIVE_TAIL_BYTES,
    OnMessage,
    RankFailure,
    SpawnError,
    SpawnInputError,
    free_port,
    post,
    posting_to,
    spawn,
    spawn_error,
    stop_ranks,
    torchrun_env,
    under_torchrun,
)

__all__ = ["NATIVE_TAIL_BYTES", "TARGETS", "LaunchTarget", "Placement", "RankFailure", "SpawnError",
           "SpawnInputError", "free_port", "launch", "placement", "post", "spawn", "spawn_error",
           "stop_ranks", "torchrun_env", "under_torchrun"]

_LAUNCHERS = (("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
              ("Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
              ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
              ("MPI (PMI)", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"))
_LOCAL_SIZES = ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS")


def _job(environ: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """The launcher that started this process and the torchrun variables to add (None: no launcher did);
    InputError when one did but MASTER_ADDR/MASTER_PORT are missing.

    Launchers that are not torchrun set their own variables; torch.distributed's ``env://`` rendezvous reads
    torchrun's: Slurm ``srun`` (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), Open MPI (OMPI_COMM_WORLD_RANK,
    OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK), MPICH / Intel MPI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID).
    A Slurm or MPI job of one task is no job: ``srun -n 1 tensorfabric run --tp 4`` means four local ranks."""
    if under_torchrun(environ):
        return "torchrun", {}
    for name, rank, size, local in _LAUNCHERS[1:]:
        if environ.get(rank) and environ.get(size) and environ[size].strip() != "1":
            missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if not environ.get(k)]
            if missing:
                raise InputError(f"started by {name} but {' and '.join(missing)} not set: export MASTER_ADDR=<the "
                                 "first node's address> and MASTER_PORT=29500 (docs/fleet.md)")
            return name, {"RANK": environ[rank], "WORLD_SIZE": environ[size], "LOCAL_RANK": environ.get(local, "0")}
    return None


class LaunchTarget(Protocol):
    """Somewhere ranks run that is not this machine's processes (the lab): registered in :data:`TARGETS`."""

    def hosts(self, spec: str | None, name: str | None) -> tuple[tuple[str, ...], float]:
        """Each rank's host name and the link rate in bit/s, for ``spec`` (built for the run and named ``name``)
        or, without one, the running place called ``name``; InputError when it is malformed or unknown."""

    def run(self, fn: Callable[..., Any], args: Sequence[Any], spec: str | None, *, name: str | None,
            timeout_s: float, grace_s: float | None, env: Mapping[str, str] | None,
            host_env: Mapping[str, Mapping[str, str]] | None, authority: int | None) -> dict[int, Any]:
        """``fn(rank, *args)`` once per rank; the results by rank. A rank failure is an error with ``causes``
        (rank -> (class, message, detail, raised InputError)), ``first`` and ``detail()``: the launcher raises
        it as a :class:`SpawnError`."""


TARGETS: Registry[LaunchTarget] = Registry("launch target", lazy={"lab": "tensorfabric.lab.launch:LAB"})
"""Launch targets beyond this machine, by name (imported on first use: the lab needs pyroute2 and root)."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a job's ranks run, decided once by :func:`placement`."""

    kind: str
    """``job`` (this process is a rank of a launched job), ``inprocess``, ``local`` or ``lab``."""
    ranks: int
    """The world size."""
    local_ranks: int = 1
    """How many of the ranks share this machine (its memory and cores)."""
    rank: int = 0
    """This process's rank (``job`` only; 0 otherwise, the launcher's side)."""
    launcher: str = ""
    """The launcher that started this job (``torchrun``, ``Slurm``, ...) or the target (``lab``)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Torchrun variables a ``job`` rank adds to its environment (a Slurm or MPI job sets its own names)."""
    spec: str | None = None
    """The lab's spec (``2x1gbit``); None with a ``name``: a lab already running."""
    name: str | None = None
    """The lab's name (None: derived from the process id)."""
    hosts: tuple[str, ...] = ()
    """Each rank's host name, where the target names them (the lab's ``h0``, ``h1``, ...)."""
    rate_bps: float | None = None
    """The link rate between ranks when it is known (the lab's)."""

    @property
    def launched(self) -> bool:
        """True when this process is one rank among others: only rank 0 reports."""
        return self.kind == "job"


def placement(environ: Mapping[str, str], *, ranks: int, lab: str | None = None, lab_name: str | None = None,
              running_lab: str | None = None) -> Placement:
    """Where ``ranks`` ranks run: inside the job that launched this process when there is one (whatever
    ``ranks`` and the lab say), else one rank per host of a lab -- built from the spec ``lab`` (named
    ``lab_name``) or the running lab ``running_lab`` (``tensorfabric lab up NAME``) --, else in this process (one
    rank), else as local processes."""
    job = _job(environ)
    if job is not None:
        launcher, variables = job
        merged = {**environ, **variables}
        local = next((merged[k] for k in _LOCAL_SIZES if merged.get(k, "").isdecimal()), "1")
        return Placement("job", int(merged["WORLD_SIZE"]), int(local), int(merged["RANK"]), launcher, variables)
    if lab is not None or running_lab is not None:
        name = lab_name if lab is not None else running_lab
        hosts, rate = TARGETS.get("lab").hosts(lab, name)
        return Placement("lab", len(hosts), len(hosts), launcher="lab", spec=lab, name=name, rate_bps=rate,
                         hosts=hosts)
    if ranks < 1:
        raise TransferError(f"nprocs: {ranks!r} must be a positive integer such as 2", op="spawn")
    return Placement("inprocess" if ranks == 1 else "local", ranks, ranks)


def _here(fn: Callable[..., Any], rank: int, args: Sequence[Any], on_message: OnMessage | None) -> Any:
    with posting_to((lambda message: on_message(rank, message)) if on_message is not None else None):
        return fn(rank, *args)


def launch(fn: Callable[..., Any], where: Placement, *, args: Sequence[Any] = (), timeout_s: float = 120.0,
           grace_s: float | None = None, env: Mapping[str, str] | None = None,
           on_message: OnMessage | None = None, authority: int | None = None,
           host_env: Mapping[str, Mapping[str, str]] | None = None) -> dict[int, Any]:
    """Run ``fn(rank, *args)`` on every rank of ``where``; the results this process holds, by rank (every rank's,
    or only its own inside a launched job).

    ``fn`` and ``args`` must be picklable (a module-level function). A failure is a :class:`SpawnError` with each
    rank's cause (inside a job, what ``fn`` raised). ``env`` is added to the environment of the processes
    started; ``grace_s`` is how long the others may finish after a first failure (None: the target's default,
    2 s locally, 15 s in the lab); ``on_message(rank, message)`` receives what ranks :func:`post` (not from a
    lab's ranks). With ``authority``, that rank's result ends the launch: the others get ``grace_s`` and are then
    stopped without failing it. ``host_env`` adds variables to the rank on one named host (``where.hosts``: a
    lab's); InputError elsewhere.
    """
    if host_env and where.kind != "lab":
        raise InputError("variables for one host's rank (--host-env) need ranks on named hosts: use a lab")
    if where.kind in ("job", "inprocess"):
        if where.kind == "job":
            # torch.distributed's env:// rendezvous reads the process environment: a Slurm or MPI rank needs
            # torchrun's names there (this module is the transfer subsystem's documented place for it).
            os.environ.update(where.env)
        return {where.rank: _here(fn, where.rank, args, on_message)}
    if where.kind == "lab":
        try:
            return TARGETS.get("lab").run(fn, args, where.spec, name=where.name, timeout_s=timeout_s,
                                          grace_s=grace_s, env=env, host_env=host_env, authority=authority)
        except TensorFabricError as exc:
            raise _target_error(exc) from exc
    return dict(enumerate(spawn(fn, where.ranks, args=args, timeout_s=timeout_s, env=env,
                                grace_s=2.0 if grace_s is None else grace_s, on_message=on_message,
                                authority=authority)))


def _target_error(exc: TensorFabricError) -> TensorFabricError:
    """A target's rank failure (its ``causes``: rank -> (class, message, detail, input error)) as the launcher's
    one failure type, with the target's own line and detail; any other error unchanged."""
    causes = getattr(exc, "causes", None)
    if not causes:
        return exc
    failures = {r: RankFailure(r, *cause) for r, cause in causes.items()}
    detail_fn = getattr(exc, "detail", None)
    detail = detail_fn() if callable(detail_fn) else None
    return spawn_error(f"{len(failures)} rank(s) failed", failures, first=getattr(exc, "first", None),
                       line=str(exc), full=detail)
