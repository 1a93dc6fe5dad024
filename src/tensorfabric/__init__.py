"""tensorfabric: LLM inference on RoCE fabrics -- run, prove, configure, watch and simulate.

The top level exposes only the shared vocabulary; each subsystem is its own subpackage
(``tensorfabric.transfer``, ``.inference``, ``.host``, ``.fabric``, ``.telemetry``, ``.sim``, ``.lab``).
"""

from __future__ import annotations

__version__ = "0.1.0"

from tensorfabric.errors import (
    DiscoveryError,
    InputError,
    LabError,
    ParseError,
    SimulationError,
    TensorFabricError,
    TransferError,
)
from tensorfabric.findings import Finding
from tensorfabric.samples import Alert, Sample

__all__ = [
    "Alert",
    "DiscoveryError",
    "Finding",
    "InputError",
    "LabError",
    "ParseError",
    "Sample",
    "SimulationError",
    "TensorFabricError",
    "TransferError",
    "__version__",
]
