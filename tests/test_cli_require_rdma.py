"""``--require-rdma`` on a host with no usable RDMA port: env, bench and run exit 2 before deriving or spawning
anything, in one line naming what is missing and the way out (the host is a captured sysfs tree)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorfabric.cli.env import SYSFS_ROOT_ENV
from tensorfabric.cli.main import main

SYSFS = Path(__file__).resolve().parent / "fixtures" / "sysfs"


def _port_down(tmp: Path) -> Path:
    port = tmp / "host" / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    port.mkdir(parents=True)
    (port / "state").write_text("1: DOWN\n")
    (tmp / "host" / "proc").mkdir()
    return tmp / "host"


@pytest.mark.parametrize("verb", [
    ["env"],
    ["bench", "--nproc", "2", "--max", "1K", "--iters", "1"],
    ["run", "--model", "tiny", "--tp", "2", "--max-new-tokens", "1"],
])
@pytest.mark.parametrize("host, missing", [("no-rdma", "no RDMA device under"), ("down", "no ACTIVE RDMA port")])
def test_require_rdma_without_rdma_exits_2_before_spawning(
        verb: list[str], host: str, missing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    root = SYSFS / host if host != "down" else _port_down(tmp_path)
    monkeypatch.setenv(SYSFS_ROOT_ENV, str(root))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "scratch"))
    (tmp_path / "scratch").mkdir()
    argv = [*verb, "--require-rdma", *(["--sysfs-root", str(root)] if verb == ["env"] else [])]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    [line] = captured.err.strip().splitlines()
    assert "--require-rdma" in line and missing in line and "drop --require-rdma" in line
    if host == "down":
        assert "mlx5_0 port 1: DOWN" in line
    assert list((tmp_path / "scratch").iterdir()) == []  # no launcher scratch: no rank was started


def test_env_require_rdma_on_an_rdma_host_sets_nccl_net(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--require-rdma", "--sysfs-root", str(SYSFS / "mlx5-roce")]) == 0
    assert "export NCCL_NET=IB" in capsys.readouterr().out.splitlines()
