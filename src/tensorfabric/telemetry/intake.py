"""What comes in from a source before the engine files it: each read in its own thread within a deadline,
negative counters and names Prometheus cannot carry refused, and the errors of one poll bounded."""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from operator import attrgetter

from tensorfabric.errors import TensorFabricError
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources import Reading, Source

__all__ = ["MAX_ERRORS", "Reader", "bad_names", "bounded", "checked"]

_VALUE = attrgetter("value")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,199}")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]{0,99}")
MAX_ERRORS = 20
"""Errors kept per source per poll; the rest are counted in one summary line (a replay of junk has millions)."""


class Reader:
    """One source read in its own daemon thread, so a source that hangs costs a poll its deadline, never more."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._result: Reading | Exception = TimeoutError("not read")

    def start(self) -> bool:
        """Start a read; False while the previous one is still running (its result will be dropped)."""
        if self._thread is not None and self._thread.is_alive():
            return False
        self._done.clear()
        self._thread = threading.Thread(target=self._run, name=f"source {self.source.name}", daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        try:
            self._result = self.source.read()
        except (TensorFabricError, OSError) as exc:
            self._result = exc
        except Exception as exc:  # noqa: BLE001 -- a source bug must cost its own poll only, not the monitor
            self._result = RuntimeError(f"{type(exc).__name__}: {exc}")
        finally:
            self._done.set()

    def wait(self, timeout_s: float, deadline_s: float) -> Reading | Exception:
        if not self._done.wait(timeout_s):
            return TimeoutError(f"no answer within the {deadline_s:g} s source deadline")
        return self._result


def checked(samples: Sequence[Sample]) -> tuple[Sequence[Sample], tuple[str, ...]]:
    """The samples without negative counter values (bad input: no counter goes below zero), and one error each."""
    if not samples or min(map(_VALUE, samples)) >= 0:
        return samples, ()
    bad = [s for s in samples if s.kind == "counter" and s.value < 0]
    if not bad:
        return samples, ()
    refused = tuple(f"{s.metric} {dict(s.labels)}: negative counter value {s.value:g} refused"[:200] for s in bad)
    return [s for s in samples if not (s.kind == "counter" and s.value < 0)], refused


_NAMES_OK: set[tuple[str, tuple[str, ...]]] = set()


def bad_names(sample: Sample) -> str:
    """Why Prometheus could not carry this sample's metric or label names ("" when it can)."""
    key = (sample.metric, tuple(sample.labels))
    if key in _NAMES_OK:
        return ""
    if _METRIC_NAME.fullmatch(sample.metric) is None:
        return f"metric name {sample.metric[:60]!r} is not [a-zA-Z_:][a-zA-Z0-9_:]*; sample refused"
    for name in sample.labels:
        if _LABEL_NAME.fullmatch(name) is None or name.startswith("__"):
            return (f"{sample.metric}: label name {name[:60]!r} is reserved (__*) or not [a-zA-Z_][a-zA-Z0-9_]*; "
                    "sample refused")
    if len(_NAMES_OK) > 10_000:
        _NAMES_OK.clear()
    _NAMES_OK.add(key)
    return ""


def bounded(errors: tuple[str, ...]) -> tuple[str, ...]:
    if len(errors) <= MAX_ERRORS:
        return errors
    return (*errors[:MAX_ERRORS], f"... and {len(errors) - MAX_ERRORS} more errors in this poll")
