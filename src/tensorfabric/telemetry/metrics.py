"""The canonical metric catalogue, as the telemetry package reads it.

The catalogue itself is the base module :mod:`tensorfabric.metrics_catalogue`, shared with the simulator (which never
imports telemetry); this module re-exports it so telemetry's sources, rates, detectors and exporter keep one import.
"""

from __future__ import annotations

from tensorfabric.metrics_catalogue import GENERIC, LABELS, METRICS, MetricSpec, spec

__all__ = ["GENERIC", "LABELS", "METRICS", "MetricSpec", "spec"]
