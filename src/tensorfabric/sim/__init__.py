"""Fluid (rate-based) simulator of RoCE fabrics: PFC, ECN and DCQCN under inference traffic.

Topologies are :mod:`tensorfabric.topology` records; flows are :class:`Flow` records; one run of the
time-stepped engine gives per-flow completion times and rates, queue and pause time series, and a
counter stream of :class:`~tensorfabric.samples.Sample` records named as the monitor reads them.
The package never imports torch or telemetry.

    >>> from tensorfabric.sim import Overrides, simulate
    >>> result = simulate("incast", Overrides(flows=4, duration_s=2e-3))
"""

from tensorfabric.sim.config import SimConfig
from tensorfabric.sim.counters import counter_samples
from tensorfabric.sim.dcqcn import FirmwareDcqcn, FixedPoint, PaperDcqcn, fixed_point
from tensorfabric.sim.ecn import EcnConfig
from tensorfabric.sim.engine import Trace, run
from tensorfabric.sim.network import Network, compile_network
from tensorfabric.sim.pfc import PfcConfig, required_headroom_bytes
from tensorfabric.sim.results import FlowResult, SimResult
from tensorfabric.sim.scenarios import SCENARIOS, Overrides, simulate
from tensorfabric.sim.topologies import fat_tree, leaf_spine, ring, single_switch
from tensorfabric.sim.workloads import Flow, ModelShape

__all__ = [
    "SCENARIOS",
    "EcnConfig",
    "FirmwareDcqcn",
    "FixedPoint",
    "Flow",
    "FlowResult",
    "ModelShape",
    "Network",
    "Overrides",
    "PaperDcqcn",
    "PfcConfig",
    "SimConfig",
    "SimResult",
    "Trace",
    "compile_network",
    "counter_samples",
    "fat_tree",
    "fixed_point",
    "leaf_spine",
    "required_headroom_bytes",
    "ring",
    "run",
    "simulate",
    "single_switch",
]
