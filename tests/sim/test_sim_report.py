"""The simulate verb's typed report: its JSON is the old ``--json`` output byte for byte, and people see it too."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from tensorfabric.sim.report import SimulateReport, counter_lines, simulate_report
from tensorfabric.sim.results import SimResult
from tensorfabric.sim.scenarios import Overrides, simulate


def _fixed_clock() -> Any:
    ticks = iter((10.0, 10.25))
    return lambda: next(ticks)


_RUNS = [("incast", Overrides(duration_s=1e-3, flows=4, counter_interval_s=1e-4)),
         ("deadlock", Overrides(duration_s=1e-3, counter_interval_s=1e-4))]


@pytest.fixture(scope="module", params=_RUNS, ids=[name for name, _ in _RUNS])
def result(request: pytest.FixtureRequest) -> SimResult:
    name, overrides = request.param
    return simulate(name, overrides, clock=_fixed_clock())


def _old_json(result: SimResult) -> str:
    """The document ``simulate --json`` printed before the report record (cli/simulate.py at 239c43a)."""
    from tensorfabric.cli._common import emit_json
    from tensorfabric.sim.accuracy import for_flows

    done = [f for f in result.flows if f.fct_s is not None]
    accuracy = for_flows([f.dst for f in done], [f.bytes for f in done], len(result.network.fabric.hosts),
                         str(result.params.get("dcqcn", "none")))
    out = io.StringIO()
    emit_json({**result.to_dict(), "reference_error": accuracy}, out)
    return out.getvalue()


def test_to_json_is_the_old_json_byte_for_byte(result: SimResult) -> None:
    assert simulate_report(result).to_json() == _old_json(result)


def test_to_json_round_trips(result: SimResult) -> None:
    report = simulate_report(result)
    doc = json.loads(report.to_json())
    assert list(doc) == ["scenario", "params", "sim_time_s", "wall_s", "flows", "drops", "pause", "queues",
                         "reference_error"]
    assert doc["wall_s"] == 0.25 and doc["scenario"] == result.scenario
    assert json.dumps(report.to_dict(), indent=2, default=list) + "\n" == report.to_json()


def test_exit_code_and_completion(result: SimResult) -> None:
    report = simulate_report(result)
    assert report.exit_code == (1 if result.drops_bytes > 0 else 0)
    assert list(report.completion_s) == sorted(report.completion_s)
    lossy = SimulateReport(result.with_outcome(), None)
    assert lossy.exit_code in (0, 1)


def test_counter_lines_are_json_lines(result: SimResult) -> None:
    text = counter_lines(result)
    assert text.endswith("\n")
    first = json.loads(text.splitlines()[0])
    assert {"metric", "value", "labels"} <= set(first)


def test_renderer_first_line_names_the_outcome(result: SimResult) -> None:
    from rich.console import Console

    from tensorfabric.cli.simulate import render

    out = io.StringIO()
    render(simulate_report(result), Console(file=out, width=200, color_system=None))
    first = out.getvalue().splitlines()[0]
    assert first.startswith(f"{result.scenario}: ") and "simulated in 0.25s wall" in first and "drops" in first
