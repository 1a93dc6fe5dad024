"""DCQCN runs show the error measured against ns-3 HPCC (issue 32): the table row chosen per DCQCN form and
traffic shape, the table rebuilt from the saved benchmark alone, the report's JSON and the line people read.
Also two small homes of issue 30: the sweep's --json from Summary.to_dict, the monitor's reserved labels."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rich.console import Console

from tensorfabric.cli.simulate import dcqcn_error_line, render
from tensorfabric.errors import InputError
from tensorfabric.sim.accuracy import DCQCN_TABLE_PATH, dcqcn_error, for_flows, nearest_dcqcn
from tensorfabric.sim.report import simulate_report
from tensorfabric.sim.scenarios import Overrides, simulate

ROOT = Path(__file__).resolve().parents[2]
FIRMWARE_ECN = {"kmin_bytes": 50_000.0, "kmax_bytes": 200_000.0, "pmax": 0.2}


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_vs_ns3", ROOT / "benchmarks" / "sim_vs_ns3.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shipped_table_is_the_saved_benchmark() -> None:
    # --write-table needs no ns-3: the shipped file is exactly what it builds from the saved results.
    saved = json.loads((ROOT / "benchmarks" / "results" / "sim_vs_ns3.json").read_text())
    assert _bench().accuracy_table(saved) == json.loads(DCQCN_TABLE_PATH.read_text())


@pytest.mark.parametrize(("params", "kind", "hosts", "name", "p50"), [
    ("firmware", "incast", 128, "incast-k8-16x4MB", -0.012),
    ("firmware", "incast", 16, "incast-k4-15x4MB", -0.006),
    ("firmware", "perm", 16, "perm-k4-16x4MB", 0.133),
    ("firmware", "perm", 128, "perm-k8-128x4MB", -0.029),
    ("paper", "incast", 128, "incast-k8-16x4MB", -0.033),
    ("paper", "perm", 16, "perm-k4-16x4MB", -0.660),
    ("paper", "perm", 128, "perm-k8-128x4MB", -0.772),
])
def test_row_chosen_by_form_and_shape(params: str, kind: str, hosts: int, name: str, p50: float) -> None:
    m = nearest_dcqcn(params, kind, hosts, 4e6)
    assert m is not None and (m.name, m.params, m.kind, m.distance) == (name, params, kind, 0.0)
    assert m.rel_error["p50"] == pytest.approx(p50, abs=5e-4)
    assert nearest_dcqcn("none", kind, hosts, 4e6) is None  # PFC alone: htsim's table speaks


def test_firmware_incast_record_in_words() -> None:
    rec = dcqcn_error("firmware", "incast", 128, 4e6, FIRMWARE_ECN)
    assert rec is not None and rec["warning"] is None and rec["notes"] == []
    assert rec["reference"] == "ns-3 HPCC" and rec["nearest"] == "incast-k8-16x4MB"
    assert dcqcn_error_line(rec) == (
        "model error vs ns-3 HPCC, DCQCN firmware parameters: p50 -1.2%, p99 +0.7%, max +0.7% on a 16→1 incast of "
        "4 MB, k = 8 fat tree (incast-k8-16x4MB), flow by flow median 3.6%")


def test_paper_permutation_warns_with_the_figure() -> None:
    rec = dcqcn_error("paper", "perm", 128, 4e6, {"kmin_bytes": 5e3, "kmax_bytes": 2e5, "pmax": 0.01})
    assert rec is not None and rec["notes"] == []
    assert rec["warning"].startswith("outside 10% of ns-3 HPCC on perm-k8-128x4MB: p50 -77.2%, p99 -15.2%, "
                                     "max -15.2% (the fluid form cuts at the expected CNP rate")
    assert "\nwarning: outside 10%" in dcqcn_error_line(rec)
    # A different marking, or a run far from every measured one, is said too.
    other = dcqcn_error("paper", "perm", 8, 32e3, FIRMWARE_ECN)
    assert other is not None and len(other["notes"]) == 2
    assert "this run Kmin 50 KB / Kmax 200 KB / Pmax 0.2" in other["notes"][1]


def test_for_flows_adds_dcqcn_only_when_it_acts() -> None:
    dsts, sizes = ["h0"] * 16, [4e6] * 16
    plain = for_flows(dsts, sizes, 128, "none")
    assert plain is not None and "dcqcn" not in plain and plain["reference"] == "htsim"
    fw = for_flows(dsts, sizes, 128, "firmware", ecn=FIRMWARE_ECN)
    assert fw is not None and fw["dcqcn"]["nearest"] == "incast-k8-16x4MB"
    assert {k: v for k, v in fw.items() if k != "dcqcn"}.keys() >= plain.keys()  # old keys kept, one added
    off = for_flows(dsts, sizes, 128, "firmware", ecn_enabled=False)
    assert off is not None and "dcqcn" not in off and "ECN is off" in off["notes"][-1]


def test_unreadable_table_is_an_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "t.json"
    bad.write_text('{"scenarios": {}}')
    with pytest.raises(InputError, match="DCQCN accuracy table"):
        nearest_dcqcn("paper", "perm", 16, 4e6, path=bad)


@pytest.fixture(scope="module")
def paper_perm() -> Any:
    return simulate_report(simulate("permutation", Overrides(flows=16, size_bytes=2e5, dcqcn="paper")))


def test_report_json_keeps_keys_and_adds_ns3(paper_perm: Any) -> None:
    doc = json.loads(paper_perm.to_json())
    assert list(doc) == ["scenario", "params", "sim_time_s", "wall_s", "flows", "drops", "pause", "queues",
                         "reference_error"]
    err = doc["reference_error"]
    assert {"nearest", "distance", "rel_error", "flow_median_abs_rel_error", "worst_abs_rel_error", "draws",
            "reference_self_rel_error", "notes"} <= set(err)
    assert err["dcqcn"]["reference"] == "ns-3 HPCC" and err["dcqcn"]["params"] == "paper"
    assert err["dcqcn"]["nearest"] == "perm-k4-16x4MB" and err["dcqcn"]["rel_error"]["p50"] < -0.5
    assert "fluid form" in err["dcqcn"]["warning"]


def test_renderer_shows_ns3_before_htsim(paper_perm: Any) -> None:
    out = io.StringIO()
    render(paper_perm, Console(file=out, width=400, color_system=None))
    text = out.getvalue()
    ns3 = text.index("model error vs ns-3 HPCC, DCQCN paper parameters: p50 -66.0%, p99 -54.2%, max -54.2%")
    assert text.index("warning: outside 10% of ns-3 HPCC on perm-k4-16x4MB") > ns3
    assert text.index("PFC alone, model error vs packet-level reference (htsim)") > ns3
    assert "the reference has no DCQCN" not in text


def test_sweep_json_is_summary_to_dict() -> None:
    from tensorfabric.sim.sweep import SweepRun
    from tensorfabric.sim.sweep_report import Summary, parse_budget

    run = SweepRun(rows=(), ran=3, resumed=1, ignored=0, wall_s=1.5)
    s = Summary("x", 4, [], [], parse_budget("p99=2ms"), None, None, 0, 0, run, 0, "")
    files = {"rows.jsonl": "out/rows.jsonl", "summary.json": "out/summary.json"}
    # What cli/simulate.py built before the method: byte for byte.
    old = json.dumps({**s.to_dict(), "files": files, "wall_s": run.wall_s}, indent=2)
    assert json.dumps(s.to_dict(files), indent=2) == old
    assert "files" not in s.to_dict()


def test_monitor_reserved_labels_have_one_home() -> None:
    from tensorfabric.metrics_catalogue import LABELS
    from tensorfabric.telemetry.exposition import RESERVED_LABELS
    from tensorfabric.telemetry.monitor_inputs import const_labels as _const_labels

    assert set(LABELS) <= RESERVED_LABELS and {"job", "instance", "detector", "version"} <= RESERVED_LABELS
    for key in ("kind", "job", "subject", "link_layer"):
        with pytest.raises(InputError, match="sets itself"):
            _const_labels((f"{key}=x",))
    assert _const_labels(("cluster=a",)) == {"cluster": "a"}
