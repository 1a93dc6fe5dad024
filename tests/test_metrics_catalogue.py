"""One metric catalogue: telemetry and the simulator read the same entries (names, kinds, labels, help)."""

from __future__ import annotations

import ast
from pathlib import Path

from tensorfabric import metrics_catalogue
from tensorfabric.telemetry import metrics

SRC = Path(__file__).resolve().parents[1] / "src" / "tensorfabric"


def test_telemetry_reads_the_base_catalogue() -> None:
    assert metrics.METRICS is metrics_catalogue.METRICS and metrics.spec is metrics_catalogue.spec


def test_the_simulator_writes_no_metric_name_of_its_own() -> None:
    """Every string in sim/ that looks like a metric name is a catalogue constant's value, used through it."""
    names = set(metrics_catalogue.METRICS)
    for path in sorted((SRC / "sim").rglob("*.py")):
        literals = {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
                    and isinstance(n.value, str)}
        assert not literals & names, f"{path.name} spells {sorted(literals & names)}; use metrics_catalogue"


def test_every_catalogue_label_is_a_known_label() -> None:
    for entry in metrics_catalogue.METRICS.values():
        assert set(entry.labels) <= set(metrics_catalogue.LABELS), entry.name
