"""Detectors, one module each: pure functions from a Window of samples to Alerts.

The registry maps a detector name to its module's ``DETECTOR`` record, imported on first use. Adding a detector is
a module with a ``DETECTOR`` record and one line here.
"""

from __future__ import annotations

from typing import Any

from tensorfabric.registry import Registry
from tensorfabric.telemetry.detectors.base import Detector, Thresholds

__all__ = ["DETECTORS", "Detector", "Thresholds", "load"]


def _check(name: str, detector: Any) -> Detector:
    assert isinstance(detector, Detector) and detector.name == name, f"detector {name!r} registers {detector!r}"
    return detector


# name -> module holding its DETECTOR record
_MODULES: dict[str, str] = {
    "pause-storm": "tensorfabric.telemetry.detectors.pause_storm",
    "pfc-watchdog": "tensorfabric.telemetry.detectors.watchdog",
    "continuous-pause": "tensorfabric.telemetry.detectors.continuous_pause",
    "storm-origin": "tensorfabric.telemetry.detectors.storm_origin",
    "congestion-spreading": "tensorfabric.telemetry.detectors.spreading",
    "deadlock": "tensorfabric.telemetry.detectors.deadlock",
    "lossless-loss": "tensorfabric.telemetry.detectors.lossless_loss",
    "ecn-misconfig": "tensorfabric.telemetry.detectors.ecn",
    "capacity-trend": "tensorfabric.telemetry.detectors.capacity",
    "link-health": "tensorfabric.telemetry.detectors.link_health",
}
DETECTORS: Registry[Detector] = Registry("detector", check=_check,
                                         lazy={name: f"{module}:DETECTOR" for name, module in _MODULES.items()})


def load(names: tuple[str, ...] = ()) -> list[Detector]:
    """The named detectors (all of them when ``names`` is empty); InputError for an unknown name."""
    return [DETECTORS.get(name) for name in names or DETECTORS.names()]
