"""Where a sweep's scenarios run: one interface, a local process pool by default, Ray for a cluster.

An executor maps ``fn(context, item)`` over items and yields the results as they finish (any order). The
``context`` (the fabric and fixed settings) travels to each worker once, not with every item. ``close()`` stops
what is still running at once -- the sweep calls it on an interrupt -- and is safe to call twice.

* ``process`` -- ``jobs`` spawned interpreters (never forked: the parent may hold a progress-bar thread);
  ``jobs=1`` runs in the calling process. Workers ignore SIGINT, so Ctrl-C reaches only the parent, which
  terminates them.
* ``ray`` -- tasks on a Ray cluster: a local one started for the sweep (``jobs`` CPUs) or the one at
  ``address`` (``auto``, ``ray://head:10001``). Its workers import tensorfabric, so it must be installed there.
  ``pip install tensorfabric[sweep]`` brings Ray.

Every executor runs the same function on the same inputs, so the rows are the same whichever runs them.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry

__all__ = ["EXECUTORS", "Executor", "ExecutorOptions", "ProcessExecutor", "RayExecutor", "make_executor"]

C = TypeVar("C")
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class ExecutorOptions:
    jobs: int = 1
    """Worker processes (process) or CPUs of the local cluster started for the sweep (ray)."""
    address: str | None = None
    """ray: an existing cluster to join instead of starting one."""

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise InputError(f"--jobs: {self.jobs!r} must be at least 1")


class Executor(Protocol):
    name: str

    def map_unordered(self, fn: Callable[[C, T], R], context: C, items: Sequence[T]) -> Iterator[R]:
        """``fn(context, item)`` for every item, yielded as each finishes."""
        ...

    def close(self) -> None:
        """Stop unfinished work now and release the workers."""
        ...


_worker: dict[str, Any] = {}


def _init_worker(fn: Callable[[Any, Any], Any], context: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and terminates the pool
    _worker["fn"], _worker["context"] = fn, context


def _call(item: Any) -> Any:
    return _worker["fn"](_worker["context"], item)


class ProcessExecutor:
    """A local pool of ``jobs`` spawned processes (``jobs=1``: in the calling process)."""

    name = "process"

    def __init__(self, options: ExecutorOptions) -> None:
        if options.address is not None:
            raise InputError("--address names a Ray cluster; use it with --executor ray")
        self.jobs = options.jobs
        self._pool: Any = None

    def map_unordered(self, fn: Callable[[C, T], R], context: C, items: Sequence[T]) -> Iterator[R]:
        if self.jobs == 1 or len(items) <= 1:
            for item in items:
                yield fn(context, item)
            return
        self._pool = mp.get_context("spawn").Pool(min(self.jobs, len(items)), _init_worker, (fn, context))
        yield from self._pool.imap_unordered(_call, items, chunksize=1)
        self._pool.close()
        self._pool.join()
        self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None


def _ray_call(fn: Callable[[Any, Any], Any], context: Any, item: Any) -> Any:
    return fn(context, item)


class RayExecutor:
    """Tasks on a Ray cluster, at most two per CPU in flight so results stream back as they finish."""

    name = "ray"

    def __init__(self, options: ExecutorOptions) -> None:
        try:
            import ray
        except ImportError as exc:
            raise InputError("--executor ray needs Ray: pip install 'tensorfabric[sweep]' (or pip install ray)") \
                from exc
        self._ray = ray
        self._started = False
        self._pending: list[Any] = []
        if not ray.is_initialized():
            kw: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.ERROR,
                                  "log_to_driver": False}
            if options.address is None:
                kw["num_cpus"] = options.jobs
            try:
                ray.init(address=options.address, **kw)
            except (ConnectionError, ValueError) as exc:
                raise InputError(f"--address {options.address!r}: no Ray cluster there ({exc})") from exc
            self._started = True

    def map_unordered(self, fn: Callable[[C, T], R], context: C, items: Sequence[T]) -> Iterator[R]:
        ray = self._ray
        task = ray.remote(num_cpus=1, max_retries=0)(_ray_call)
        shared = ray.put(context)
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        queue = iter(items)
        for item in queue:
            self._pending.append(task.remote(fn, shared, item))
            if len(self._pending) >= window:
                break
        while self._pending:
            ready, self._pending = ray.wait(self._pending, num_returns=1)
            for item in queue:  # keep the window full
                self._pending.append(task.remote(fn, shared, item))
                break
            yield ray.get(ready[0])

    def close(self) -> None:
        for ref in self._pending:
            self._ray.cancel(ref, force=True)
        self._pending = []
        if self._started:
            self._ray.shutdown()
            self._started = False


EXECUTORS: Registry[Callable[[ExecutorOptions], Executor]] = Registry("executor", {
    "process": ProcessExecutor,
    "ray": RayExecutor,
})


def make_executor(name: str, options: ExecutorOptions) -> Executor:
    return EXECUTORS.get(name)(options)
