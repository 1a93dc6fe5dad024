"""Paths and small helpers shared by the telemetry tests."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources import SourceContext

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "telemetry"
GOLDEN = ROOT / "tests" / "golden" / "telemetry"
RULES = ROOT / "src" / "tensorfabric" / "telemetry" / "rules" / "roce.rules.yml"
DASHBOARD = ROOT / "src" / "tensorfabric" / "telemetry" / "dashboards" / "roce-fabric.json"


def ctx(t: float = 1000.0, host: str = "h0") -> SourceContext:
    """A context with a frozen clock and a runner that refuses to run anything."""

    def no_commands(argv: object) -> str:
        raise AssertionError(f"test tried to run {argv!r}")

    return SourceContext(host=host, run=no_commands, clock=lambda: t)


def by_key(samples: Iterable[Sample]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {s.series: s.value for s in samples}


def find(samples: Iterable[Sample], metric: str, **labels: str) -> list[Sample]:
    return [s for s in samples if s.metric == metric and all(s.labels.get(k) == v for k, v in labels.items())]
