"""`tensorfabric bench`: bad input, table layout, JSON keys, bus factors, plots, spawned ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.transfer.bench import BenchConfig, _pattern, _sum_of_patterns, bus_factor, rank_bytes, sizes
from tensorfabric.transfer.engines.nixl_engine import available

needs_nixl = pytest.mark.skipif(not available(), reason="nixl-cu12 is not installed (pip install 'tensorfabric[nixl]')")

ROW_KEYS = {"size", "count", "type", "redop", "root", "time_us", "algbw", "busbw", "wrong"}
SMALL = ["--max", "4K", "--iters", "2", "--warmup", "1"]


@pytest.mark.parametrize(("argv", "named"), [
    (["--min", "0"], "'0'"),
    (["--max", "1Q"], "'1Q'"),
    (["--op", "foo"], "'foo'"),
    (["--nproc", "0"], "0"),
    (["--codec", "zip"], "'zip'"),
    (["--dtype", "float64"], "'float64'"),
    (["--min", "1M", "--max", "1K"], "--min"),
    (["--op", "broadcast", "--codec", "int8"], "broadcast"),
])
def test_bad_input_prints_one_line_and_exits_2(argv: list[str], named: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *argv]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert named in lines[0]
    assert captured.out == ""


def test_bad_input_names_the_accepted_forms(capsys: pytest.CaptureFixture[str]) -> None:
    main(["bench", "--op", "foo"])
    assert "all_reduce" in capsys.readouterr().err
    main(["bench", "--max", "1Q"])
    assert "128M" in capsys.readouterr().err
    main(["bench", "--codec", "zip"])
    assert "int8" in capsys.readouterr().err
    main(["bench", "--nproc", "0"])
    assert "1<=x" in capsys.readouterr().err


def test_table_has_nccl_tests_columns_and_footer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "#wrong" in out and "algbw" in out and "busbw" in out and "(us)" in out
    assert "# Avg bus bandwidth    :" in out
    rows = [line.split() for line in out.splitlines() if not line.startswith("#")]
    assert [int(r[0]) for r in rows] == sizes(8, 4096, 2)
    assert all(r[2:5] == ["float", "sum", "-1"] and r[-1] == "0" for r in rows)


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv"])
def test_every_op_runs_and_checks_on_one_rank(op: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--op", op, "--dtype", "bfloat16", "--json", *SMALL]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["op"] == op and doc["dtype"] == "bfloat16"
    assert all(row["wrong"] == 0 for row in doc["rows"])


def test_json_has_exactly_the_issue_keys_and_codec_extras(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--json", "--codec", "int4", *SMALL]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"op", "nranks", "backend", "engine", "transport", "dtype", "codec", "rows", "avg_busbw",
                        "ranks"}
    assert doc["transport"] == "local" and doc["engine"] == "torch" and doc["ranks"][0]["rank"] == 0
    assert doc["codec"] == "int4" and doc["nranks"] == 1
    for row in doc["rows"]:
        assert set(row) == ROW_KEYS | {"wire_bytes", "max_error"}
        assert row["wrong"] == 0
    assert main(["bench", "--json", *SMALL]) == 0
    assert all(set(row) == ROW_KEYS for row in json.loads(capsys.readouterr().out)["rows"])


def test_bus_factors_follow_nccl_tests() -> None:
    assert bus_factor("all_reduce", 4) == 1.5
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == bus_factor("all_to_all", 4) == 0.75
    assert bus_factor("broadcast", 4) == bus_factor("sendrecv", 4) == 1.0
    assert BenchConfig().max_bytes == 32 * 2**20


def test_plot_overlays_codec_and_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "busbw.png"
    assert main(["bench", "--codec", "int8", "--plot", str(png), *SMALL]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_nproc_2_spawns_ranks_and_checks_results(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--nproc", "2", "--json", "--max", "64K", "--factor", "8", "--iters", "3",
                 "--warmup", "1", "--codec", "int8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["nranks"] == 2 and doc["backend"] == "gloo"
    sizes_seen = [row["size"] for row in doc["rows"]]
    assert sizes_seen == sizes(8, 65536, 8)
    for row in doc["rows"]:
        assert row["wrong"] == 0
        assert row["busbw"] == pytest.approx(row["algbw"] * 1.0)  # 2(n-1)/n = 1 for n = 2


def test_closed_form_sum_equals_building_every_rank_input() -> None:
    import torch

    for n in (1, 2, 3, 16, 17, 18, 35, 100):
        for start, salt in ((0, 0), (1000, 3)):
            explicit = sum(_pattern(r, 300, torch.float64, salt, start) for r in range(n))
            assert torch.equal(_sum_of_patterns(n, 300, salt, start), explicit), (n, start, salt)


def test_a_size_that_cannot_fit_is_input_error_before_any_rank_starts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--nproc", "4", "--min", "64G", "--max", "64G"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max" in err[0] and "available" in err[0] and "per rank" in err[0]
    # Each rank builds only its own input: the need does not grow with the world size (it did: 2.3 GB at 2
    # ranks, 3.6 GB at 4 for one 128 MiB all_reduce); codec runs still hold every input for the error bound.
    one = BenchConfig(min_bytes=128 * 2**20, max_bytes=128 * 2**20)
    assert rank_bytes(one, 2) == rank_bytes(one, 512) < 1.2e9
    codec = BenchConfig(min_bytes=2**20, max_bytes=2**20, codec="int8")
    assert rank_bytes(codec, 8) > rank_bytes(codec, 2)


def test_rows_are_printed_as_they_are_measured(capsys: pytest.CaptureFixture[str]) -> None:
    rows: list[object] = []
    from tensorfabric.transfer.bench import run_bench
    from tensorfabric.transfer.group import init

    group = init(timeout_s=30)
    result = run_bench(group, BenchConfig(max_bytes=64, iters=1, warmup=0), on_row=rows.append)
    assert rows == list(result.rows) and len(rows) == 4


@pytest.mark.slow
@pytest.mark.timeout(120)
@needs_nixl
@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "broadcast", "sendrecv", "reduce_scatter"])
def test_nixl_engine_bench_checks_every_row_and_reports_its_transport(op: str,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--nproc", "2", "--engine", "nixl", "--op", op, "--json", "--min", "256",
                 "--max", "2M", "--factor", "16", "--iters", "2", "--warmup", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"] == "nixl" and doc["transport"].startswith("nixl/shm(")
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and all(r["pid"] > 0 for r in doc["ranks"])
    assert all(row["wrong"] == 0 for row in doc["rows"])  # 256 B .. 64 KiB through NIXL, 1 MiB+ through Gloo


@pytest.mark.slow
@pytest.mark.timeout(120)
@needs_nixl
@pytest.mark.parametrize("engine", ["nixl", "torch"])
def test_require_rdma_fails_loudly_naming_the_transport(engine: str, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # An RDMA host as far as the pre-check sees (a captured tree): the ranks' own check names what UCX chose.
    monkeypatch.setenv("TENSORFABRIC_SYSFS_ROOT", str(Path(__file__).parents[1] / "fixtures/sysfs/mlx5-roce"))
    assert main(["bench", "--nproc", "2", "--engine", engine, "--require-rdma", "--max", "1K", "--iters", "1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--require-rdma" in err[0]
    assert ("UCX chose nixl/shm(sysv/memory,posix/memory)" if engine == "nixl" else "gloo/tcp") in err[0]


def test_engine_nixl_without_the_wheel_is_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import tensorfabric.transfer.engines.nixl as nixl_mod
    from tensorfabric.errors import InputError
    from tensorfabric.transfer.engines import select

    monkeypatch.setattr(nixl_mod, "available", lambda: False)
    with pytest.raises(InputError, match=r"pip install 'tensorfabric\[nixl\]'"):
        select("nixl", "gloo", 2)
    # auto falls back to torch; a world of one opens no engine, so a missing wheel does not matter there.
    assert select("auto", "gloo", 2).name == "torch" and select("nixl", "gloo", 1).name == "nixl"
    with pytest.raises(InputError, match="'ucx'"):
        select("ucx", "gloo", 2)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_nccl_tests_short_flags_pass_through_torchrun_without_a_double_dash(tmp_path: Path) -> None:
    """`torchrun ... -m tensorfabric bench --max 1M` stops in torchrun's parser (ambiguous with --max-restarts);
    nccl-tests' own short flags go through, and -c 0 reports #wrong as N/A as nccl-tests does."""
    import os
    import shutil
    import socket
    import subprocess
    import sys

    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "GLOO_", "TENSORFABRIC_"))}
    with socket.socket() as probe:  # torchrun's --master-port 0 is not "any port": each rank would wait on its own
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [torchrun, "--nproc-per-node", "2", "--master-addr", "127.0.0.1", "--master-port", str(port), "-m",
            "tensorfabric", "bench",
            "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-w", "1", "-c", "0"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=110, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert [int(r[0]) for r in rows] == [8, 32, 128, 512] and all(r[-1] == "N/A" for r in rows)
    assert "# Out of bounds values : N/A" in out.stdout


def test_check_off_reports_wrong_as_not_applicable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "-b", "8", "-e", "64", "-n", "1", "-w", "0", "-c", "0", "--json"]) == 0
    assert all(row["wrong"] is None for row in json.loads(capsys.readouterr().out)["rows"])
