"""Fluid (rate-based) simulator of RoCE fabrics: PFC, ECN and DCQCN under inference traffic.

Topologies are :mod:`tensorfabric.topology` records; flows are :class:`Flow` records; one run of an engine
(:mod:`tensorfabric.sim.engine`) gives per-flow completion times and rates, queue and pause time series, and a
counter stream of :class:`~tensorfabric.samples.Sample` records named as the monitor reads them.
The package never imports torch or telemetry.

    >>> from tensorfabric.sim import Overrides, simulate
    >>> result = simulate("incast", Overrides(flows=4, duration_s=2e-3))

The names below are imported on first use, so ``import tensorfabric.sim.engine`` (the CLI's ``--engine`` choices)
does not pull numpy and every simulator module into a command that never simulates.
"""

# No ``from __future__ import annotations`` and private aliases only: every public name here is in __all__.
import typing as _typing

from tensorfabric.registry import resolve as _resolve

if _typing.TYPE_CHECKING:
    from tensorfabric.sim.config import SimConfig
    from tensorfabric.sim.counters import counter_samples
    from tensorfabric.sim.dcqcn import FirmwareDcqcn, FixedPoint, PaperDcqcn, fixed_point
    from tensorfabric.sim.ecn import EcnConfig
    from tensorfabric.sim.engine import run
    from tensorfabric.sim.network import Network, compile_network
    from tensorfabric.sim.pfc import PfcConfig, required_headroom_bytes
    from tensorfabric.sim.results import FlowResult, SimResult
    from tensorfabric.sim.scenarios import SCENARIOS, Overrides, simulate
    from tensorfabric.sim.topologies import fat_tree, leaf_spine, ring, single_switch
    from tensorfabric.sim.trace import Trace
    from tensorfabric.sim.workloads import Flow, ModelShape

_HOME = {
    "SimConfig": "config", "counter_samples": "counters", "FirmwareDcqcn": "dcqcn", "FixedPoint": "dcqcn",
    "PaperDcqcn": "dcqcn", "fixed_point": "dcqcn", "EcnConfig": "ecn", "run": "engine", "Network": "network",
    "compile_network": "network", "PfcConfig": "pfc", "required_headroom_bytes": "pfc", "FlowResult": "results",
    "SimResult": "results", "SCENARIOS": "scenarios", "Overrides": "scenarios", "simulate": "scenarios",
    "fat_tree": "topologies", "leaf_spine": "topologies", "ring": "topologies", "single_switch": "topologies",
    "Trace": "trace", "Flow": "workloads", "ModelShape": "workloads",
}

__all__ = [
    "SCENARIOS", "EcnConfig", "FirmwareDcqcn", "FixedPoint", "Flow", "FlowResult", "ModelShape", "Network",
    "Overrides", "PaperDcqcn", "PfcConfig", "SimConfig", "SimResult", "Trace", "compile_network", "counter_samples",
    "fat_tree", "fixed_point", "leaf_spine", "required_headroom_bytes", "ring", "run", "simulate", "single_switch",
]


def __getattr__(name: str) -> _typing.Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'tensorfabric.sim' has no attribute {name!r}")
    value = _resolve(f"tensorfabric.sim.{home}:{name}")
    globals()[name] = value
    return value
