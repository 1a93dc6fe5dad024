"""ECN marking at a switch egress queue: the RED-like curve DCQCN uses (Kmin, Kmax, Pmax).

p(q) = 0 for q <= Kmin, Pmax * (q - Kmin) / (Kmax - Kmin) up to Kmax, 1 above Kmax (DCQCN, SIGCOMM'15).
Marking is applied at dequeue, as the HPCC simulator does, so the mark reflects the queue the packet left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tensorfabric.errors import InputError

__all__ = ["EcnConfig", "mark_probability"]


@dataclass(frozen=True, slots=True)
class EcnConfig:
    """RED/ECN profile of every lossless egress queue."""

    enabled: bool = True
    kmin_bytes: float = 5_000.0
    """Paper / fluid-model default at 40G: 5 KB."""
    kmax_bytes: float = 200_000.0
    """Paper / fluid-model default at 40G: 200 KB."""
    pmax: float = 0.01
    """Marking probability at Kmax (1 %)."""

    def __post_init__(self) -> None:
        if self.kmin_bytes < 0:
            raise InputError(f"kmin: {self.kmin_bytes!r} bytes must not be negative")
        if self.kmax_bytes <= self.kmin_bytes:
            raise InputError(
                f"kmin/kmax: Kmin {self.kmin_bytes:.0f} B must be below Kmax {self.kmax_bytes:.0f} B "
                "(e.g. --kmin 5KB --kmax 200KB)")
        if not 0.0 < self.pmax <= 1.0:
            raise InputError(f"pmax: {self.pmax!r} must be a probability in (0, 1], e.g. 0.01")


def mark_probability(queue_bytes: npt.NDArray[np.float64], ecn: EcnConfig) -> npt.NDArray[np.float64]:
    """Marking probability for each queue length (vectorised)."""
    if not ecn.enabled:
        return np.zeros_like(queue_bytes)
    p = np.interp(queue_bytes, (ecn.kmin_bytes, ecn.kmax_bytes), (0.0, ecn.pmax))
    p[queue_bytes > ecn.kmax_bytes] = 1.0
    return p
