"""Simulated counter streams on the wall clock, so a real Prometheus (and its rules) can watch a simulation.

The simulator snapshots its counters every ~100 us of simulated time; Prometheus scrapes every 15 s. Streaming
the snapshots one ``pace_s`` apart stretches time by ``pace_s / interval_s``. Counters in seconds (pause
durations) are stretched by the same factor, so every paused fraction -- what the rules judge -- is what the
simulator computed; event and byte counters keep their values, so their per-second rates are per stretched
second (a 2 ms storm of 6 pause frames reads as 6 frames over 20 snapshots x 15 s).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

from tensorfabric.errors import InputError
from tensorfabric.samples import Sample
from tensorfabric.telemetry.metrics import spec

__all__ = ["stream_to_file", "stretch"]


def stretch(samples: Iterable[Sample], *, pace_s: float, start: float) -> Iterator[tuple[float, list[Sample]]]:
    """(wall time, samples of that snapshot re-stamped) per simulated snapshot, in time order."""
    if pace_s <= 0:
        raise InputError(f"--wall-clock {pace_s:g}s: expected a positive pace such as 15s")
    by_time: dict[float, list[Sample]] = defaultdict(list)
    for s in samples:
        by_time[s.time].append(s)
    times = sorted(by_time)
    if not times:
        return
    interval = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else pace_s
    factor = pace_s / interval
    for index, t in enumerate(times):
        wall = start + index * pace_s
        out = []
        for s in by_time[t]:
            entry = spec(s.metric)
            value = s.value * factor if entry is not None and entry.unit == "seconds" else s.value
            out.append(Sample(wall, s.metric, s.kind, value, s.labels, s.source))
        yield wall, out


def stream_to_file(samples: Iterable[Sample], path: str, *, pace_s: float, replace: bool = False,
                   clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
    """Append each simulated snapshot to ``path`` as JSON lines at its wall-clock time (:func:`stretch`), for a
    ``monitor --source replay:PATH`` reading along. Never over an existing file (it may be someone's data) unless
    ``replace``, and never through a symbolic link."""
    if replace and os.path.lexists(path):
        os.unlink(path)  # a symlink itself, never its target: "x" then refuses to follow one
    try:
        handle = open(path, "x", encoding="utf-8")  # noqa: SIM115 -- held open for the whole stream
    except FileExistsError as exc:
        raise InputError(f"--counters {path!r} exists; --wall-clock appends live, so give a new file") from exc
    with handle:
        for wall, snapshot in stretch(samples, pace_s=pace_s, start=clock()):
            sleep(max(0.0, wall - clock()))
            handle.write("".join(s.to_json() + "\n" for s in snapshot))
            handle.flush()
