"""Run one tensorfabric rank per lab host: the ``lab`` target of the one launcher.

:data:`LAB` is what :func:`tensorfabric.transfer.launch.launch` runs a ``lab`` placement with (``bench --lab
2x1gbit``, ``run --lab 2x1gbit``, disaggregated runs); its failures are :class:`LabRankError`, whose
:attr:`~LabRankError.causes` the launcher turns into its :class:`~tensorfabric.transfer.launch.SpawnError` (the
lab never imports the transfer runtime: it would bring torch into every lab host's process).

``run_lab(lab, fn, args)`` is the lab's ``spawn``: ``fn(rank, *args)`` runs in every host of ``lab`` -- a spec
(``2x1gbit``: a star lab built for the run and torn down after it) or a running :class:`~tensorfabric.lab.lab.Lab`
(``tensorfabric lab up``; the processes started in it are killed after the run) -- with ``fn`` and ``args`` pickled
into a temporary directory and read by :mod:`tensorfabric.lab.rank`; the ranks' return values come back by rank --
the same picklable-config contract as :func:`tensorfabric.transfer.launch.spawn` (a function of the main script
too), so a verb hands its ranks a config object instead of re-serialising its own flags into a command line. With
``authority`` that rank's result ends the run: the others get ``grace_s`` and are then stopped without failing it.

``run_distributed("2x1gbit", ["bench", "--op", "all_reduce"])`` brings up a star lab of two hosts on
1 Gbit/s links, starts ``<python> -m tensorfabric bench --op all_reduce`` in each host with the torchrun
environment of :func:`tensorfabric.lab.lab.rank_env` (rank ``r`` on ``h<r>``, ``MASTER_ADDR`` = h0's
address, ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME`` = the lab interface), waits for every rank, always
tears the lab down, and returns rank 0's stdout.

Failure: if a rank exits non-zero, the others get ``grace_s`` to finish or fail on their own (a peer
blocked in a collective usually fails by itself once its partner is gone), then everything is killed and a
LabError carries every rank's exit status and stderr tail. The same happens at ``timeout_s``. SIGTERM and SIGHUP
are handled like SIGINT: the ranks are killed, the lab torn down and the temporary directory removed.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tensorfabric.errors import InputError, LabError
from tensorfabric.fsutil import SCRATCH_ENV, scratch
from tensorfabric.lab.lab import Lab
from tensorfabric.lab.plan import plan_lab
from tensorfabric.lab.spec import LabSpec, parse_short_spec
from tensorfabric.signals import terminate_as_interrupt

__all__ = ["LAB", "LabRankError", "LabRankInputError", "run_distributed", "run_lab", "run_ranks", "wait_ranks"]

_TAIL_CHARS = 2000
_POLL_S = 0.05


Cause = tuple[str, str, str, bool]
"""One rank's failure: exception class ("" when it died or was killed), one-line message, detail (traceback and
stderr tail), raised InputError -- the fields of :class:`~tensorfabric.transfer.launch.RankFailure` after the rank."""


class LabRankError(LabError):
    """A rank of :func:`run_lab` failed: one line naming the first rank that raised, its exception class and
    message; every rank's status and stderr (tracebacks, native library output) in :meth:`detail`, for ``--debug``;
    each failed rank's cause in :attr:`causes` and the one the line names in :attr:`first`."""

    display_name = ""
    """The CLI prints the message alone: it already names the rank and the exception class."""

    def __init__(self, message: str, full: str, causes: Mapping[int, Cause] | None = None,
                 first: int | None = None) -> None:
        super().__init__(message)
        self.full = full
        self.causes = dict(sorted((causes or {}).items()))
        self.first = first

    def detail(self) -> str:
        return self.full


class LabRankInputError(LabRankError, InputError):
    """The first failing rank raised InputError (bad input found inside a rank): still exit 2."""


def run_distributed(spec: str, argv: list[str], timeout_s: float = 600, *, python: str | None = None,
                    env: Mapping[str, str] | None = None, state_dir: str | os.PathLike[str] | None = None,
                    grace_s: float = 15.0, name: str | None = None) -> str:
    """Run ``python -m tensorfabric <argv>`` as one rank per host of a ``NxRATE`` star lab; rank 0's stdout."""
    return run_ranks(spec, [python or sys.executable, "-m", "tensorfabric", *argv], timeout_s, env=env,
                     state_dir=state_dir, grace_s=grace_s, label="tensorfabric " + " ".join(argv), name=name)


def run_lab(lab: str | Lab, fn: Callable[..., Any], args: Sequence[Any] = (), timeout_s: float = 600, *,
            env: Mapping[str, str] | None = None, host_env: Mapping[str, Mapping[str, str]] | None = None,
            authority: int | None = None, grace_s: float = 15.0, name: str | None = None,
            state_dir: str | os.PathLike[str] | None = None, python: str | None = None) -> dict[int, Any]:
    """Run ``fn(rank, *args)`` once per host of ``lab`` (a ``NxRATE`` spec built for this run and named ``name``,
    or a running :class:`Lab`); the return values by rank.

    ``fn`` (a module-level function, the main script's too) and ``args`` must be picklable; so must the return
    values. ``host_env`` adds variables to one host's rank only (rehearsing a misconfigured host). Without
    ``authority`` any rank's failure fails the run (the others get ``grace_s`` after the first); with it, only that
    rank's missing result does, and the results of the ranks that returned come back.
    """
    if isinstance(lab, str):
        hosts, rate_bps = parse_short_spec(lab)
        with terminate_as_interrupt(), scratch("lab-job") as job, \
                Lab(hosts=hosts, rate=rate_bps, name=name, state_dir=state_dir) as built:
            return _run_job(built, lab, Path(job), fn, args, timeout_s, grace_s, authority, env, host_env, python)
    with terminate_as_interrupt(), scratch("lab-job") as job:
        try:
            return _run_job(lab, lab.name, Path(job), fn, args, timeout_s, grace_s, authority, env, host_env,
                            python)
        finally:
            lab.kill_processes()


def _run_job(lab: Lab, where: str, job: Path, fn: Callable[..., Any], args: Sequence[Any], timeout_s: float,
             grace_s: float, authority: int | None, env: Mapping[str, str] | None,
             host_env: Mapping[str, Mapping[str, str]] | None, python: str | None) -> dict[int, Any]:
    hosts = lab.hosts
    unknown = sorted(set(host_env or {}) - set(hosts))
    if unknown:
        raise InputError(f"--host-env: {', '.join(unknown)} is not a host of lab {lab.name!r} "
                         f"(hosts: {', '.join(hosts)})")
    (job / "job.pkl").write_bytes(pickle.dumps((fn, tuple(args))))
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    if getattr(fn, "__module__", None) == "__main__" and main:
        # A rank imports the launching script as its own main module first, as multiprocessing's spawn does.
        (job / "main.path").write_text(os.path.abspath(main))
    # Ranks keep their scratch files (UCX logs) in the job directory, so they go with it even if killed.
    envs = lab.rank_envs({**(os.environ if env is None else env), SCRATCH_ENV: str(job)})
    errs = [open(job / f"rank{r}.err", "w+b") for r in range(len(hosts))]  # noqa: SIM115
    try:
        procs = [lab.popen(host, [python or sys.executable, "-m", "tensorfabric.lab.rank", str(job)],
                           env={**envs[r], **(host_env or {}).get(host, {})}, stdout=errs[r], stderr=errs[r])
                 for r, host in enumerate(hosts)]
        codes = wait_ranks([p.poll for p in procs], timeout_s=timeout_s, grace_s=grace_s, authority=authority)
        lab.kill_processes()
        results = {r: pickle.loads((job / f"rank{r}.result").read_bytes()) for r in range(len(hosts))
                   if (job / f"rank{r}.result").exists()}
        label = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)!s}"
        if authority is None and any(code != 0 for code in codes):
            message = _failure_message(where, label, codes, errs, timeout_s)
            failed = LabRankError(message, message, _causes(codes, errs, timeout_s), first=_first(codes))
            raise _rank_error(where, job, range(len(hosts)), failed)
        if authority is not None and authority not in results:
            code = codes[authority]
            status = f"exit status {code}" if code is not None else "still running at the timeout"
            tail = _read(errs[authority])[-_TAIL_CHARS:].rstrip() or "(no output)"
            message = f"lab {where}: rank {authority} (host {hosts[authority]}) gave no result ({status}):\n{tail}"
            failed = LabRankError(message, message, {authority: ("", status, tail, False)}, first=authority)
            raise _rank_error(where, job, (authority,), failed)
        return results
    finally:
        for handle in errs:
            handle.close()


def run_ranks(spec: str, cmd: Sequence[str], timeout_s: float = 600, *, env: Mapping[str, str] | None = None,
              state_dir: str | os.PathLike[str] | None = None, grace_s: float = 15.0,
              label: str | None = None, name: str | None = None) -> str:
    """Run any command ``cmd`` as one rank per host of a ``NxRATE`` star lab named ``name`` (default: derived
    from the process id); rank 0's stdout (see the module docstring for failures; ``label`` names the command in
    them)."""
    hosts, rate_bps = parse_short_spec(spec)
    with terminate_as_interrupt(), scratch("lab-ranks") as tmp, \
            Lab(hosts=hosts, rate=rate_bps, name=name, state_dir=state_dir) as lab:
        outs = [open(Path(tmp, f"rank{r}.out"), "w+b") for r in range(hosts)]  # noqa: SIM115
        errs = [open(Path(tmp, f"rank{r}.err"), "w+b") for r in range(hosts)]  # noqa: SIM115
        # Ranks keep their scratch files (UCX logs) in this directory, so they go with it even if killed.
        envs = lab.rank_envs({**(os.environ if env is None else env), SCRATCH_ENV: tmp})
        try:
            procs = [lab.popen(host, cmd, env=env_r, stdout=outs[r], stderr=errs[r])
                     for r, (host, env_r) in enumerate(zip(lab.hosts, envs, strict=True))]
            codes = wait_ranks([p.poll for p in procs], timeout_s=timeout_s, grace_s=grace_s)
            lab.kill_processes()
            if any(code != 0 for code in codes):
                message = _failure_message(spec, label or " ".join(cmd), codes, errs, timeout_s)
                raise LabRankError(message, message, _causes(codes, errs, timeout_s), first=_first(codes))
            return _read(outs[0])
        finally:
            for handle in (*outs, *errs):
                handle.close()


def _rank_error(where: str, job: Path, ranks: Iterable[int], exc: LabError) -> LabError:
    """One line for the first of ``ranks`` that raised (by when its failure record was written); ``exc`` itself
    when none raised (a rank died or hung: its status in the message is all there is)."""
    raised = []
    for rank in ranks:
        path = job / f"rank{rank}.failure"
        try:
            raised.append((path.stat().st_mtime_ns, rank, pickle.loads(path.read_bytes())))
        except (OSError, pickle.UnpicklingError, EOFError):
            continue
    if not raised:
        return exc
    _, rank, (error, message, input_error) = min(raised)
    others = len(raised) - 1
    text = f"lab {where}: rank {rank} failed: {error}: {message}"
    if others:
        text += f" ({others} other rank{'s' if others > 1 else ''} also raised)"
    causes = dict(exc.causes) if isinstance(exc, LabRankError) else {}
    for _, r, (err, msg, bad) in raised:
        causes[r] = (err, msg, causes[r][2] if r in causes else "", bad)
    return (LabRankInputError if input_error else LabRankError)(text, str(exc), causes, first=rank)


def wait_ranks(polls: Sequence[Callable[[], int | None]], *, timeout_s: float, grace_s: float,
               authority: int | None = None, clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> list[int | None]:
    """Wait until every rank exits, the first failure (or, with ``authority``, that rank's exit) plus
    ``grace_s``, or ``timeout_s``; exit codes (``None`` for a rank still running when the wait ended)."""
    deadline = clock() + timeout_s
    graced = False
    while True:
        codes = [poll() for poll in polls]
        if all(code is not None for code in codes):
            return codes
        ended = codes[authority] is not None if authority is not None else \
            any(code not in (None, 0) for code in codes)
        if ended and not graced:  # only the first failure starts the grace period
            deadline = min(deadline, clock() + grace_s)
            graced = True
        if clock() >= deadline:
            return codes
        sleep(_POLL_S)


def _read(handle: IO[bytes]) -> str:
    handle.flush()
    handle.seek(0)
    return handle.read().decode("utf-8", errors="replace")


def _causes(codes: Sequence[int | None], errs: Sequence[IO[bytes]], timeout_s: float) -> dict[int, Cause]:
    """Each failed or killed rank's status, with its stderr tail as the detail."""
    return {rank: ("", f"was still running after {timeout_s:g}s or the first failure, killed" if code is None
                   else f"exited with status {code}", _read(err)[-_TAIL_CHARS:], False)
            for rank, (code, err) in enumerate(zip(codes, errs, strict=True)) if code != 0}


def _first(codes: Sequence[int | None]) -> int | None:
    return next((rank for rank, code in enumerate(codes) if code not in (None, 0)), None)


class _LabTarget:
    """The ``lab`` launch target: a ``NxRATE`` spec (a lab built for the run) or a running lab's name; one rank
    per host."""

    def hosts(self, spec: str | None, name: str | None) -> tuple[tuple[str, ...], float]:
        if spec is not None:
            hosts, rate_bps = parse_short_spec(spec)
            return plan_lab(LabSpec.create(name="shape", hosts=hosts, rate=rate_bps)).hosts, rate_bps
        if name is None:
            raise InputError("a lab run needs a spec such as 2x1gbit or the name of a running lab")
        lab = Lab.attach(name)
        return lab.hosts, lab.spec.rate_bps

    def run(self, fn: Callable[..., Any], args: Sequence[Any], spec: str | None, *, name: str | None,
            timeout_s: float, grace_s: float | None, env: Mapping[str, str] | None,
            host_env: Mapping[str, Mapping[str, str]] | None, authority: int | None) -> dict[int, Any]:
        lab: str | Lab = spec if spec is not None else Lab.attach(name or "")
        return run_lab(lab, fn, args, timeout_s, env=None if env is None else {**os.environ, **env},
                       host_env=host_env, authority=authority, grace_s=15.0 if grace_s is None else grace_s,
                       name=name)


LAB = _LabTarget()
"""Registered as ``lab`` in :data:`tensorfabric.transfer.launch.TARGETS`."""


def _failure_message(where: str, label: str, codes: Sequence[int | None], errs: Sequence[IO[bytes]],
                     timeout_s: float) -> str:
    lines = [f"lab {where}: '{label}' failed"]
    for rank, (code, err) in enumerate(zip(codes, errs, strict=True)):
        status = f"still running after {timeout_s:g}s or the first failure, killed" if code is None \
            else f"exit status {code}"
        tail = _read(err)[-_TAIL_CHARS:].rstrip() or "(no stderr)"
        lines.append(f"--- rank {rank} ({status}) ---\n{tail}")
    return "\n".join(lines)
