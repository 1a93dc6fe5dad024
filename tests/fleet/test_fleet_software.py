"""Versions for the fleet's version rules, read without importing what they describe; the doctor's schema 2."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.fleet.software import software_versions, ucx_version

SYSFS = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs" / "mlx5-roce"


def _lookup(installed: dict[str, str]):  # type: ignore[no-untyped-def]
    def version(name: str) -> str:
        if name not in installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return installed[name]
    return version


def test_packages_kernel_drivers_and_system_nccl(tmp_path: Path) -> None:
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text("5.15.0-119-generic\n")
    (tmp_path / "sys/module/mlx5_core").mkdir(parents=True)
    (tmp_path / "sys/module/mlx5_core/version").write_text("24.07-0.6.1\n")
    (tmp_path / "usr/lib/x86_64-linux-gnu").mkdir(parents=True)
    for name in ("libnccl.so.2", "libnccl.so.2.18.3", "libnccl.so.2.21.5"):
        (tmp_path / "usr/lib/x86_64-linux-gnu" / name).write_text("")
    found = software_versions(tmp_path, ["mlx5_core", "bnxt_re"],
                              lookup=_lookup({"torch": "2.5.1", "nixl-cu12": "0.5.1"}))
    assert found == {"torch": "2.5.1", "nixl": "0.5.1", "nccl": "2.21.5", "kernel": "5.15.0-119-generic",
                     "driver:bnxt_re": "in-tree (5.15.0-119-generic)", "driver:mlx5_core": "24.07-0.6.1"}
    wheel = software_versions(tmp_path, lookup=_lookup({"nvidia-nccl-cu12": "2.23.4"}))
    assert wheel["nccl"] == "2.23.4"  # the wheel torch loads wins over a system library


@pytest.mark.parametrize(("output", "version"), [
    ("# Library version: 1.16.0\n# Library path: /usr/lib/x86_64-linux-gnu/libucs.so.0\n", "1.16.0"),
    ("# UCT version=1.9.0 revision 1d0a420\n# configured with: --prefix=/usr\n", "1.9.0"),
    ("ucx_info: command not found\n", None),
])
def test_ucx_version_from_ucx_info(output: str, version: str | None) -> None:
    assert ucx_version(lambda argv: output) == version

    def missing(argv: Sequence[str]) -> str:
        raise OSError("ucx_info not found")
    assert ucx_version(missing) is None


def test_doctor_json_carries_schema_2_and_what_the_fleet_compares(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--json", "--sysfs-root", str(SYSFS)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 2
    port = doc["host"]["rdma_ports"][0]
    assert {k: port[k] for k in ("port", "mtu", "speed_mbps", "gid_index", "fw_ver", "hca_type", "driver")} == {
        "port": "mlx5_0:1", "mtu": 9000, "speed_mbps": 400000, "gid_index": 3, "fw_ver": "28.39.1002",
        "hca_type": "MT4129", "driver": "mlx5_core"}
    assert doc["data_netdevs"]["ens1f0np0"] == {"role": "roce", "mtu": 9000, "speed_mbps": 400000,
                                                "operstate": "up"}
    assert doc["data_netdevs"]["eno1"]["role"] == "tcp-path"
    assert "environment" in doc and "software" in doc
