"""SIGTERM and SIGHUP handled like SIGINT: raised as :class:`~tensorfabric.errors.Interrupted` in the main thread.

systemd, Kubernetes and job schedulers stop a job with SIGTERM; a closed terminal sends SIGHUP. Their default
action ends the process at once, so ``finally`` blocks and context managers never run: spawned ranks run on, a
lab's namespaces stay, temporary directories remain. Inside :func:`terminate_as_interrupt` those signals raise
``Interrupted`` instead (a ``KeyboardInterrupt``), and the cleanup written for Ctrl-C runs for them too.

A handler someone else installed is left alone, and so is an ignored signal (``nohup`` ignores SIGHUP); off the
main thread (where Python cannot install handlers) the context manager does nothing. Nesting is fine: the outer
handlers come back when the inner block ends. A process forked inside the block (pyroute2 forks a helper into
each network namespace) keeps the default action: the signal ends it, it never raises into a copy of our stack.

:func:`deferred_signals` is for work that must not be cut at an arbitrary instruction (building a lab: a
``KeyboardInterrupt`` raised inside a logging lock, a weakref callback or a finaliser is printed as "Exception
ignored" and lost, so the build went on and exited 0). Inside it SIGINT, SIGTERM and SIGHUP only record that they
came; the code polls :meth:`Pending.check` at points where stopping is safe (between build steps), and the block
raises the recorded signal on the way out if nobody polled it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from tensorfabric.errors import Interrupted

__all__ = ["DEFERRED", "TERMINATING", "Pending", "deferred_signals", "interrupt_for", "terminate_as_interrupt"]

TERMINATING: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)
DEFERRED: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


_owner = {"pid": os.getpid()}


def _raise(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _owner["pid"]:
        # A child forked while the handler was installed (pyroute2's netns helper, a plain os.fork) must die by the
        # signal as it would have: raising there would unwind the parent's copied stack inside the child.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Interrupted(signum)


@contextmanager
def terminate_as_interrupt(signals: tuple[signal.Signals, ...] = TERMINATING) -> Iterator[None]:
    """While inside, each of ``signals`` raises :class:`Interrupted` in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _owner["pid"] = os.getpid()
    previous: dict[signal.Signals, signal.Handlers | int | object] = {}
    for signum in signals:
        current = signal.getsignal(signum)
        if current in (signal.SIG_DFL, _raise):
            previous[signum] = current
            signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


def interrupt_for(signum: int) -> KeyboardInterrupt:
    """The exception a signal stands for: Ctrl-C is a plain ``KeyboardInterrupt`` (exit 130, "interrupted"), the
    others :class:`Interrupted` with their own exit status."""
    return KeyboardInterrupt() if signum == signal.SIGINT else Interrupted(signum)


class Pending:
    """The first signal that arrived inside :func:`deferred_signals`, if any."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __bool__(self) -> bool:
        return self.signum is not None

    def check(self, *_: object) -> None:
        """Raise the recorded signal's interrupt (once); a no-op when none came. Takes and ignores arguments so it
        can be passed as a step hook."""
        signum, self.signum = self.signum, None
        if signum is not None:
            raise interrupt_for(signum)


@contextmanager
def deferred_signals(signals: tuple[signal.Signals, ...] = DEFERRED) -> Iterator[Pending]:
    """While inside, ``signals`` are recorded instead of raised; poll the yielded :class:`Pending`.

    A handler that is neither the default nor ours (ignored SIGHUP under nohup, SIGINT ignored in a background
    job) is left alone. Off the main thread nothing is installed and nothing is ever pending.
    """
    pending = Pending()
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    owner = os.getpid()

    def record(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:  # a forked helper dies by the signal, as with terminate_as_interrupt
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if pending.signum is None:
            pending.signum = signum

    record._tf_deferred = True  # type: ignore[attr-defined]
    previous: dict[signal.Signals, signal.Handlers | int | object] = {}
    for signum in signals:
        current = signal.getsignal(signum)
        if current in (signal.SIG_DFL, signal.default_int_handler, _raise) or getattr(current, "_tf_deferred", False):
            previous[signum] = current
            signal.signal(signum, record)
    try:
        yield pending
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
    pending.check()
