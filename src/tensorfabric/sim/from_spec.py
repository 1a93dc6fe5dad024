"""A fabric spec's defaults applied to a simulation: the spec's QoS plan fills what the flags left open.

The spec is read on the fabric side (``fabric/sim_inputs.py``) and arrives here as plain numbers, since sim does
not import fabric.
"""

from __future__ import annotations

import dataclasses

from tensorfabric.sim.ecn import EcnConfig
from tensorfabric.sim.scenarios import Overrides

__all__ = ["ecn_config", "with_spec_ecn"]

SpecEcn = tuple[float, float, float]
"""Kmin and Kmax in bytes, Pmax as a probability."""


def with_spec_ecn(overrides: Overrides, ecn: SpecEcn | None) -> Overrides:
    """``overrides`` with the spec's ECN profile wherever no flag set Kmin, Kmax or Pmax (flags still win)."""
    if ecn is None:
        return overrides
    kmin, kmax, pmax = ecn
    return dataclasses.replace(
        overrides,
        kmin_bytes=overrides.kmin_bytes if overrides.kmin_bytes is not None else int(kmin),
        kmax_bytes=overrides.kmax_bytes if overrides.kmax_bytes is not None else int(kmax),
        pmax=overrides.pmax if overrides.pmax is not None else pmax)


def ecn_config(ecn: SpecEcn | None) -> EcnConfig | None:
    """The spec's ECN profile as the simulator's queue marking config (a sweep's base ECN)."""
    return None if ecn is None else EcnConfig(kmin_bytes=ecn[0], kmax_bytes=ecn[1], pmax=ecn[2])
