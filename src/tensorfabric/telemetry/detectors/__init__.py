"""Detectors, one module each: pure functions from a Window of samples to Alerts.

The registry maps a detector name to its module; ``load`` imports them. Adding a detector is a module with a
``DETECTOR`` record and one line here.
"""

from __future__ import annotations

import importlib

from tensorfabric.errors import InputError
from tensorfabric.telemetry.detectors.base import Detector, Thresholds

__all__ = ["DETECTORS", "Detector", "Thresholds", "load"]

DETECTORS: dict[str, str] = {
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


def load(names: tuple[str, ...] = ()) -> list[Detector]:
    """The named detectors (all of them when ``names`` is empty)."""
    unknown = [n for n in names if n not in DETECTORS]
    if unknown:
        raise InputError(f"detector {unknown[0]!r} is not one of {', '.join(DETECTORS)}")
    found: list[Detector] = []
    for name in names or tuple(DETECTORS):
        detector = importlib.import_module(DETECTORS[name]).DETECTOR
        assert isinstance(detector, Detector) and detector.name == name, f"{DETECTORS[name]} registers {name!r}"
        found.append(detector)
    return found
