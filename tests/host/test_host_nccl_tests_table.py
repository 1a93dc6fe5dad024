"""The nccl-tests table as bench writes it: the same bytes as before it left cli/, and doctor's reader reads it."""

from __future__ import annotations

import pytest

from tensorfabric.host.nccl_tests import parse_nccl_tests
from tensorfabric.host.nccl_tests_table import format_table
from tensorfabric.transfer.bench import BenchConfig, BenchResult, BenchRow

_ROWS = (BenchRow(8, 2, "float", "sum", -1, 21.4, 0.0, 0.0, 0),
         BenchRow(1048576, 262144, "float", "sum", -1, 310.25, 3.38, 5.07, 0),
         BenchRow(33554432, 8388608, "float", "sum", -1, 4021.0, 8.345, 12.518, 0))


@pytest.mark.parametrize("result, config", [
    (BenchResult("all_reduce", 4, "gloo", "float32", "none", _ROWS), BenchConfig()),
    (BenchResult("all_reduce", 2, "nccl", "float32", "none", _ROWS, transport="NET/IB"), None),
    (BenchResult("all_reduce", 2, "gloo", "float32", "int8",
                 tuple(BenchRow(r.size, r.count, r.type, r.redop, r.root, r.time_us, r.algbw, r.busbw, None,
                                r.size // 4, 3.1e-3) for r in _ROWS)), None),
])
def test_format_table_is_the_bench_table(result: BenchResult, config: BenchConfig | None) -> None:
    text = format_table(result, config)
    lines = text.splitlines()
    assert lines[0].startswith(f"# tensorfabric bench: all_reduce  nranks {result.nranks}  backend")
    assert lines[-3].startswith("# Out of bounds values : ") and lines[-1] == "#"
    assert ("N/A (not checked: -c 0)" in lines[-3]) == (result.rows[0].wrong is None)
    assert f"# Avg bus bandwidth    : {result.avg_busbw:.3f}" in lines


def test_doctor_reads_what_bench_writes() -> None:
    result = BenchResult("all_reduce", 4, "gloo", "float32", "none", _ROWS)
    report = parse_nccl_tests(format_table(result, BenchConfig()), source="bench.txt")
    (table,) = report.tables
    assert [r.size for r in table.rows] == [r.size for r in _ROWS]
    assert [r.busbw for r in table.rows] == pytest.approx([r.busbw for r in _ROWS])
    assert table.avg_busbw == pytest.approx(round(result.avg_busbw, 3))
    assert report.read.used >= len(_ROWS)
