"""Single-flight calls: a caller that arrives while another thread's call runs waits for that call and gets its
result, so concurrent scrapes share one poll instead of queueing for one each."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["SingleFlight"]

T = TypeVar("T")


class _Flight(Generic[T]):
    """One call in progress, for the callers that arrive while it runs."""

    __slots__ = ("done", "error", "owner", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.owner = threading.get_ident()
        self.result: T | None = None
        self.error: BaseException | None = None


class SingleFlight(Generic[T]):
    """At most one call in flight; the others wait for it and share its result (or its exception)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flight: _Flight[T] | None = None

    def run(self, call: Callable[[], T], reentrant: Callable[[], T] | None = None) -> T:
        """``call()``, or the result of the one in flight. From inside the call (a listener of a poll polling
        again) ``reentrant`` runs instead (``call`` when not given): waiting on itself would never end."""
        with self._lock:
            flight = self._flight
            leader = flight is None
            if flight is None:
                flight = self._flight = _Flight()
        if not leader:
            if flight.owner == threading.get_ident():
                return (reentrant or call)()
            flight.done.wait()  # the leader bounds its own time (a poll waits on sources for the deadline at most)
            if flight.result is None:
                raise flight.error or RuntimeError("the call this one waited for failed")
            return flight.result
        try:
            flight.result = call()
            return flight.result
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                self._flight = None
            flight.done.set()
