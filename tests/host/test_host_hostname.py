"""The hostname -> loopback check with an injected resolver, and the linear-time guarantees of the other parsers."""

from __future__ import annotations

import pytest

from tensorfabric.errors import ParseError
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.gid_capture import parse_gid_capture
from tensorfabric.host.hostname import resolve_hostname
from tensorfabric.host.mlnx_qos import parse_mlnx_qos
from tensorfabric.host.nccl_log import CAPTURE_HINT
from tensorfabric.transfer import nccl as transfer_nccl

from .conftest import SYSFS


def _rules(hostname_addresses: list[str]) -> dict[str, str]:
    host = resolve_hostname("gpu-a01", lambda name: hostname_addresses)
    report = run_doctor(discover(SYSFS / "mlx5-roce"), environ={}, hostname=host)
    return {f.rule: f.subject for f in report.findings if f.rule.startswith("net.hostname")}


@pytest.mark.parametrize(("addresses", "found"), [
    (["127.0.1.1"], True), (["::1", "10.0.0.5"], True), (["127.0.0.1"], True),
    (["10.0.0.5"], False), (["192.168.1.1", "fe80::1"], False), ([], False),
])
def test_loopback_hostname_is_flagged(addresses: list[str], found: bool) -> None:
    assert _rules(addresses) == ({"net.hostname-loopback": "hostname gpu-a01"} if found else {})


def test_resolution_failure_is_recorded_not_raised() -> None:
    def fail(name: str) -> list[str]:
        raise OSError(-2, "Name or service not known")

    host = resolve_hostname("nowhere", fail)
    assert host.addresses == () and host.error is not None and "Name or service not known" in host.error
    report = run_doctor(discover(SYSFS / "mlx5-roce"), environ={}, hostname=host)
    assert report.to_dict()["host"]["hostname"]["error"] == host.error


def test_no_hostname_on_fixture_roots() -> None:
    assert "hostname" not in run_doctor(discover(SYSFS / "mlx5-roce"), environ={}).to_dict()["host"]


def test_ten_megabyte_lines_in_the_other_parsers_raise_only_parse_error() -> None:
    with pytest.raises(ParseError, match="over the length limit"):
        parse_gid_capture("mlx5_0\t1\t" + "0" * 10_000_000)
    huge = "Priority trust state: dscp\n" + "prio:0 dscp:" + " " * 10_000_000 + "x\n"
    assert parse_mlnx_qos(huge, interface="eth0").dscp_to_prio == {}  # linear: no quadratic whitespace scan
    blank = "Priority trust state: dscp\n" + "\n" * 2_000_000 + "enabled  0 0 0 1 0 0 0 0" + " " * 1_000_000 + "x\n"
    assert parse_mlnx_qos(blank, interface="eth0").pfc is None


def test_the_transfer_runtime_captures_the_recommended_subsystems() -> None:
    environ: dict[str, str] = {}
    transfer_nccl.capture_log(environ).discard()
    assert f"NCCL_DEBUG={environ['NCCL_DEBUG']} NCCL_DEBUG_SUBSYS={environ['NCCL_DEBUG_SUBSYS']}" == CAPTURE_HINT
