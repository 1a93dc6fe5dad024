"""`tensorfabric lab ...` in-process: exit codes, messages, and that bad input creates nothing (needs root)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.lab.netlink import Netlink

from .lab_support import NEEDS_NAMESPACES

pytestmark = NEEDS_NAMESPACES


@pytest.fixture()
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "state"
    monkeypatch.setenv("TENSORFABRIC_LAB_DIR", str(path))
    yield path
    for leftover in path.glob("*.json") if path.is_dir() else []:
        main(["lab", "down", leftover.stem])


def _ours() -> list[str]:
    return [ns for ns in Netlink().list_netns() if ns.startswith("tf-tcli")]


@pytest.mark.parametrize("argv, message", [
    (["--hosts", "2", "--rate", "1zbit"], "unknown unit in '1zbit'"),
    (["--hosts", "0", "--rate", "1gbit"], "hosts: 0 is out of range"),
    (["--hosts", "500", "--rate", "1gbit"], "hosts: 500 is out of range"),
    (["--hosts", "2", "--rate", "1gbit", "--topology", "mesh"], "mesh"),
    (["--hosts", "2", "--rate", "1gbit", "--name", "No_Good"], "lowercase"),
])
def test_bad_up_exits_2_and_creates_nothing(argv: list[str], message: str, state_dir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    before = Netlink().list_netns()
    assert main(["lab", "up", "--name", "tclibad", *argv] if "--name" not in argv else ["lab", "up", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert Netlink().list_netns() == before
    assert not state_dir.exists() or list(state_dir.iterdir()) == []


def test_up_status_exec_down(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "up", "--name", "tcli", "--hosts", "2", "--rate", "500mbit"]) == 0
    out = capsys.readouterr().out
    assert "198.18.0.2" in out and "tf-tcli-h1" in out
    # a name already in use: exit 2, the existing lab untouched
    assert main(["lab", "up", "--name", "tcli", "--hosts", "3", "--rate", "1gbit"]) == 2
    assert "already in use" in capsys.readouterr().err
    assert sorted(_ours()) == ["tf-tcli-h0", "tf-tcli-h1", "tf-tcli-sw0"]
    assert main(["lab", "exec", "tcli", "h7", "--", "true"]) == 2
    assert "'h7' is not a host of lab 'tcli'" in capsys.readouterr().err
    assert main(["lab", "exec", "nolab", "h0", "--", "true"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["lab", "exec", "tcli", "h1", "--", "sh", "-c", "exit 3"]) == 3
    assert main(["lab", "exec", "tcli", "h0", "--", "ip", "-4", "-o", "addr", "show", "eth0"]) == 0
    assert main(["lab", "status", "tcli", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [h["address"] for h in status["hosts"]] == ["198.18.0.1", "198.18.0.2"]
    assert status["links"][0]["rate_bps"] == 500e6
    end = status["links"][0]["ends"][0]
    assert {"tx_bytes", "tx_packets", "tx_dropped", "rx_bytes"} <= set(end)
    assert {"backlog", "drops", "overlimits"} <= set(end["qdisc"])
    assert main(["lab", "list", "--json"]) == 0
    assert [lab["name"] for lab in json.loads(capsys.readouterr().out)["labs"]] == ["tcli"]
    assert main(["lab", "down", "tcli"]) == 0
    assert _ours() == []
    assert main(["lab", "down", "tcli"]) == 2
    assert main(["lab", "down"]) == 2


def test_leafspine_up_via_cli(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lab", "up", "--name", "tclils", "--hosts", "2", "--rate", "1gbit", "--topology", "leafspine",
                 "--uplink-rate", "2gbit", "--mtu", "9000", "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in status["switches"]] == ["leaf0", "leaf1", "spine0", "spine1"]
    assert all(end["mtu"] == 9000 for link in status["links"] for end in link["ends"])
    assert main(["lab", "down", "tclils"]) == 0


def test_down_all_with_prefix(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("tclia", "tclib"):
        assert main(["lab", "up", "--name", name, "--hosts", "1", "--rate", "1gbit"]) == 0
    capsys.readouterr()
    # --prefix keeps this test away from any other lab on the machine
    assert main(["lab", "down", "--all", "--prefix", "tcli"]) == 0
    assert capsys.readouterr().out.startswith("removed 4 namespace(s)")
    assert _ours() == []
    assert main(["lab", "down", "tclia", "--prefix", "x"]) == 2
