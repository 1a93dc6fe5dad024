"""The env and doctor verbs in-process: golden output, JSON shape, exit codes and bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tensorfabric.cli.main import main

from .conftest import GOLDEN, LOGS, SYSFS

MLX5 = str(SYSFS / "mlx5-roce")


def test_env_sh_matches_golden(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--sysfs-root", MLX5, "--format", "sh"]) == 0
    assert capsys.readouterr().out == (GOLDEN / "env-mlx5-roce.sh").read_text()


def test_env_formats_and_explain(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["env", "--sysfs-root", MLX5, "--format", "dotenv"]) == 0
    assert "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1\n" in capsys.readouterr().out
    assert main(["env", "--sysfs-root", MLX5, "--explain"]) == 0
    out = capsys.readouterr().out
    assert "# DSCP 26 << 2 | ECT(0) = 106" in out and "export NCCL_IB_TC=106" in out
    monkeypatch.setenv("NCCL_IB_TC", "0")
    assert main(["env", "--sysfs-root", MLX5, "--format", "json", "--rail-optimized"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["kept"] == {"NCCL_IB_TC": "0"} and "NCCL_IB_TC" not in data["env"]
    assert data["env"]["NCCL_CROSS_NIC"] == "0" and data["findings"][0]["rule"] == "env.user-value-kept"
    assert main(["env", "--sysfs-root", MLX5]) == 0
    captured = capsys.readouterr()
    assert "# NCCL_IB_TC kept as set: '0'" in captured.out and "warning:" in captured.err


def test_env_reads_the_fabric_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: t\nqos:\n  roce: {dscp: [24], priority: 3}\n  nccl: {cross_nic: 0}\nhosts:\n"
                    "  - {name: h1, nics: [{netdev: eth2, rdma_device: mlx5_0, speed: 400G}]}\n")
    assert main(["env", "--sysfs-root", MLX5, "--fabric", str(spec), "--format", "json"]) == 0
    env = json.loads(capsys.readouterr().out)["env"]
    assert env["NCCL_IB_TC"] == "98" and env["NCCL_CROSS_NIC"] == "0"  # (24 << 2) | ECT(0), the plan's form


def test_doctor_json_without_rdma_reports_hint_and_tcp_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--sysfs-root", str(SYSFS / "no-rdma"), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    rules = {f["rule"]: f for f in data["findings"]}
    assert "--device=/dev/infiniband" in rules["rdma.no-device"]["fix"]
    assert data["tcp_path"]["interface"] == "eth0" and rules["net.tcp-path"]["evidence"]["GLOO_SOCKET_IFNAME"] == "eth0"
    assert "nccl_log" not in data


@pytest.mark.skipif(Path("/sys/class/infiniband").exists(), reason="this machine has RDMA devices")
def test_doctor_on_this_machine_without_rdma(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["findings"][0]["rule"] == "rdma.no-device"
    assert data["tcp_path"]["interface"]


def test_doctor_with_log(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("NCCL_IB_TC", "104"), ("NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1")):
        monkeypatch.setenv(name, value)
    log = str(LOGS / "roce_gdr_2.21.log")
    assert main(["doctor", "--sysfs-root", MLX5, "--nccl-log", log, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["findings"] == []
    assert {k: data["nccl_log"][k] for k in ("transport", "gpudirect", "devices")} == {
        "transport": "roce", "gpudirect": True, "devices": ["mlx5_0:1/RoCE", "mlx5_1:1/RoCE"]}
    assert data["nccl_log"]["signatures"] == []
    log = str(LOGS / "socket_fallback_no_device.log")
    monkeypatch.setenv("COLUMNS", "250")  # rich folds table cells at 80 columns when stdout is not a terminal
    assert main(["doctor", "--sysfs-root", MLX5, "--nccl-log", log]) == 1
    out = capsys.readouterr().out
    assert "transport socket" in out and "log.socket-transport" in out


@pytest.mark.parametrize("args", [
    ["doctor", "--sysfs-root", "/nonexistent/root"],
    ["env", "--sysfs-root", "/nonexistent/root"],
    ["doctor", "--sysfs-root", MLX5, "--nccl-log", str(LOGS.parent / "gids" / "show_gids_spaces.txt")],  # no NCCL line
    ["doctor", "--sysfs-root", MLX5, "--nccl-log", "/nonexistent.log"],
    ["doctor", "--sysfs-root", MLX5, "--nccl-log", str(LOGS)],  # a directory: unreadable as a file
    ["env", "--format", "yaml"],
    ["env", "--sysfs-root", MLX5, "--nccl-version", "latest"],
    ["doctor", "--fabric", "/nonexistent.yaml"],
])
def test_bad_input_exits_2_with_one_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "error" in err


def test_binary_and_unreadable_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert main(["doctor", "--sysfs-root", MLX5, "--nccl-log", str(binary)]) == 2
    assert "binary" in capsys.readouterr().err
    locked = tmp_path / "locked.log"
    locked.write_text("x")
    locked.chmod(0)
    try:
        open(locked).close()
    except PermissionError:
        assert main(["doctor", "--sysfs-root", MLX5, "--nccl-log", str(locked)]) == 2
        assert "cannot be read" in capsys.readouterr().err
    else:
        pytest.skip("running as root: permission bits do not stop reads (the directory case covers unreadable)")


def _without_sysfs_root(out: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(out)
    data.pop("sysfs_root")
    return data


@pytest.mark.parametrize("host", ["mlx5-roce", "bnxt-roce", "ib-host", "no-rdma"])
@pytest.mark.parametrize("verb", ["doctor", "env"])
def test_both_spellings_of_the_sysfs_root_give_one_result(host: str, verb: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    tree = SYSFS / host
    results = []
    for given in (str(tree), str(tree / "sys"), f"{tree}/sys/"):
        code = main([verb, "--sysfs-root", given, "--json"])
        out = capsys.readouterr().out
        results.append((code, _without_sysfs_root(out)))
        where = json.loads(out)["sysfs_root"]
        assert where["given"] == given and where["root"] == str(tree) and where["sys"] == str(tree / "sys")
        form = "the tree holding sys/" if given == str(tree) else f"the sys/ directory of {tree}"
        assert where["note"] == f"{given} read as {form}"
    assert results[0] == results[1] == results[2]


def test_doctor_host_line_says_how_the_root_was_read(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one host line, not wrapped
    main(["doctor", "--sysfs-root", f"{MLX5}/sys"])
    host_line = capsys.readouterr().out.splitlines()[0]
    assert host_line.startswith(f"host {MLX5}: RDMA ports: mlx5_0:1")
    assert host_line.endswith(f"--sysfs-root {MLX5}/sys read as the sys/ directory of {MLX5}")
    assert main(["env", "--sysfs-root", MLX5, "--explain"]) == 0
    assert capsys.readouterr().out.startswith(f"# sysfs root: {MLX5} read as the tree holding sys/\n")


@pytest.mark.parametrize("verb", ["doctor", "env"])
@pytest.mark.parametrize("sub", ["", "sys/class", "proc"])
def test_a_path_that_is_no_sysfs_root_exits_2_naming_it_and_the_forms(
        verb: str, sub: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    given = str(SYSFS / "mlx5-roce" / sub) if sub else str(tmp_path)
    assert main([verb, "--sysfs-root", given]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and captured.out == ""
    assert f"sysfs root {given!r} holds no sys/class/ and no class/" in err and "accepted: '/'" in err


def test_a_sysfs_directory_without_the_tree_above_is_refused_by_the_doctor(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(SYSFS / "mlx5-roce" / "sys", tmp_path / "sysfs-copy", symlinks=True)
    assert main(["doctor", "--sysfs-root", str(tmp_path / "sysfs-copy")]) == 2
    assert "holds class/ but is not named sys" in capsys.readouterr().err
