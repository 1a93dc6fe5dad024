"""SIGTERM and SIGHUP handled like SIGINT: raised as :class:`~tensorfabric.errors.Interrupted` in the main thread.

systemd, Kubernetes and job schedulers stop a job with SIGTERM; a closed terminal sends SIGHUP. Their default
action ends the process at once, so ``finally`` blocks and context managers never run: spawned ranks run on, a
lab's namespaces stay, temporary directories remain. Inside :func:`terminate_as_interrupt` those signals raise
``Interrupted`` instead (a ``KeyboardInterrupt``), and the cleanup written for Ctrl-C runs for them too.

A handler someone else installed is left alone, and so is an ignored signal (``nohup`` ignores SIGHUP); off the
main thread (where Python cannot install handlers) the context manager does nothing. Nesting is fine: the outer
handlers come back when the inner block ends. A process forked inside the block (pyroute2 forks a helper into
each network namespace) keeps the default action: the signal ends it, it never raises into a copy of our stack.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from tensorfabric.errors import Interrupted

__all__ = ["TERMINATING", "terminate_as_interrupt"]

TERMINATING: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP)


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
