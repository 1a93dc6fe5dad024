"""Local ranks: the ``local`` target of :func:`tensorfabric.transfer.launch.launch`, and the failure type every
target raises.

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

Nothing is left behind when the launcher itself is killed. Each rank asks the kernel for SIGKILL when its launcher
dies (``PR_SET_PDEATHSIG``), so a SIGKILLed launcher has no orphans still computing. Results come back over one
pipe per rank, not a ``multiprocessing.Queue``: a Queue's lock is a named POSIX semaphore (``/dev/shm/sem.mp-*``,
a random name with no pid in it) that only the launcher or multiprocessing's resource tracker unlinks, so a kill of
the whole process group left it for ever; a pipe has no name. The ranks' scratch (UCX logs) is in the launcher's
``tf-spawn-<pid>-*`` directory, which the next launch removes once that pid is gone.

Native noise: what C/C++ libraries in a rank write to file descriptor 2 (torch's TCPStore frame dumps when a peer
dies, NIXL/UCX log lines) goes to ``rank<r>.native`` in that directory, while the rank's Python ``sys.stderr``
(warnings, progress bars) stays on the launcher's stderr. When every rank succeeds, the captured text is passed on
to the launcher's stderr as it would have been; when the launch fails it is kept in the failure's detail (shown by
the CLI with ``--debug``) and the user sees one line per failure.
"""

from __future__ import annotations

import ctypes
import faulthandler
import multiprocessing as mp
import os
import pickle
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from tensorfabric.errors import InputError, TensorFabricError, TransferError
from tensorfabric.fsutil import SCRATCH_ENV, scratch
from tensorfabric.signals import terminate_as_interrupt

__all__ = ["NATIVE_TAIL_BYTES", "OnMessage", "RankFailure", "SpawnError", "SpawnInputError", "free_port", "post",
           "posting_to", "spawn", "spawn_error", "stop_ranks", "torchrun_env", "under_torchrun"]

_TORCHRUN_KEYS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
# Seconds a rank that exited cleanly may take before its result shows up on the queue (the queue's feeder
# thread flushes on exit, but the parent can observe the exit code first).
_REPORT_LAG_S = 3.0
NATIVE_TAIL_BYTES = 64 * 1024
"""How much of a failed rank's native stderr its :class:`RankFailure` keeps (a dying NCCL can repeat a line for
ever)."""


@dataclass(frozen=True, slots=True)
class RankFailure:
    """Why one rank did not return: the exception it raised, or how its process ended."""

    rank: int
    error: str
    """The exception's class name (``TransferError``); "" when the rank died or was stopped without raising."""
    message: str
    """The exception's message, or what happened to the process, on one line."""
    detail: str = ""
    """The rank's traceback, or its Python stack when it was stopped: shown with ``--debug`` only."""
    input_error: bool = False
    """The rank raised :class:`~tensorfabric.errors.InputError` (bad input found inside a rank: exit 2)."""
    native: str = ""
    """What the rank's native libraries wrote to stderr (fd 2), its last :data:`NATIVE_TAIL_BYTES`: ``--debug`` only."""

    def line(self) -> str:
        return f"rank {self.rank} failed: {self.error}: {self.message}" if self.error else \
            f"rank {self.rank} {self.message}"


class SpawnError(TransferError):
    """One or more spawned ranks failed: one line naming the first rank's cause; every rank's detail in
    :attr:`causes` (and :meth:`detail` for ``--debug``)."""

    display_name = ""
    """The CLI prints the message alone: it already names the rank and the exception class."""

    def __init__(self, message: str, failures: Mapping[int, RankFailure | str],
                 results: Mapping[int, Any] | None = None, first: int | None = None, *, line: str | None = None,
                 full: str | None = None) -> None:
        self.causes = {r: f if isinstance(f, RankFailure) else RankFailure(r, "", f.strip().splitlines()[-1]
                                                                             if f.strip() else "failed", f)
                       for r, f in sorted(failures.items())}
        self.failures = {r: (c.detail or c.message) if c.error else "\n".join(filter(None, (c.message, c.detail)))
                         for r, c in self.causes.items()}
        """rank -> traceback (or a description): what each rank left."""
        self.results = dict(sorted((results or {}).items()))
        """Return values of the ranks that did finish (rank -> value)."""
        head = self.causes.get(first) if first is not None else None
        head = head or next((c for c in self.causes.values() if c.error), None) or next(iter(self.causes.values()),
                                                                                      None)
        text = head.line() if head is not None else message
        rest = [c for c in self.causes.values() if c is not head]
        if rest:
            # Say what the others did: a rank that raised its own error (a peer's timeout naming the dead rank)
            # is not one the launcher stopped, and a user reading "stopped" would look for the wrong cause.
            raised = sum(1 for c in rest if c.error)
            kinds = [(n, what) for n, what in ((raised, "failed too"), (len(rest) - raised, "stopped after it")) if n]
            noun = "other rank" if len(rest) == 1 else "other ranks"
            text += (f" ({len(rest)} {noun} {kinds[0][1]})" if len(kinds) == 1 else
                     f" ({len(rest)} {noun}: {', '.join(f'{n} {what}' for n, what in kinds)})")
        if any(c.native.strip() for c in self.causes.values()):
            text += "; the ranks' native library output is shown with --debug"
        # A launch target that words its own line (the lab names its spec) keeps it, and its own detail.
        TensorFabricError.__init__(self, text if line is None else line)
        self.full = full
        self.op, self.group, self.peer = "spawn", "", head.rank if head is not None else None
        self.summary = message
        self.input_error = head is not None and head.input_error

    def root_cause(self) -> str | None:
        """``Class: message`` of the first rank that raised, or None when no rank raised (they died or hung)."""
        head = next((c for c in self.causes.values() if c.error), None)
        return f"{head.error}: {head.message}" if head is not None else None

    def detail(self) -> str:
        """Every rank's traceback or stack and its native stderr, for ``--debug``."""
        if self.full is not None:
            return self.full
        return "\n".join(f"--- rank {r} ---\n{c.detail.rstrip() or c.message}"
                         + (f"\n--- rank {r} native stderr ---\n{c.native.rstrip()}" if c.native.strip() else "")
                         for r, c in self.causes.items())


class SpawnInputError(SpawnError, InputError):
    """A rank found bad input (InputError) that the launcher could not check first: still exit 2."""


def spawn_error(message: str, failures: Mapping[int, RankFailure], results: Mapping[int, Any] | None = None,
                first: int | None = None, *, line: str | None = None, full: str | None = None) -> SpawnError:
    error = SpawnError(message, failures, results, first, line=line, full=full)
    if error.input_error:
        return SpawnInputError(message, failures, results, first, line=line, full=full)
    return error


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


OnMessage = Callable[[int, Any], None]
_outbox: Callable[[Any], None] | None = None


def post(message: Any) -> None:
    """Send ``message`` (picklable) to the launcher's ``on_message`` while this rank runs; nothing happens when
    no launcher listens or it has gone (the rank's work goes on without it)."""
    if _outbox is None:
        return
    try:
        _outbox(message)
    except (OSError, ValueError):
        pass


@contextmanager
def posting_to(callback: Callable[[Any], None] | None) -> Iterator[None]:
    """While inside, :func:`post` in this process calls ``callback`` (a rank run in the launcher's own process)."""
    global _outbox
    previous = _outbox
    _outbox = callback
    try:
        yield
    finally:
        _outbox = previous


_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """SIGKILL this process when ``parent`` dies (Linux; elsewhere nothing happens)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the launcher died before the request took effect
        os._exit(1)


def _capture_native_stderr(path: Path) -> None:
    """Point fd 2 at ``path`` and give Python's ``sys.stderr`` a copy of the original descriptor, so only what
    native code writes to fd 2 is captured."""
    sys.stderr.flush()
    original = os.dup(2)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = open(original, "w", buffering=1, encoding="utf-8", errors="backslashreplace")  # noqa: SIM115


def _child(rank: int, fn: Callable[..., Any], args: tuple[Any, ...], env: dict[str, str],
           results: Connection, stack_dir: str, parent: int) -> None:
    global _outbox
    _die_with(parent)
    _capture_native_stderr(Path(stack_dir) / f"rank{rank}.native")
    os.environ.update(env)
    _outbox = lambda message: results.send((rank, None, message))  # noqa: E731
    stack_file = open(Path(stack_dir) / f"rank{rank}.stack", "w")  # noqa: SIM115 -- lives as long as the process
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)
    try:
        try:
            report: tuple[int, bool, Any] = (rank, True, pickle.dumps(fn(rank, *args)))
        except BaseException as exc:  # noqa: BLE001 -- everything goes back to the parent, including SystemExit
            message = " ".join(str(exc).split())[:2000] or repr(exc)
            report = (rank, False, RankFailure(rank, type(exc).__name__, message, traceback.format_exc(),
                                               isinstance(exc, InputError)))
        results.send(report)
    finally:
        results.close()


def spawn(fn: Callable[..., Any], nprocs: int, *, args: Sequence[Any] = (), timeout_s: float = 120.0,
          env: Mapping[str, str] | None = None, master_port: int | None = None,
          grace_s: float = 2.0, on_message: OnMessage | None = None, authority: int | None = None) -> list[Any]:
    """Run ``fn(rank, *args)`` in ``nprocs`` fresh processes; return their results in rank order.

    ``fn`` and ``args`` must be picklable (a module-level function). Return values travel back pickled. Raises
    :class:`SpawnError` carrying every rank's traceback when a rank raises, dies, or ``timeout_s`` passes.
    ``on_message`` and ``authority`` are :func:`launch`'s; with ``authority`` a rank stopped after it reported
    has ``None`` for its result.
    """
    if nprocs < 1:
        raise TransferError(f"nprocs: {nprocs!r} must be a positive integer such as 2", op="spawn")
    port = master_port or free_port()
    ctx = mp.get_context("spawn")
    pipes = [ctx.Pipe(duplex=False) for _ in range(nprocs)]
    parent_env = dict(os.environ)
    # SIGTERM/SIGHUP raise like Ctrl-C, so the ranks are stopped and the directory removed on the way out.
    with terminate_as_interrupt(), scratch("spawn") as stack_dir:
        # Ranks keep their scratch files (UCX logs) in this directory, so they go with it even if killed.
        extra = {**(env or {}), SCRATCH_ENV: stack_dir}
        procs = [
            ctx.Process(target=_child, name=f"tensorfabric-rank{r}", daemon=True,
                        args=(r, fn, tuple(args), torchrun_env(r, nprocs, port, extra, parent=parent_env),
                              pipes[r][1], stack_dir, os.getpid()))
            for r in range(nprocs)
        ]
        try:
            for proc, (_, writer) in zip(procs, pipes, strict=True):
                proc.start()
                writer.close()  # the rank holds the only write end: its death reads as end of file
            values, failures, reason = _collect(procs, [reader for reader, _ in pipes], timeout_s, grace_s,
                                                stack_dir, on_message, authority)
        finally:
            stop_ranks(procs)
            for reader, writer in pipes:
                reader.close()
                writer.close()
        natives = [Path(stack_dir) / f"rank{r}.native" for r in range(nprocs)]
        if failures:
            failures = {r: replace(f, native=_tail(natives[r])) for r, f in failures.items()}
        else:
            for path in natives:
                _relay(path)
    if failures:
        raise spawn_error(f"{len(failures)} of {nprocs} rank(s) failed: {reason}", failures, values,
                          first=authority if authority in failures else next(iter(failures)))
    return [values.get(r) for r in range(nprocs)]


def _collect(procs: list[Any], readers: list[Connection], timeout_s: float, grace_s: float, stack_dir: str,
             on_message: OnMessage | None = None, authority: int | None = None
             ) -> tuple[dict[int, Any], dict[int, RankFailure], str]:
    """Results and failures, the first failure first; the whole wait never passes ``timeout_s``. With
    ``authority`` only that rank's failure counts, and once it has reported the others are merely awaited."""
    nprocs = len(procs)
    values: dict[int, Any] = {}
    failures: dict[int, RankFailure] = {}
    exited_at: dict[int, float] = {}
    stopped: set[int] = set()  # under an authority: ranks that ended without counting
    deadline = time.monotonic() + timeout_s
    reason = ""
    while len(values) + len(failures) + len(stopped) < nprocs:
        now = time.monotonic()
        if now >= deadline:
            reason = reason or f"timed out after {timeout_s:g} s"
            break
        open_readers = [r for i, r in enumerate(readers)
                        if i not in values and i not in failures and i not in stopped and not r.closed]
        got = False
        if not open_readers:
            time.sleep(0.05)  # every rank has reported or closed its pipe: only exit codes are awaited
        for ready in wait(open_readers, timeout=0.05) if open_readers else []:
            assert isinstance(ready, Connection)
            try:
                rank, ok, payload = ready.recv()
            except (EOFError, OSError):
                ready.close()  # the rank ended without a result: its exit code says how, below
                continue
            got = True
            if ok is None:
                if on_message is not None:
                    on_message(rank, payload)
            elif ok:
                values[rank] = pickle.loads(payload)
                if rank == authority:
                    deadline = min(deadline, time.monotonic() + grace_s)
            elif authority is None or rank == authority:
                failures[rank] = payload
                if not reason:
                    reason = f"rank {rank} raised"
                    deadline = min(deadline, time.monotonic() + grace_s)
            else:
                stopped.add(rank)
        if got:
            continue
        for rank, proc in enumerate(procs):
            if rank in values or rank in failures or rank in stopped or proc.exitcode is None:
                continue
            first_seen = exited_at.setdefault(rank, now)
            if proc.exitcode == 0 and now - first_seen <= _REPORT_LAG_S:
                continue
            if authority not in (None, rank):
                stopped.add(rank)
            else:
                failures[rank] = RankFailure(rank, "", f"process exited with code {proc.exitcode} without a result")
                if not reason:
                    reason = f"rank {rank} died (exit code {proc.exitcode})"
                    deadline = min(deadline, now + grace_s)
    pending = [r for r in range(nprocs) if r not in values and r not in failures and r not in stopped
               and authority in (None, r)]
    stacks = _dump_stacks([procs[r] for r in pending], [Path(stack_dir) / f"rank{r}.stack" for r in pending])
    for rank, stack in zip(pending, stacks, strict=True):
        failures[rank] = RankFailure(rank, "", f"was still running when the launch stopped ({reason})", stack)
    return values, failures, reason


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - NATIVE_TAIL_BYTES))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _relay(path: Path) -> None:
    """A successful rank's native stderr, passed on to the launcher's fd 2 where it would have gone uncaptured."""
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(1 << 16):
                os.write(2, chunk)
    except OSError:
        pass


def _dump_stacks(procs: list[Any], stack_files: list[Path]) -> list[str]:
    """Each still-running rank's Python stacks (faulthandler on SIGUSR1), all asked at once."""
    asked = False
    for proc in procs:
        if proc.is_alive() and proc.pid is not None:
            try:
                os.kill(proc.pid, signal.SIGUSR1)
                asked = True
            except ProcessLookupError:
                pass
    if asked:
        time.sleep(0.5)
    return [(f.read_text() if f.exists() else "") or "(not available: the process was stopped or gone)"
            for f in stack_files]


def stop_ranks(procs: list[Any]) -> None:
    """Stop every rank within about a second: SIGTERM, then SIGKILL (a SIGSTOPped rank never sees SIGTERM)."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    until = time.monotonic() + 1.0
    for proc in procs:
        proc.join(timeout=max(0.0, until - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5.0)
