"""What a fabric spec gives the simulator: its topology and its default ECN profile, in base types.

sim and fabric do not import each other (ARCHITECTURE.md's dependency rule), so the spec is read here and handed
over as a :class:`tensorfabric.topology.Fabric` plus plain numbers; ``sim/from_spec.py`` turns those into the
simulator's overrides.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tensorfabric.errors import InputError
from tensorfabric.fabric.spec import load_spec
from tensorfabric.topology import Fabric

__all__ = ["SimInputs", "sim_inputs"]


@dataclass(frozen=True)
class SimInputs:
    fabric: Fabric
    ecn: tuple[float, float, float] | None
    """The spec's default ECN profile: Kmin and Kmax in bytes, Pmax as a probability (the spec writes percent);
    None when the spec has no QoS plan."""


def sim_inputs(path: str | Path) -> SimInputs:
    """The fabric and default ECN profile of the spec at ``path`` (InputError when it yields no fabric)."""
    spec = load_spec(path)
    topology = spec.to_topology()
    if not isinstance(topology, Fabric):
        raise InputError(f"--fabric {path}: the spec did not produce a fabric")
    profile = spec.qos.ecn_for(None) if spec.qos is not None else None
    ecn = None if profile is None else (float(profile.kmin), float(profile.kmax), float(profile.pmax) / 100.0)
    return SimInputs(fabric=topology, ecn=ecn)
