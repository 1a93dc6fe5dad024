"""What a simulator run leaves behind, whichever engine produced it (the record engines, results and counters share)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

__all__ = ["F64", "Trace"]

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Trace:
    """What a run leaves behind: final per-flow/per-edge totals, time series and counter snapshots."""

    steps: int
    sim_time_s: float
    sent: F64
    delivered: F64
    dropped: F64
    buffered: F64
    """Per flow: bytes still in switch buffers or on the wires at the end (counted, not derived)."""
    finish_s: F64
    begin_s: F64
    cnp_sent: F64
    cnp_handled: F64
    marked_pkts: F64
    edge_drops: F64
    edge_paused_s: F64
    edge_xoff_s: F64
    edge_xoff_on: F64
    edge_xoff_off: F64
    edge_queue_max: F64
    edge_refresh_s: F64
    series_t: F64
    series_queue: npt.NDArray[np.float32]
    series_paused: npt.NDArray[np.bool_]
    series_rate: npt.NDArray[np.float32]
    series_delivered: npt.NDArray[np.float32]
    snapshots: list[dict[str, F64]] = field(default_factory=list)
    engine: str = "stepped"
    """Which engine produced it: ``stepped`` or ``events`` (see ``SimConfig.engine``)."""
