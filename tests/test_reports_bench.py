"""``tensorfabric bench``'s report as a record: ``--json`` is the sweep's ``BenchResult.to_dict()`` as the verb
printed it before; the human form is the nccl-tests table, whole or (rows streamed) its footer only."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tensorfabric.cli.bench import render
from tensorfabric.errors import InputError
from tensorfabric.host.nccl_tests_table import footer_lines, format_table
from tensorfabric.jsonable import json_default
from tensorfabric.transfer.bench import BenchConfig, BenchResult, BenchRow
from tensorfabric.transfer.bench_report import BenchReport
from tensorfabric.transfer.bench_run import check_memory, run_benchmark
from tensorfabric.transfer.launch import Placement

CONFIG = BenchConfig(op="all_reduce", min_bytes=8, max_bytes=64, factor=8, warmup=0, iters=1, codec="int8")


def _result(codec: str = "int8", wrong: int = 0) -> BenchResult:
    rows = tuple(BenchRow(size=s, count=s // 4, type="float", redop="sum", root=-1, time_us=12.5, algbw=0.01 * s,
                          busbw=0.015 * s, wrong=wrong, wire_bytes=s // 3 if codec != "none" else None,
                          max_error=0.001 if codec != "none" else None) for s in (8, 64))
    return BenchResult("all_reduce", 2, "gloo", "float32", codec, rows, "gloo/tcp", "torch",
                       ({"rank": 0, "local_rank": 0, "host": "n1", "pid": 11},))


def test_json_is_the_result_dict_as_printed_before() -> None:
    result = _result()
    report = BenchReport(result=result, config=CONFIG)
    before = json.dumps(result.to_dict(), indent=2, sort_keys=False, default=json_default) + "\n"
    assert report.to_json() == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.streamed = True  # type: ignore[misc]


@pytest.mark.parametrize("streamed", [False, True])
def test_human_form_is_the_table_or_its_footer(streamed: bool, capsys: pytest.CaptureFixture[str]) -> None:
    result = _result()
    render(BenchReport(result=result, config=CONFIG, streamed=streamed))
    expected = "\n".join(footer_lines(result)) if streamed else format_table(result, CONFIG)
    assert capsys.readouterr().out == expected + "\n"


def test_exit_code_and_curves() -> None:
    assert BenchReport(result=_result(wrong=0), config=CONFIG).exit_code == 0
    bad = BenchReport(result=_result(wrong=2), config=CONFIG, baseline=_result("none"))
    assert bad.exit_code == 1 and [c.codec for c in bad.curves] == ["int8", "none"]


def test_one_rank_sweep_streams_header_and_rows_then_reports() -> None:
    lines: list[str] = []
    report = run_benchmark(CONFIG, Placement("inprocess", 1), timeout_s=30, engine="torch", baseline=True,
                           emit=lines.append)
    assert report is not None and report.streamed and report.baseline is not None
    assert report.baseline.codec == "none" and report.result.codec == "int8"
    assert lines[0].startswith("# tensorfabric bench: all_reduce") and len(lines) == 1 + len(report.result.rows)


def test_a_sweep_that_cannot_fit_is_input_error(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 1000 kB\nMemAvailable: 100 kB\n")
    with pytest.raises(InputError, match="lower --max"):
        check_memory(1 << 20, 2, CONFIG, str(meminfo))
    check_memory(1 << 20, 2, CONFIG, str(tmp_path / "absent"))  # no meminfo: nothing to check against
