"""nccl-tests/rccl-tests output (``doctor --nccl-tests``): the expected table of busbw at the largest size per fixture,
the verdicts built on it, its stability under every envelope (metamorphic), bad input, and the CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings

from metamorphic import mutations
from tensorfabric.cli.main import main
from tensorfabric.errors import InputError, ParseError
from tensorfabric.findings import Finding
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import DoctorReport, run_doctor
from tensorfabric.host.nccl_tests import (
    LineRate,
    NcclTestsReport,
    line_rate_flag,
    parse_line_rate,
    parse_nccl_tests,
    resolve_line_rate,
    summary_line,
)

from .conftest import FIXTURES, SYSFS

TESTS = FIXTURES / "nccl_tests"
EXPECTED = list(csv.DictReader((TESTS / "expected.csv").open()))
NAMES = sorted({row["fixture"] for row in EXPECTED})
MLX5 = SYSFS / "mlx5-roce"


def _read(name: str) -> NcclTestsReport:
    return parse_nccl_tests((TESTS / name).read_bytes(), source=name)


def _doctor(name: str, line_rate: str | None = None, sysfs: Path = MLX5) -> DoctorReport:
    return run_doctor(discover(str(sysfs)), environ={}, nccl_tests=_read(name),
                      line_rate=line_rate_flag(line_rate) if line_rate else None)


def _rules(report: DoctorReport) -> dict[str, Finding]:
    return {f.rule: f for f in report.findings if f.rule.startswith("nccl-tests.")}


def test_every_fixture_is_in_the_expected_table() -> None:
    on_disk = {p.name for p in TESTS.iterdir() if p.name != "expected.csv"}
    assert on_disk == set(NAMES) and len(NAMES) >= 6


@pytest.mark.parametrize("name", NAMES)
def test_expected_table(name: str) -> None:
    report = _read(name)
    expected = [row for row in EXPECTED if row["fixture"] == name]
    assert len(report.tables) == len(expected), [summary_line(t, None) for t in report.tables]
    for table, row in zip(report.tables, expected, strict=True):
        assert table.largest_size == int(row["largest_size"])
        assert f"{table.busbw_at_largest:.2f}" == row["busbw_at_largest"]
        assert (table.test, table.collective) == (row["test"], row["collective"])
        assert table.ranks == (int(row["ranks"]) if row["ranks"] else None)
        assert len(table.hosts) == (int(row["hosts"]) if row["hosts"] else 0)
        assert " ".join(str(r.size) for r in table.wrong_rows) == row["wrong_sizes"]
    assert not report.read.not_understood and not report.read.warnings


def _verdict(report: NcclTestsReport) -> list[tuple[int | None, float | None]]:
    return sorted((t.largest_size, t.busbw_at_largest) for t in report.tables if t.rows)


def _protect(line: str) -> bool:
    return line.lstrip().startswith(("#",)) or line.strip()[:1].isdigit()


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=25, deadline=None)
@given(mutate=mutations(protect=_protect))
def test_verdict_survives_envelopes_prose_and_cuts(name: str, mutate: object) -> None:
    text = (TESTS / name).read_text()
    assert callable(mutate)
    assert _verdict(parse_nccl_tests(mutate(text))) == _verdict(parse_nccl_tests(text))


def test_rows_read_every_column_form() -> None:
    old = _read("old_error_column_two_runs.log")
    alltoall = old.tables[1].rows[-1]
    # pre-2.13 "error" is the largest deviation: the bogus in-place 1e+00 of alltoall is no wrong element
    assert alltoall.in_place is not None and alltoall.in_place.max_error == 1.0 and alltoall.wrong == 0
    assert alltoall.redop == "" and alltoall.root is None
    per_iter = _read("per_iter_all_types.log").tables[0]
    assert {r.type for r in per_iter.rows} >= {"int8", "bfloat16", "double"} and len(per_iter.rows) == 30
    first = per_iter.rows[0]
    assert first.out_of_place is not None and first.out_of_place.time_us == 1425.99
    assert first.in_place is not None and first.in_place.busbw == 663.64
    inplace_only = _read("rccl_broadcast_inplace.log").tables[0].rows[0]
    assert inplace_only.out_of_place is None and inplace_only.in_place is not None and inplace_only.root == 0
    unchecked = _read("rows_only.txt").tables[0].rows[0]
    assert unchecked.out_of_place is not None and unchecked.out_of_place.wrong is None


def test_versions_footers_and_independent_runs() -> None:
    roce = _read("allreduce_2node_roce.log")
    assert (roce.version, roce.nccl_version) == ("2.19.6", "2.29.3")
    table = roce.tables[0]
    assert table.avg_busbw == 127.652 and table.out_of_bounds == 0 and table.scope == "multi-node"
    assert _read("rccl_side_by_side.log").version == "develop:7c1e52a"
    assert _read("mpirun_tagged_efa.log").nccl_version == "2.16.2"
    srun = _read("wrong_results_srun.log").tables[0]
    assert (srun.out_of_bounds, srun.avg_check) == (2, "FAILED")
    assert _read("interleaved_no_mpi.log").independent_runs
    assert not roce.independent_runs


def test_wrong_results_are_an_error_naming_the_size() -> None:
    report = _doctor("wrong_results_srun.log", "4x400G")
    found = _rules(report)
    assert found["nccl-tests.wrong-results"].severity == "error" and report.exit_code == 1
    assert "1048576 (1024 out-of-place, 37 in-place" in found["nccl-tests.wrong-results"].message
    assert found["nccl-tests.min-bw-failed"].severity == "warning"


def test_busbw_against_the_line_rate() -> None:
    low = _rules(_doctor("allreduce_1gpu_per_node_low.log", "400G"))
    below = low["nccl-tests.below-line-rate"]
    # 31.69 GB/s = 253.5 Gb/s of 400 Gb/s: GB/s is 1e9 bytes, the line rate bits
    assert below.severity == "warning" and below.evidence["fraction_of_line_rate"] == pytest.approx(0.634, abs=1e-3)
    healthy = _rules(_doctor("allreduce_2node_roce.log", "8x400G"))
    assert "nccl-tests.below-line-rate" not in healthy and "nccl-tests.above-line-rate" not in healthy
    per_nic = _rules(_doctor("allreduce_2node_roce.log", "400G"))
    assert per_nic["nccl-tests.above-line-rate"].severity == "info"
    assert set(_rules(_doctor("rccl_side_by_side.log", "400G"))) == {"nccl-tests.single-node"}
    assert "nccl-tests.single-rank" in _rules(_doctor("interleaved_no_mpi.log"))
    assert _rules(_doctor("interleaved_no_mpi.log"))["nccl-tests.independent-runs"].severity == "warning"


def test_line_rate_falls_back_to_the_roce_ports() -> None:
    report = _doctor("allreduce_1gpu_per_node_low.log")
    assert report.line_rate is not None and report.line_rate.bps == 800e9
    assert report.line_rate.source.startswith("sysfs: mlx5_0:1 400Gbit/s + mlx5_1:1")
    assert "nccl-tests.below-line-rate" in _rules(report)
    bare = _doctor("allreduce_1gpu_per_node_low.log", sysfs=SYSFS / "no-rdma")
    assert bare.line_rate is None and "nccl-tests.no-line-rate" in _rules(bare)
    assert resolve_line_rate(None, None) is None
    given = LineRate(4e11, "--line-rate 400G")
    assert resolve_line_rate(discover(str(MLX5)), given) is given


def test_small_sweep_is_not_judged() -> None:
    text = "\n".join(["#  Rank  0 Group  0 Pid   101 on      h1 device  0 [0000:1a:00] NVIDIA H100",
                      "#  Rank  1 Group  0 Pid   202 on      h2 device  0 [0000:1a:00] NVIDIA H100",
                      "   134217728      33554432     float     sum      -1   5432.1   24.71   24.71      0"
                      "   5400.2   24.85   24.85      0"])
    report = run_doctor(discover(str(MLX5)), environ={}, nccl_tests=parse_nccl_tests(text),
                        line_rate=line_rate_flag("400G"))
    assert set(_rules(report)) == {"nccl-tests.not-bandwidth-bound"}


def test_line_rate_forms() -> None:
    assert parse_line_rate("400G") == 400e9 and parse_line_rate("8x400G") == 3.2e12
    assert parse_line_rate("2 x 200Gb/s") == 400e9 and parse_line_rate("3.2T") == 3.2e12
    for bad in ("400", "0x400G", "fast"):
        with pytest.raises(InputError):
            parse_line_rate(bad)


def test_tolerates_then_reports() -> None:
    cut = ("#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
           "     1048576        262144     float     sum      -1    28.15   37.25   65.19      0    27.52   38.10\n"
           "     2097152        524288     float     sum      -1    37.03   56.64   99.11      0    35.22   59.55"
           "  104.21      0\n# Future counter       : 12\n")
    report = parse_nccl_tests(cut, source="cut.txt")
    assert [r.size for r in report.tables[0].rows] == [2097152]
    assert report.read.not_understood == (2, 4) and "line 2" in report.read.warnings[0]
    avg_only = parse_nccl_tests("# Avg bus bandwidth    : 42.5 \n")
    assert avg_only.tables[0].avg_busbw == 42.5 and not avg_only.tables[0].rows
    with pytest.raises(ParseError, match="nothing here reads as nccl-tests output.*first line is 'hello'"):
        parse_nccl_tests("hello\nworld\n")
    with pytest.raises(ParseError, match="not text"):
        parse_nccl_tests(b"\x00\x01binary")


def test_long_lines_stay_linear() -> None:
    # a 10 MB line is over intake's limit; a 60 kB row-like line is tokenised once and refused by its shape
    huge = "1 " * 5_000_000
    wide = "8 2 " + "1.0 " * 15_000
    report = parse_nccl_tests(huge + "\n" + wide + "\n" + _sample_row() + "\n")
    assert report.read.long_lines == (1,) and len(report.tables[0].rows) == 1
    assert report.read.not_understood == (2,)


def _sample_row() -> str:
    return ("   268435456      67108864     float     sum      -1   1494.9  179.56  314.24      0"
            "   1514.6  177.23  310.15      0")


def test_cli_json_and_people(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(TESTS / "allreduce_1gpu_per_node_low.log")
    code = main(["doctor", "--sysfs-root", str(MLX5), "--nccl-tests", path, "--line-rate", "400G", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == (1 if any(f["severity"] == "error" for f in data["findings"]) else 0)
    block = data["nccl_tests"]
    assert block["tables"][0]["busbw_at_largest"] == 31.69 and block["tables"][0]["largest_size"] == 8589934592
    assert block["tables"][0]["fraction_of_line_rate"] == pytest.approx(0.6338, abs=1e-4)
    assert block["line_rate"]["bps"] == 400e9 and block["read"]["format"] == "nccl-tests output"
    assert any(f["rule"] == "nccl-tests.below-line-rate" for f in data["findings"])
    assert main(["doctor", "--sysfs-root", str(MLX5), "--nccl-tests", str(TESTS / "wrong_results_srun.log")]) == 1
    out = " ".join(capsys.readouterr().out.split())  # the console wraps at its width
    assert "nccl-tests all_reduce_perf (16 ranks, 4 hosts; from task 0): busbw 77.57 GB/s at 4GiB" in out


def test_cli_refuses_a_line_rate_without_unit(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(TESTS / "rows_only.txt")
    assert main(["doctor", "--sysfs-root", str(MLX5), "--nccl-tests", path, "--line-rate", "400"]) == 2
    assert "no unit" in capsys.readouterr().err


def test_forks_and_multi_host_pastes() -> None:
    # mscclpp-test: no type column, in-place first, the in-place group printed blank
    mscclpp = ("#                                    in-place                       out-of-place          \n"
               "#       size         count     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n"
               "  1073741824      16777216                                     23275   46.13   43.25      0\n")
    row = parse_nccl_tests(mscclpp).tables[0].rows[0]
    assert row.in_place is None and row.out_of_place is not None and row.out_of_place.busbw == 43.25
    # pdsh running a one-node test on two hosts: one table per host
    line = ("   134217728      33554432     float     sum      -1   1210.4  110.89  194.05      0"
            "   1208.8  111.03  194.31      0")
    pdsh = f"gpu-node-07: {line}\ngpu-node-08: {line.replace('194.31', '180.02')}\n"
    tables = parse_nccl_tests(pdsh).tables
    assert [(t.origin, t.busbw_at_largest) for t in tables] == [("gpu-node-07", 194.31), ("gpu-node-08", 194.05)]
    # a build log names every binary it links; only an invocation or a separator names the test that runs
    build = "Linking  build/all_reduce.o > /opt/nccl-tests/build/hypercube_perf\n" + line + "\n"
    assert parse_nccl_tests(build).tables[0].test == ""
    assert parse_nccl_tests("======== sendrecv_perf ========\n" + line).tables[0].collective == "sendrecv"


def test_a_paste_cut_before_the_sweep_ends_is_flagged() -> None:
    lines = (TESTS / "allreduce_2node_roce.log").read_text().splitlines()
    cut = "\n".join(line for line in lines if not line.lstrip().startswith(("8589934592", "4294967296")))
    table = parse_nccl_tests(cut).tables[0]
    assert table.cut_short and table.largest_size == 2147483648
    report = run_doctor(discover(str(MLX5)), environ={}, nccl_tests=parse_nccl_tests(cut))
    assert _rules(report)["nccl-tests.cut-short"].severity == "warning"
    assert not _read("allreduce_2node_roce.log").tables[0].cut_short
