"""The shipped rules under the real promtool: syntax, hand-written unit tests, and the synthetic scenarios."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

from tensorfabric.samples import Sample
from tensorfabric.telemetry.synth import trace

from .telemetry_support import ROOT, RULES


def _run(promtool: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=120, check=False)


def test_rules_pass_promtool_check(promtool: str) -> None:
    done = _run(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_handwritten_rule_tests_pass(promtool: str) -> None:
    files = sorted((ROOT / "tests/telemetry/promtool").glob("*_test.yml"))
    assert len(files) == 2
    done = _run(promtool, "test", "rules", *map(str, files))
    assert done.returncode == 0, done.stdout + done.stderr


def _series(samples: list[list[Sample]]) -> list[dict[str, str]]:
    """promtool input_series from a synthetic trace: one space-separated value list per series."""
    values: dict[tuple[str, tuple[tuple[str, str], ...]], list[str]] = defaultdict(list)
    for poll in samples:
        for s in poll:
            values[s.series].append(repr(round(s.value, 9)))
    out = []
    for (metric, labels), points in sorted(values.items()):
        selector = ",".join(f'{k}="{v}"' for k, v in labels)
        out.append({"series": f"{metric}{{{selector}}}", "values": " ".join(points)})
    return out


# scenario -> (polls, interval_s, onset_s, eval_time, metrics kept, detectors the rules must report)
_PAUSE_ONLY = ("roce_pfc_paused_seconds_total",)
CASES: dict[str, tuple[int, float, float, str, tuple[str, ...], set[str]]] = {
    "storm-tree": (30, 15.0, 120.0, "7m15s", (), {"pause-storm", "storm-origin", "continuous-pause"}),
    "victim": (30, 15.0, 120.0, "7m15s", (), {"continuous-pause"}),
    "deadlock": (30, 15.0, 120.0, "7m15s", (), {"deadlock", "continuous-pause"}),
    "loss": (30, 15.0, 120.0, "7m15s", (), {"lossless-loss"}),
    "ecn-no-cnp": (30, 15.0, 120.0, "7m15s", (), {"ecn-misconfig"}),
    "link": (30, 15.0, 120.0, "7m15s", (), {"link-health"}),
    "healthy": (40, 15.0, 0.0, "9m45s", (), set()),
}
# days-long traces are evaluated hourly (one promtool file per evaluation interval)
SLOW_CASES: dict[str, tuple[int, float, float, str, tuple[str, ...], set[str]]] = {
    "capacity": (3 * 72 + 1, 1200.0, 0.0, "72h", _PAUSE_ONLY, {"capacity-trend"}),
    "healthy": (3 * 72 + 1, 1200.0, 0.0, "72h", _PAUSE_ONLY, set()),
}


def test_rules_on_the_synthetic_scenarios(tmp_path: Path, promtool: str) -> None:
    """One promtool run over every scenario: exactly the expected detectors fire, and none on a healthy trace."""
    fast = _write_cases(tmp_path / "scenarios_test.yml", CASES, "15s")
    slow = _write_cases(tmp_path / "trend_test.yml", SLOW_CASES, "1h")
    done = _run(promtool, "test", "rules", str(fast), str(slow))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def _write_cases(path: Path, cases: dict[str, tuple[int, float, float, str, tuple[str, ...], set[str]]],
                 evaluation_interval: str) -> Path:
    tests = []
    for scenario, (polls, interval_s, onset, eval_time, metrics, expected) in cases.items():
        data = list(trace(scenario, polls=polls, interval_s=interval_s, onset=onset, metrics=metrics))
        alive = {"series": 'tensorfabric_exporter_info{job="tensorfabric",instance="e1",version="1"}',
                 "values": f"1x{polls}"}
        tests.append({"interval": f"{int(interval_s)}s", "input_series": [alive, *_series(data)], "promql_expr_test": [
            {"expr": 'group by (detector) (ALERTS{alertstate="firing"})', "eval_time": eval_time,
             "exp_samples": [{"labels": f'{{detector="{d}"}}', "value": 1} for d in sorted(expected)]}]})
    # JSON is YAML, and writing it is far faster than yaml.safe_dump for half a megabyte of series
    path.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": evaluation_interval,
                                "tests": tests}))
    return path


def test_exposition_of_every_fixture_passes_promtool_check_metrics(promtool: str) -> None:
    """Every family the fixtures produce (six drivers, the rdma text forms, sysfs) lints clean."""
    from tensorfabric.telemetry.engine import Monitor
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
