"""simulate sweep: spec expansion, one row per scenario on the real engine, the same rows from every executor,
resume after SIGINT without redoing rows, the Pareto front and the recommendation under a budget."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.cli.main import main
from tensorfabric.errors import InputError
from tensorfabric.sim import topologies
from tensorfabric.sim.sweep import place, plan_sweep, read_journal, run_point
from tensorfabric.sim.sweep_report import SettingOutcome, pareto_front, parse_budget
from tensorfabric.sim.sweep_spec import parse_placement, parse_spec

ROOT = Path(__file__).resolve().parents[2]

# Small enough that one scenario costs a few tens of milliseconds: two leaves, one spine, two hosts each.
TINY = {
    "name": "tiny",
    "topology": {"kind": "leaf-spine", "leaves": 2, "spines": 1, "hosts_per_leaf": 2, "rate": "100G"},
    "step": "2us",
    "duration": "2ms",
    "workload": {"layers": 1, "tokens": 1, "background_size": "128KB", "window": "100us"},
    "parameters": {"kmin": ["20KB", "100KB"], "kmax": ["100KB", "1MB"], "pmax": [0.2, 1.0],
                   "load": [0.3, 0.8], "placement": ["tp2", "tp2xpp2-spread"]},
}


def _write(tmp: Path, doc: dict[str, Any], name: str = "spec.yaml") -> str:
    import yaml

    path = tmp / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny sweep run in this process (--jobs 1): the rows every other executor must reproduce."""
    tmp = tmp_path_factory.mktemp("reference")
    spec = _write(tmp, TINY)
    assert main(["simulate", "sweep", spec, "--out", str(tmp / "out"), "--jobs", "1", "--json"]) == 0
    return tmp / "out"


# ---------------------------------------------------------------- the spec


def test_grid_expands_every_combination_and_skips_refused_ones() -> None:
    plan = plan_sweep(parse_spec(TINY))
    # 2 x 2 x 2 knob combinations x 4 conditions, less Kmin 100KB / Kmax 100KB (not below): 2 x 4 skipped
    assert len(plan.points) == 24 and plan.skipped == 8 and "Kmin" in plan.why_skipped
    assert len({p.id for p in plan.points}) == 24
    assert [p.index for p in plan.points] == list(range(24))
    # the same inputs give the same ids in another expansion (what resume relies on)
    assert [p.id for p in plan_sweep(parse_spec(TINY)).points] == [p.id for p in plan.points]


def test_random_search_is_seeded_and_crosses_listed_conditions() -> None:
    doc = {**TINY, "search": "random", "samples": 6, "seed": 3,
           "parameters": {"kmin": {"min": "10KB", "max": "90KB", "scale": "log"}, "kmax": ["100KB", "1MB"],
                          "firmware.ai_bps": {"min": "5Mbit", "max": "50Mbit"}, "load": [0.2, 0.6]}}
    a, b = plan_sweep(parse_spec(doc)), plan_sweep(parse_spec(doc))
    assert [p.id for p in a.points] == [p.id for p in b.points]
    assert len(a.points) == 12  # six settings, each under both loads
    settings_seen = {p.setting for p in a.points}
    assert len(settings_seen) == 6
    for p in a.points:
        v = p.values()
        assert 10e3 <= v["kmin"] <= 90e3 and v["kmin"] == round(v["kmin"]) and 5e6 <= v["firmware.ai_bps"] <= 50e6
    other = plan_sweep(parse_spec({**doc, "seed": 4}))
    assert {p.setting for p in other.points} != settings_seen


@pytest.mark.parametrize("change, needle", [
    ({"parameters": {"kmin": ["5XB"]}}, "parameters.kmin[0]"),
    ({"parameters": {"tornado": [1]}}, "unknown parameter"),
    ({"parameters": {"kmin": {"min": "1KB", "max": "9KB"}}}, "steps: N"),
    ({"parameters": {"placement": {"min": 1, "max": 2}}}, "list of values"),
    ({"parameters": {"placement": ["tp9xpp9"]}}, "needs 81 hosts"),
    ({"parameters": {"load": [1.5]}}, "fraction"),
    ({"parameters": {"kmin": []}}, "empty list"),
    ({"parameters": {"kmin": ["1KB", "1KB"]}}, "twice"),
    ({"step": "50us"}, "too coarse"),
    ({"search": "bayes"}, "grid, random"),
    ({"fabric": "x.yaml"}, "exactly one of"),
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"workload": {"layers": 0}}, "layers"),
    ({"topology": {"kind": "torus"}}, "torus"),
])
def test_bad_specs_name_the_key(change: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError, match=None) as err:
        plan_sweep(parse_spec({**TINY, **change}, "s.yaml"))
    assert needle in str(err.value)


def test_placements() -> None:
    assert parse_placement("TP4") == "tp4xpp1-packed" and parse_placement("pp4-spread") == "tp1xpp4-spread"
    for bad in ("tp1", "tp", "tp2xpp2-diagonal", "x", "tp0xpp3"):
        with pytest.raises(InputError):
            parse_placement(bad)
    fab = topologies.leaf_spine(2, 1, 2, 100e9)  # h0 h1 on leaf0, h2 h3 on leaf1
    assert place(fab, "tp2xpp1-packed") == [["h0", "h1"]]
    assert place(fab, "tp2xpp1-spread") == [["h0", "h2"]]
    assert place(fab, "tp2xpp2-packed") == [["h0", "h1"], ["h2", "h3"]]


@settings(max_examples=25, deadline=None)
@given(text=st.text(max_size=24))
def test_budget_and_placement_parse_or_refuse(text: str) -> None:
    for parse in (parse_budget, parse_placement):
        try:
            parse(text)
        except InputError:
            pass


def test_budget() -> None:
    b = parse_budget("p99=2ms, paused=1%,drops=0")
    assert b.to_dict() == {"fct_p99_s": 0.002, "paused_fraction": 0.01, "drops_bytes": 0.0}
    for bad in ("p99", "p98=1ms", "paused=2", "p99=-1ms", ""):
        with pytest.raises(InputError):
            parse_budget(bad)


# ---------------------------------------------------------------- rows


def test_a_row_holds_inputs_and_outcome_and_is_deterministic() -> None:
    plan = plan_sweep(parse_spec(TINY))
    point = next(p for p in plan.points if p.values()["load"] == 0.8)
    row = run_point(plan.base, point)
    assert row == run_point(plan.base, point)
    assert row["id"] == point.id and row["kmin_bytes"] == point.values()["kmin"] and row["load"] == 0.8
    assert row["error"] is None and row["unfinished"] == 0 and row["flows"] > 4
    assert 0 < row["fct_p50_s"] <= row["fct_p99_s"] <= row["fct_max_s"] <= row["sim_time_s"]
    assert 0 <= row["paused_fraction"] <= 1 and row["drops_bytes"] == 0 and row["token_latency_s"] > 0
    assert "wall_s" not in row  # rows carry no timing, so every executor gives the same ones


def test_cli_writes_rows_plot_and_summary(reference: Path) -> None:
    rows = _rows(reference)
    assert [r["index"] for r in rows] == list(range(24))
    summary = json.loads((reference / "summary.json").read_text())
    assert summary["scenarios"] == 24 and summary["ran"] == 24 and summary["settings"] == 6
    assert (reference / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pq.read_table(reference / "rows.parquet")
    assert table.num_rows == 24 and table.column("id").to_pylist() == [r["id"] for r in rows]


def test_outputs_are_never_replaced_without_force_or_resume(reference: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    spec = _write(tmp_path, TINY)
    out = tmp_path / "out"
    out.mkdir()
    (out / "summary.json").write_text("someone's file")
    assert main(["simulate", "sweep", spec, "--out", str(out), "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert "--resume" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert (out / "summary.json").read_text() == "someone's file"
    assert main(["simulate", "sweep", spec, "--out", str(out), "--resume", "--force"]) == 2
    # a finished sweep resumed runs nothing and gives the same rows
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    (resumed / "rows.jsonl").write_text((reference / "rows.jsonl").read_text())
    capsys.readouterr()
    assert main(["simulate", "sweep", spec, "--out", str(resumed), "--resume", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ran"] == 0 and doc["resumed"] == 24
    assert (resumed / "rows.jsonl").read_text() == (reference / "rows.jsonl").read_text()


def test_resume_with_a_grown_spec_runs_only_the_new_scenarios(reference: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    grown = {**TINY, "parameters": {**TINY["parameters"], "pmax": [0.2, 0.5, 1.0]}}
    spec = _write(tmp_path, grown)
    out = tmp_path / "out"
    out.mkdir()
    (out / "rows.jsonl").write_text((reference / "rows.jsonl").read_text())
    assert main(["simulate", "sweep", spec, "--out", str(out), "--resume", "--json", "--jobs", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["scenarios"] == 36 and doc["resumed"] == 24 and doc["ran"] == 12
    rows = _rows(out)
    assert [r["index"] for r in rows] == list(range(36))  # old rows take their place in the new plan
    assert {r["id"] for r in rows} >= {r["id"] for r in _rows(reference)}


def test_without_pyarrow_the_rows_are_jsonl_only(reference: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    spec = _write(tmp_path, TINY)
    out = tmp_path / "out"
    out.mkdir()
    (out / "rows.jsonl").write_text((reference / "rows.jsonl").read_text())
    assert main(["simulate", "sweep", spec, "--out", str(out), "--resume", "--json"]) == 0
    assert not (out / "rows.parquet").exists() and len(_rows(out)) == 24
    assert main(["simulate", "sweep", spec, "--out", str(out), "--resume", "--address", "auto"]) == 2


def test_journal_drops_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b", "fl')
    assert [r["id"] for r in read_journal(path)] == ["a"]
    assert path.read_text() == '{"id": "a"}\n'  # the next append starts on a line of its own
    path.write_text("not json\n")
    with pytest.raises(InputError, match="--force"):
        read_journal(path)


# ---------------------------------------------------------------- executors


def test_process_pool_gives_the_reference_rows(reference: Path, tmp_path: Path) -> None:
    spec = _write(tmp_path, TINY)
    assert main(["simulate", "sweep", spec, "--out", str(tmp_path / "pool"), "--jobs", "2", "--json"]) == 0
    assert (tmp_path / "pool" / "rows.jsonl").read_bytes() == (reference / "rows.jsonl").read_bytes()


def test_ray_gives_the_process_pool_rows(reference: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="ray is not installed (pip install 'tensorfabric[sweep]'; make test does)")
    spec = _write(tmp_path, TINY)
    # The executor starts a local cluster as ray.init(num_cpus=2, include_dashboard=False) and shuts it down.
    assert main(["simulate", "sweep", spec, "--out", str(tmp_path / "ray"), "--executor", "ray", "--jobs", "2",
                 "--json"]) == 0
    assert (tmp_path / "ray" / "rows.jsonl").read_bytes() == (reference / "rows.jsonl").read_bytes()


def test_sigint_then_resume_redoes_no_row(reference: Path, tmp_path: Path) -> None:
    # More scenarios than the reference, so the interrupt lands mid-sweep; the reference's are among them.
    doc = {**TINY, "parameters": {**TINY["parameters"], "load": [0.3, 0.8, 0.5]}}
    spec = _write(tmp_path, doc)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "tensorfabric", "simulate", "sweep", spec, "--out", str(out), "--jobs", "2"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # A suite started as a shell's background job ignores SIGINT, and a child would inherit that.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    journal = out / "rows.jsonl"
    deadline = time.monotonic() + 120
    while not (journal.exists() and journal.read_text().count("\n") >= 3):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no rows within 120 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--resume" in err
    before = journal.read_text()
    kept = len(before.splitlines())
    assert 3 <= kept < 36, "the interrupt should land mid-sweep"
    result = subprocess.run([*cmd, "--resume", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["resumed"] == kept and summary["ran"] == 36 - kept  # nothing finished was run again
    rows = _rows(out)
    assert [r["index"] for r in rows] == list(range(36))
    first_run = {json.loads(line)["id"]: line for line in before.splitlines()}
    by_id = {json.loads(line)["id"]: line for line in journal.read_text().splitlines()}
    assert all(by_id[i] == line for i, line in first_run.items())
    expected = {r["id"]: {k: v for k, v in r.items() if k != "index"} for r in _rows(reference)}
    got = {r["id"]: {k: v for k, v in r.items() if k != "index"} for r in rows}
    assert {i: got[i] for i in expected} == expected  # the shared scenarios match the uninterrupted run


# ---------------------------------------------------------------- the report


def _outcome(p99: float, paused: float, name: int) -> SettingOutcome:
    worst = {"fct_p50_s": p99 / 2, "fct_p99_s": p99, "fct_max_s": p99, "token_latency_s": p99,
             "paused_fraction": paused, "drops_bytes": 0.0}
    return SettingOutcome({"kmin": float(name)}, 1, 0, 0, worst, False, math.inf)


@settings(max_examples=25, deadline=None)
@given(points=st.lists(st.tuples(st.floats(1e-6, 1e-2), st.floats(0, 1)), min_size=1, max_size=30))
def test_pareto_front_is_exactly_the_undominated_settings(points: list[tuple[float, float]]) -> None:
    outcomes = [_outcome(p, q, i) for i, (p, q) in enumerate(points)]
    front = pareto_front(outcomes)

    def dominated(o: SettingOutcome) -> bool:
        a = (o.worst["fct_p99_s"], o.worst["paused_fraction"])
        return any((b := (x.worst["fct_p99_s"], x.worst["paused_fraction"])) != a and b[0] <= a[0] and b[1] <= a[1]
                   for x in outcomes)

    assert not any(dominated(o) for o in front)
    assert all(any(f.worst["fct_p99_s"] <= o.worst["fct_p99_s"] and
                   f.worst["paused_fraction"] <= o.worst["paused_fraction"] for f in front) for o in outcomes)


def test_recommendation_meets_the_budget_on_every_condition(reference: Path, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    spec = _write(tmp_path, TINY)
    rows = _rows(reference)
    worst_by: dict[tuple[float, float, float], list[dict[str, Any]]] = {}
    for r in rows:
        worst_by.setdefault((r["kmin_bytes"], r["kmax_bytes"], r["pmax"]), []).append(r)
    # a budget just above the best setting's worst case: exactly the settings within it meet it
    p99 = sorted(max(r["fct_p99_s"] for r in rs) for rs in worst_by.values())[2]
    out = tmp_path / "out"
    (out).mkdir()
    (out / "rows.jsonl").write_text((reference / "rows.jsonl").read_text())
    assert main(["simulate", "sweep", spec, "--out", str(out), "--resume", "--json",
                 "--budget", f"p99={p99 * 1e6:.3f}us"]) == 0
    doc = json.loads(capsys.readouterr().out)
    meeting = [k for k, rs in worst_by.items() if max(r["fct_p99_s"] for r in rs) <= p99 * (1 + 1e-9)]
    assert doc["met_by"] == len(meeting) >= 1
    rec = doc["recommendation"]
    key = (rec["setting"]["kmin"], rec["setting"]["kmax"], rec["setting"]["pmax"])
    assert key in meeting and rec["worst"]["fct_p99_s"] == min(max(r["fct_p99_s"] for r in worst_by[k])
                                                               for k in meeting)
    # nothing meets an impossible budget: exit 1 and the closest setting named
    assert main(["simulate", "sweep", spec, "--out", str(out), "--resume", "--budget", "p99=1ns"]) == 1
    assert "closest" in capsys.readouterr().out
