"""The shipped rules under the real promtool: syntax, the generator, hand-written unit tests with a resolve path for
every alert, and the same verdict as the in-process detectors on the same series, evaluation by evaluation."""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tensorfabric.samples import Sample
from tensorfabric.telemetry.detectors import Thresholds
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.rules import AlertRule, Timing, groups, render
from tensorfabric.telemetry.synth import trace

from .telemetry_support import ROOT, RULES

HANDWRITTEN = ROOT / "tests/telemetry/promtool"


def _run(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, check=False)


def test_shipped_rules_are_the_generated_ones() -> None:
    assert RULES.read_text() == render(), ("roce.rules.yml differs from the detectors' rules: regenerate it with "
                                           "python -c 'from tensorfabric.telemetry.rules import write; write()'")


def test_rules_pass_promtool_check(promtool: str, tmp_path: Path) -> None:
    fast = tmp_path / "fast.rules.yml"
    fast.write_text(render(timing=Timing(scrape_s=1.0)))
    for path in (RULES, fast):
        done = _run(promtool, "check", "rules", str(path))
        assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


def test_timing_scales_windows_and_holds_but_not_the_logic() -> None:
    slow, fast = render(), render(timing=Timing(scrape_s=1.0))
    assert "[1m]" in slow and "[4s]" in fast and "for: 1m" in slow and "for: 4s" in fast
    assert re.sub(r"\[[^\]]*\]|for: \S+|\* \d+ >=|\d+s scrapes", "", slow) == \
        re.sub(r"\[[^\]]*\]|for: \S+|\* \d+ >=|\d+s scrapes", "", fast)


def test_thresholds_drive_the_rules() -> None:
    text = render(Thresholds(victim_rx_fraction=0.8, lossless_priorities=("5",), flap_restores=30))
    assert ">= 0.8\n" in text and 'priority=~"|5"' in text and "[20m]) > 30" in text
    assert 'queue=~"|(uc|voq)?(5)|no-loss|fcoe"' in text


def _alert_names() -> set[str]:
    return {r.name for _, rules in groups() for r in rules if isinstance(r, AlertRule)}


def test_handwritten_rule_tests_pass(promtool: str) -> None:
    files = sorted(HANDWRITTEN.glob("*_test.yml"))
    assert len(files) == 4
    done = _run(promtool, "test", "rules", *map(str, files))
    assert done.returncode == 0, done.stdout + done.stderr


def _seconds(text: str) -> float:
    total = 0.0
    for number, unit in re.findall(r"(\d+)(ms|s|m|h|d)", text):
        total += int(number) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    return total


def _checks(case: dict[str, Any], names: set[str]) -> Iterable[tuple[str, float, bool]]:
    """(alert, eval time, firing?) for every expectation a test case makes about an alert."""
    for check in case.get("alert_rule_test", []):
        yield check["alertname"], _seconds(check["eval_time"]), bool(check.get("exp_alerts"))
    for check in case.get("promql_expr_test", []):
        expr = check["expr"]
        if not expr.startswith("ALERTS"):
            continue
        at = _seconds(check["eval_time"])
        firing = {m for s in check.get("exp_samples") or [] for m in re.findall(r'alertname="(\w+)"', s["labels"])
                  if 'alertstate="firing"' in s["labels"] or 'alertstate="firing"' in expr}
        yield from ((name, at, True) for name in firing)
        named = re.search(r'alertname="(\w+)"', expr)
        if named is None and re.search(r"detector|host|source", expr):
            continue  # a partial selector says nothing about the alerts it leaves out
        yield from ((name, at, False) for name in ({named.group(1)} if named else names) - firing)


def test_every_alert_fires_and_resolves_in_the_handwritten_tests() -> None:
    names = _alert_names()
    fires: dict[str, list[float]] = defaultdict(list)
    quiet_after: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for path in sorted(HANDWRITTEN.glob("*_test.yml")):
        for case in yaml.safe_load(path.read_text())["tests"]:
            checks = list(_checks(case, names))
            for name, at, firing in checks:
                if firing:
                    fires[name].append(at)
            for name, at, firing in checks:
                if not firing:
                    quiet_after[name] += [(t, at) for n, t, f in checks if n == name and f and t < at]
    assert not names - set(fires), f"alerts never seen firing: {sorted(names - set(fires))}"
    assert not names - set(quiet_after), f"alerts never seen resolving: {sorted(names - set(quiet_after))}"


# --- the same verdict -----------------------------------------------------------------------------------------------

_FABRIC_WIDE = {"congestion-spreading", "deadlock"}
"""Detectors whose alert names a fabric-wide condition (per priority), not a host."""
_LONG = "capacity-trend"
"""Judges days of hourly buckets in process and an hourly rate in Prometheus: compared on days-long traces
(test_capacity_rules_on_days_of_trend), not poll by poll."""


def _verdicts(alerts: Iterable[Any]) -> set[tuple[str, str]]:
    """(detector, host) of in-process alerts, as Prometheus' ALERTS carry them."""
    return {(a.detector, "" if a.detector in _FABRIC_WIDE else a.subject.split()[0]) for a in alerts
            if a.detector != _LONG}


def _series(polls: list[list[Sample]]) -> list[dict[str, str]]:
    """promtool input_series from polls: one value per poll for every series (``_`` where a poll lacks it)."""
    values: dict[tuple[str, tuple[tuple[str, str], ...]], dict[int, float]] = defaultdict(dict)
    for index, poll in enumerate(polls):
        for s in poll:
            values[s.series][index] = s.value
    out = []
    for (metric, labels), points in sorted(values.items()):
        selector = ",".join(f'{k}="{v}"' for k, v in labels)
        text = " ".join(repr(round(points[i], 9)) if i in points else "_" for i in range(len(polls)))
        out.append({"series": f"{metric}{{{selector}}}", "values": text})
    return out


def _differential_case(polls: list[list[Sample]], interval_s: float) -> tuple[dict[str, Any], int]:
    """A promtool case expecting, at every evaluation, exactly the (detector, host) pairs the monitor reports after
    the same poll -- pending or firing (``for:`` only delays firing)."""
    monitor = Monitor(limits=Thresholds())
    checks = []
    for index, poll in enumerate(polls):
        expected = _verdicts(monitor.ingest(poll))
        checks.append({"expr": f'group by (detector, host) (ALERTS{{detector!~"telemetry|{_LONG}"}})',
                       "eval_time": f"{int(index * interval_s)}s",
                       "exp_samples": [{"labels": f'{{detector="{d}"' + (f',host="{h}"' if h else "") + "}",
                                        "value": 1} for d, h in sorted(expected)]})
    alive = {"series": 'tensorfabric_exporter_info{job="tensorfabric",instance="e1",version="1"}',
             "values": f"1x{len(polls)}"}
    fired = sum(bool(c["exp_samples"]) for c in checks)
    return {"interval": f"{int(interval_s)}s", "input_series": [alive, *_series(polls)],
            "promql_expr_test": checks}, fired


# scenario -> (polls, onset_s)
SCENARIOS: dict[str, tuple[int, float]] = {
    "storm-tree": (14, 60.0), "victim": (14, 60.0), "deadlock": (14, 60.0), "loss": (14, 60.0),
    "ecn-no-cnp": (14, 60.0), "ecn-ignored": (14, 60.0), "pause-without-ecn": (14, 60.0), "link": (14, 60.0),
    "watchdog": (14, 60.0), "spreading": (14, 60.0), "storm": (14, 60.0), "healthy": (24, 0.0),
}


def _simulated_storm() -> list[list[Sample]]:
    """The simulator's storm at the monitor's pace (one snapshot per 15 s poll), as `simulate --wall-clock 15s`
    streams it, plus three polls after the stream ends (the counters stay where they were)."""
    sim = pytest.importorskip("tensorfabric.sim")
    from tensorfabric.telemetry.sim_stream import stretch

    result = sim.simulate("storm", sim.Overrides(duration_s=1.2e-3, counter_interval_s=100e-6))
    samples = sim.counter_samples(result.network, result.trace, priority=3, mtu=4096, lossless=True)
    polls = [snapshot for _, snapshot in stretch(samples, pace_s=15.0, start=0.0)]
    last = polls[-1]
    return polls + [[Sample(s.time + 15.0 * k, s.metric, s.kind, s.value, s.labels, s.source) for s in last]
                    for k in (1, 2, 3)]


def test_rules_and_detectors_reach_the_same_verdict_at_every_evaluation(tmp_path: Path, promtool: str) -> None:
    """Every synthetic scenario and the simulator's storm fed to both promtool (the shipped rules) and the monitor:
    at every 15 s evaluation the alerts pending or firing are exactly the detectors' verdicts, by detector and host.
    RocePauseWithoutEcn never pends on the storm's victims, and every storm verdict clears once the stream stops."""
    cases = []
    fired = {}
    for scenario, (polls, onset) in SCENARIOS.items():
        case, fired[scenario] = _differential_case(list(trace(scenario, polls=polls, onset=onset)), 15.0)
        cases.append(case)
    storm = _simulated_storm()
    case, fired["simulated storm"] = _differential_case(storm, 15.0)
    cases.append(case)
    assert fired.pop("healthy") == 0 and all(fired.values()), fired  # every scenario raises something, healthy nothing
    last = case["promql_expr_test"][-1]
    assert last["exp_samples"] == []  # the stream ended: nothing stands after it
    path = tmp_path / "same_verdict_test.yml"
    # JSON is YAML, and writing it is far faster than yaml.safe_dump for half a megabyte of series
    path.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "15s", "tests": cases}))
    done = _run(promtool, "test", "rules", str(path))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_capacity_rules_on_days_of_trend(tmp_path: Path, promtool: str) -> None:
    """The days-long capacity traces, evaluated hourly: the forecast fires on a fabric-wide rise, never on a
    healthy trace."""
    tests = []
    for scenario, expected in (("capacity", {"capacity-trend"}), ("healthy", set())):
        data = list(trace(scenario, polls=3 * 72 + 1, interval_s=1200.0, onset=0.0,
                          metrics=("roce_pfc_paused_seconds_total",)))
        alive = {"series": 'tensorfabric_exporter_info{job="tensorfabric",instance="e1",version="1"}',
                 "values": f"1x{len(data)}"}
        tests.append({"interval": "1200s", "input_series": [alive, *_series(data)], "promql_expr_test": [
            {"expr": 'group by (detector) (ALERTS{alertstate="firing"})', "eval_time": "72h",
             "exp_samples": [{"labels": f'{{detector="{d}"}}', "value": 1} for d in sorted(expected)]}]})
    path = tmp_path / "trend_test.yml"
    path.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "1h", "tests": tests}))
    done = _run(promtool, "test", "rules", str(path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def test_exposition_of_every_fixture_passes_promtool_check_metrics(promtool: str) -> None:
    """Every family the fixtures produce (six drivers, the rdma text forms, sysfs) lints clean."""
    from tensorfabric.telemetry.exposition import TextRenderer
    from tensorfabric.telemetry.sources import open_source

    from .telemetry_support import FIXTURES, ctx

    specs = [f"ethtool-file:{p}" for p in sorted((FIXTURES / "drivers").glob("*.txt"))]
    specs += [f"rdma-file:{p}@mlx5_9/1" for p in sorted((FIXTURES / "rdma").glob("*.txt"))]
    specs += [f"sysfs:{FIXTURES / 'sysfs'}", f"rdma-json:{FIXTURES / 'rdma_statistic.json'}"]
    monitor = Monitor([open_source(spec, ctx(host=f"h{i}")) for i, spec in enumerate(specs)])
    monitor.poll()
    text = TextRenderer({"cluster": "c1"}).render_monitor(monitor).decode()
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0 and not done.stdout.strip() and not done.stderr.strip(), done.stdout + done.stderr
