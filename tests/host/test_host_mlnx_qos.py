from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.cli.main import main
from tensorfabric.errors import ParseError
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.mlnx_qos import MlnxQos, collect, parse_mlnx_qos
from tensorfabric.host.ncclenv import derive_env

from .conftest import FIXTURES, SYSFS

QOS = FIXTURES / "mlnx_qos"


def _qos(name: str, interface: str = "ens1f0np0") -> MlnxQos:
    return parse_mlnx_qos((QOS / name).read_text(), interface=interface, source=name)


def test_parse_captures() -> None:
    good = _qos("dscp_pfc3.txt")
    assert (good.trust, good.pfc, good.cable_len_m) == ("dscp", (3,), 7)
    assert good.dscp_to_prio[26] == 3 and good.dscp_to_prio[48] == 6 and good.prio_to_tc == {0: 0, 1: 0, 2: 0, 3: 3,
                                                                                               6: 6}
    default = _qos("pcp_default.txt")
    assert (default.trust, default.pfc, dict(default.dscp_to_prio)) == ("pcp", (), {})


def test_not_mlnx_qos_output() -> None:
    with pytest.raises(ParseError, match="mlnx_qos"):
        parse_mlnx_qos("Settings for eth0:\n\tSpeed: 100000Mb/s\n", interface="eth0")
    with pytest.raises(ParseError, match="out of range"):
        parse_mlnx_qos("Priority trust state: dscp\n\tprio:3 dscp:99,\n", interface="eth0")


@given(st.text(max_size=400))
def test_random_text_raises_only_parse_error(text: str) -> None:
    try:
        parse_mlnx_qos(text, interface="eth0")
    except ParseError:
        pass


def _rules(qos_files: dict[str, str], **kw: int) -> dict[str, str]:
    inv = discover(SYSFS / "mlx5-roce")
    qos = {nd: _qos(f, nd) for nd, f in qos_files.items()}
    report = run_doctor(inv, environ=derive_env(inv, environ={}).as_dict(), mlnx_qos=qos, **kw)  # type: ignore[arg-type]
    return {f.rule: f.severity for f in report.findings}


def test_qos_checks() -> None:
    assert _rules({"ens1f0np0": "dscp_pfc3.txt", "ens1f1np1": "dscp_pfc3.txt"}) == {}
    assert _rules({"ens1f1np1": "pcp_default.txt"}) == {"qos.trust-pcp": "error", "qos.pfc-off": "error"}
    assert _rules({"ens1f0np0": "dscp_pfc3.txt"}, roce_priority=4) == {
        "qos.pfc-off": "error", "qos.dscp-map": "error", "ecn.off": "warning"}


def test_collect_through_a_runner() -> None:
    calls: list[list[str]] = []

    def runner(argv: Sequence[str]) -> str:
        calls.append(list(argv))
        if argv[-1] == "ens1f1np1":
            raise OSError("mlnx_qos: no such device")
        return (QOS / "dscp_pfc3.txt").read_text()

    result = collect(["ens1f0np0", "ens1f1np1"], runner)
    assert list(result) == ["ens1f0np0"] and calls[0] == ["mlnx_qos", "-i", "ens1f0np0"]


def test_cli_mlnx_qos_option(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    root = str(SYSFS / "mlx5-roce")
    args = ["doctor", "--sysfs-root", root, "--json", "--mlnx-qos", f"ens1f0np0={QOS / 'pcp_default.txt'}"]
    assert main(args) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["mlnx_qos"]["ens1f0np0"]["trust"] == "pcp"
    assert "qos.trust-pcp" in {f["rule"] for f in data["findings"]}
    bogus = tmp_path / "x.txt"
    bogus.write_text("hello\n")
    for spec in ("ens1f0np0", f"ens1f0np0={bogus}", f"ens1f0np0={tmp_path / 'missing'}"):
        assert main(["doctor", "--sysfs-root", root, "--mlnx-qos", spec]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
