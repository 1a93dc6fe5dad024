"""Launch N local ranks with a torchrun-style environment and collect their results.

``spawn(fn, nprocs)`` is what ``tensorfabric bench --nproc``, ``tensorfabric run`` and the distributed tests use
instead of torchrun: each rank is a fresh interpreter (multiprocessing *spawn*, never fork, so no inherited
torch threads or locks) that sees exactly the variables torchrun would set::

    MASTER_ADDR=127.0.0.1  MASTER_PORT=<free port>  RANK=r  WORLD_SIZE=n  LOCAL_RANK=r  LOCAL_WORLD_SIZE=n
    OMP_NUM_THREADS=1 (only when the parent has none, as torchrun does for n > 1)

plus whatever ``env`` adds. The child writes these into its own ``os.environ`` because torch.distributed's
``env://`` rendezvous and NCCL read the process environment; this module is the documented place where the
transfer subsystem does that.

SIGTERM and SIGHUP to the launching process are handled like SIGINT (:mod:`tensorfabric.signals`): every rank is
stopped and reaped and the temporary directory removed before :class:`~tensorfabric.errors.Interrupted` propagates.

Failure contract: if any rank raises, exits without a result or the whole launch passes ``timeout_s``, every
rank is stopped and :class:`SpawnError` (a :class:`TransferError`) is raised with each rank's traceback. After
the first failure the other ranks get ``grace_s`` to finish or fail on their own (a rank blocked in a
collective with a dead peer usually raises its own TransferError within its process-group timeout), so the
error shows the whole story, not just the first casualty. Ranks still running after that are asked to dump
their Python stacks (faulthandler on SIGUSR1) before they are killed.
"""

from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import pickle
import queue
import signal
import socket
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tensorfabric.errors import TransferError
from tensorfabric.fsutil import SCRATCH_ENV
from tensorfabric.signals import terminate_as_interrupt

__all__ = ["SpawnError", "free_port", "spawn", "torchrun_env", "under_torchrun"]

_TORCHRUN_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# Seconds a rank that exited cleanly may take before its result shows up on the queue (the queue's feeder
# thread flushes on exit, but the parent can observe the exit code first).
_REPORT_LAG_S = 3.0


class SpawnError(TransferError):
    """One or more spawned ranks failed. ``failures`` maps rank -> traceback (or a description)."""

    def __init__(self, message: str, failures: Mapping[int, str], results: Mapping[int, Any] | None = None) -> None:
        self.failures = dict(sorted(failures.items()))
        self.results = dict(sorted((results or {}).items()))
        """Return values of the ranks that did finish (rank -> value)."""
        detail = "\n".join(f"--- rank {r} ---\n{text.rstrip()}" for r, text in self.failures.items())
        first = min(self.failures) if self.failures else None
        super().__init__(f"{message}\n{detail}" if detail else message, op="spawn", peer=first)

    def root_cause(self) -> str | None:
        """The exception line of the lowest rank that raised (``TransferError: ...``), or None when no
        rank raised (they died or hung). What a CLI shows in one line."""
        for text in self.failures.values():
            lines = [line for line in text.strip().splitlines() if line.strip()]
            if lines and text.startswith("Traceback"):
                return lines[-1].strip()
        return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (the OS picks it; a small race is inherent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def under_torchrun(environ: Mapping[str, str]) -> bool:
    """True when ``environ`` already describes a rank of a launched job (torchrun, a lab host, ``spawn``)."""
    return all(environ.get(key) for key in _TORCHRUN_KEYS)


def torchrun_env(rank: int, nprocs: int, master_port: int, extra: Mapping[str, str] | None = None,
                 *, parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables rank ``rank`` of ``nprocs`` local ranks gets (see the module docstring)."""
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "RANK": str(rank),
        "WORLD_SIZE": str(nprocs),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(nprocs),
    }
    if nprocs > 1 and "OMP_NUM_THREADS" not in (parent or {}):
        # Same default as torchrun: n ranks each spinning up all cores' worth of threads thrash the CPU.
        env["OMP_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


def _child(rank: int, fn: Callable[..., Any], args: tuple[Any, ...], env: dict[str, str],
           results: Any, stack_dir: str) -> None:
    os.environ.update(env)
    stack_file = open(Path(stack_dir) / f"rank{rank}.stack", "w")  # noqa: SIM115 -- lives as long as the process
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    try:
        value = fn(rank, *args)
        payload = pickle.dumps(value)
    except BaseException:  # noqa: BLE001 -- everything goes back to the parent, including SystemExit
        results.put((rank, False, traceback.format_exc()))
        return
    results.put((rank, True, payload))


def spawn(fn: Callable[..., Any], nprocs: int, *, args: Sequence[Any] = (), timeout_s: float = 120.0,
          env: Mapping[str, str] | None = None, master_port: int | None = None,
          grace_s: float = 10.0) -> list[Any]:
    """Run ``fn(rank, *args)`` in ``nprocs`` fresh processes; return their results in rank order.

    ``fn`` and ``args`` must be picklable (a module-level function). Return values travel back pickled. Raises
    :class:`SpawnError` carrying every rank's traceback when a rank raises, dies, or ``timeout_s`` passes.
    """
    if nprocs < 1:
        raise TransferError(f"nprocs: {nprocs!r} must be a positive integer such as 2", op="spawn")
    port = master_port or free_port()
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    parent_env = dict(os.environ)
    # SIGTERM/SIGHUP raise like Ctrl-C, so the ranks are stopped and the directory removed on the way out.
    with terminate_as_interrupt(), tempfile.TemporaryDirectory(prefix="tf-spawn-") as stack_dir:
        # Ranks keep their scratch files (UCX logs) in this directory, so they go with it even if killed.
        extra = {**(env or {}), SCRATCH_ENV: stack_dir}
        procs = [
            ctx.Process(target=_child, name=f"tensorfabric-rank{r}", daemon=True,
                        args=(r, fn, tuple(args), torchrun_env(r, nprocs, port, extra, parent=parent_env),
                              results, stack_dir))
            for r in range(nprocs)
        ]
        try:
            for proc in procs:
                proc.start()
            values, failures, reason = _collect(procs, results, timeout_s, grace_s, stack_dir)
        finally:
            _stop(procs)
            results.close()
    if failures:
        raise SpawnError(f"{len(failures)} of {nprocs} rank(s) failed: {reason}", failures, values)
    return [values[r] for r in range(nprocs)]


def _collect(procs: list[Any], results: Any, timeout_s: float, grace_s: float,
             stack_dir: str) -> tuple[dict[int, Any], dict[int, str], str]:
    nprocs = len(procs)
    values: dict[int, Any] = {}
    failures: dict[int, str] = {}
    exited_at: dict[int, float] = {}
    deadline = time.monotonic() + timeout_s
    reason = ""
    while len(values) + len(failures) < nprocs:
        now = time.monotonic()
        if now >= deadline:
            reason = reason or f"timed out after {timeout_s:g} s"
            break
        try:
            rank, ok, payload = results.get(timeout=0.05)
        except queue.Empty:
            pass
        else:
            if ok:
                values[rank] = pickle.loads(payload)
            else:
                failures[rank] = payload
                if not reason:
                    reason = f"rank {rank} raised"
                    deadline = min(deadline, time.monotonic() + grace_s)
            continue
        for rank, proc in enumerate(procs):
            if rank in values or rank in failures or proc.exitcode is None:
                continue
            first_seen = exited_at.setdefault(rank, now)
            if proc.exitcode != 0 or now - first_seen > _REPORT_LAG_S:
                failures[rank] = f"process exited with code {proc.exitcode} without a result"
                if not reason:
                    reason = f"rank {rank} died (exit code {proc.exitcode})"
                    deadline = min(deadline, now + grace_s)
    pending = [r for r in range(nprocs) if r not in values and r not in failures]
    for rank in pending:
        failures[rank] = _dump_stack(procs[rank], Path(stack_dir) / f"rank{rank}.stack", reason)
    return values, failures, reason


def _dump_stack(proc: Any, stack_file: Path, reason: str) -> str:
    if proc.is_alive() and proc.pid is not None:
        try:
            os.kill(proc.pid, signal.SIGUSR1)
            time.sleep(0.5)
        except ProcessLookupError:
            pass
    stack = stack_file.read_text() if stack_file.exists() else ""
    return f"still running when the launch stopped ({reason}); its stack:\n{stack or '(not available)'}"


def _stop(procs: list[Any]) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5.0)
