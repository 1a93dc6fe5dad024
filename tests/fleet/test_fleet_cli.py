"""``tensorfabric fleet`` and ``fleet check`` through the CLI: outputs, exit codes, launcher variables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.transfer.launch import free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fleet"
DS = FIXTURES / "daemonset"


def test_check_prints_what_was_read_the_hosts_table_and_the_findings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "check", str(DS), str(FIXTURES / "pdsh-interleaved.txt")]) == 1
    out = capsys.readouterr().out
    assert out.startswith("read 9 host reports from 8 inputs, 1 skipped")
    assert "(pdsh prefix)" in out and "skipped " + str(DS / "collect.log") in out
    assert "9 hosts x 13 checks" in out and "Fleet findings" in out
    row = next(line for line in out.splitlines() if "gpu-a04" in line and "FAIL" in line)
    assert row.split()[1:3] == ["gpu-a04", "│"] or "FAIL" in row
    assert "ip link set dev ens1f1np1 mtu 9000" in out


def test_check_json_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "check", str(DS / "gpu-a01.json"), str(DS / "gpu-a02.json"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["findings"] == [] and [h["state"] for h in doc["hosts"]] == ["ok", "ok"]
    assert doc["read"]["summary"] == "read 2 host reports from 2 inputs" and "pairs" not in doc
    assert main(["fleet", "check", str(DS), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(f["rule"], f["subject"]) for f in doc["findings"]] == [("fleet.mtu", "host gpu-a04 ens1f1np1")]
    assert doc["read"]["skipped"][0]["source"].endswith("collect.log")


def test_npd_format_follows_the_plugin_convention(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "check", str(DS), "--format", "npd", "--host", "gpu-a04"]) == 1
    assert capsys.readouterr().out.strip().startswith("fleet.mtu: MTU: ens1f1np1 1500")
    assert main(["fleet", "check", str(DS), "--format", "npd", "--host", "gpu-a01.example.net"]) == 0
    assert capsys.readouterr().out.strip() == "gpu-a01 agrees with 5 other hosts on 13 checks"
    assert main(["fleet", "check", str(DS), "--format", "npd", "--host", "gpu-z99"]) == 2
    assert "no fleet report for gpu-z99" in capsys.readouterr().out
    assert main(["fleet", "check", str(DS), "--format", "npd", "--max-length", "20"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and lines[3] == "gpu-a04: fleet.mtu: MTU: e..."


@pytest.mark.parametrize(("argv", "needle"), [
    (["fleet", "check"], "give the doctor reports"),
    (["fleet", "check", "/nonexistent/reports"], "no doctor report among 1 input"),
    (["fleet", "--host-env", "h1:NCCL_IB_GID_INDEX=5"], "use it with --lab or --lab-name"),
    (["fleet", "--lab-name", "x", "--host-env", "h1"], "HOST:VAR=VALUE"),
    (["fleet", "--pairs", "star"], "--pairs"),
    (["fleet", "--bytes", "0"], "--bytes"),
])
def test_bad_input_is_exit_2_in_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


def test_a_slurm_rank_without_its_rendezvous_address_is_exit_2_in_one_line(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Where the ranks run is the one launcher's placement() (its variable mapping is tested with it).
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    assert main(["fleet", "--sysfs-root", str(FIXTURES.parent / "sysfs" / "mlx5-roce")]) == 2
    err = capsys.readouterr().err.strip()
    assert "started by Slurm but MASTER_ADDR and MASTER_PORT not set" in err and len(err.splitlines()) == 1


def test_one_rank_under_a_launcher_runs_in_this_process(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # The torchrun path with a world of one: the doctor, no pairs, rank 0 prints the report.
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(free_port())}.items():
        monkeypatch.setenv(key, value)
    assert main(["fleet", "--sysfs-root", str(FIXTURES.parent / "sysfs" / "mlx5-roce"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["hosts"]) == 1 and doc["pairs"] == [] and doc["error"] is None
    assert {"doctor_s", "import_s", "rendezvous_s", "total_s"} <= set(doc["timings_s"])
