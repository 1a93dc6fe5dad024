"""Captured GID tables (show_gids, ibv_devinfo -v/-vv, rdma link): the recommended index per port, the CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.cli.main import main
from tensorfabric.errors import ParseError
from tensorfabric.host.doctor import gid_table_summary
from tensorfabric.host.gid_capture import parse_gid_capture

from .conftest import FIXTURES, SYSFS

GIDS = FIXTURES / "gids"
ROWS = list(csv.DictReader((GIDS / "expected.csv").open()))


def test_the_table_covers_every_fixture_and_format() -> None:
    files = {p.name for p in GIDS.glob("*.txt")}
    assert {r["file"] for r in ROWS} == files and len(files) >= 8
    formats = {f for name in files for port in parse_gid_capture((GIDS / name).read_text()) for f in port.formats}
    assert formats == {"show_gids", "ibv_devinfo", "rdma link"}


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['file']}:{r['device']}" for r in ROWS])
def test_recommended_index_per_port(row: dict[str, str]) -> None:
    summary = {(t["device"], t["port"]): t for t in gid_table_summary(parse_gid_capture(
        (GIDS / row["file"]).read_bytes(), source=row["file"]))}
    table = summary[(row["device"], int(row["port"]))]
    want = int(row["recommended_index"]) if row["recommended_index"] else None
    assert table["recommended_index"] == want
    assert {f["rule"] for f in table["findings"]} == set(filter(None, row["rules"].split(";")))


def test_every_port_of_a_fixture_is_in_the_table() -> None:
    for name in {r["file"] for r in ROWS}:
        ports = {(p.device, str(p.port)) for p in parse_gid_capture((GIDS / name).read_text())}
        assert ports == {(r["device"], r["port"]) for r in ROWS if r["file"] == name}, name


def test_states_netdevs_and_types_are_read() -> None:
    ports = {p.name: p for p in parse_gid_capture((GIDS / "rdma_link_and_show_gids.txt").read_text())}
    assert ports["mlx5_1:1"].state == "DOWN" and not ports["mlx5_1:1"].usable
    assert ports["mlx5_0:1"].netdev == "ens1f0np0" and ports["mlx5_0:1"].formats == ("rdma link", "show_gids")
    full = {p.name: p for p in parse_gid_capture((GIDS / "ibv_devinfo_v_full.txt").read_text())}
    assert [g.describe() for g in full["mlx5_0:1"].gids][3] == "[3] 192.168.10.3 v2"
    assert full["mlx5_1:1"].state == "PORT_DOWN (1)"
    ib = {p.name: p for p in parse_gid_capture((GIDS / "rdma_link_only.txt").read_text())}
    assert ib["mlx5_2:1"].link_layer == "InfiniBand" and not ib["mlx5_2:1"].is_roce


@pytest.mark.parametrize(("text", "match"), [
    (b"\x00\x01\x02", "NUL"), (b"\xff\xfe", "UTF-8"), (b"hello\nworld\n", "no show_gids"),
    (b"mlx5_0\t1\t3\t0000:zz\t\tv2\teth0\n", "show_gids row"),
    (b"mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1\tv2\teth0\n"
     b"mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a00:0002\t10.0.0.2\tv2\teth0\n", "twice"),
    (b"\t\t\tGID[  3]:\t\t::ffff:10.0.0.1, RoCE v2\n", "outside"),
    (b"x" * 5000, "longer than"),
])
def test_bad_captures_raise_parse_error(text: bytes, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        parse_gid_capture(text, source="cap.txt")


@given(st.text(max_size=400))
def test_any_text_raises_only_parse_error(text: str) -> None:
    try:
        parse_gid_capture(text)
    except ParseError:
        pass


def test_doctor_gids_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids",
                 str(GIDS / "show_gids_indented_ipv6_only_port.txt"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1  # no-rdma host: rdma.no-device
    tables = [{k: t[k] for k in ("device", "port", "recommended_index")} for t in data["gid_tables"]]
    assert tables == [{"device": "mlx5_2", "port": 1, "recommended_index": 3},
                      {"device": "mlx5_5", "port": 1, "recommended_index": None}]
    assert [f["rule"] for f in data["gid_tables"][1]["findings"]] == ["gid.no-rocev2-ipv4"]
    assert "gid.no-rocev2-ipv4" in {f["rule"] for f in data["findings"]}


def test_doctor_checks_a_pinned_index_against_the_capture(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_IB_GID_INDEX", "2")  # the bond's index 2 is the IPv6 RoCE v1 entry
    main(["doctor", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", str(GIDS / "show_gids_bond.txt"), "--json"])
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "gid.index-env"]
    assert len(found) == 1 and "is RoCE v1 on mlx5_bond_0:1" in found[0]["message"]


def test_env_gives_a_choice_per_port_and_warns(capsys: pytest.CaptureFixture[str]) -> None:
    capture = str(GIDS / "show_gids_indented_ipv6_only_port.txt")
    args = ["env", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", capture]
    assert main([*args, "--nccl-version", "2.18.3"]) == 0
    out, err = capsys.readouterr()
    assert "mlx5_2:1=3, mlx5_5:1=none" in out and "export NCCL_IB_GID_INDEX=3" in out
    assert "mlx5_5:1 has no RoCE v2 IPv4 GID" in err
    assert main(["env", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", str(GIDS / "show_gids_spaces.txt"),
                 "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gid_choice"] == {"mlx5_0:1": 3, "mlx5_1:1": 3} and data["findings"] == []


def test_env_warns_when_ports_disagree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture = tmp_path / "two.txt"
    capture.write_text((GIDS / "show_gids_spaces.txt").read_text() + (GIDS / "show_gids_bond.txt").read_text())
    assert main(["env", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", str(capture), "--nccl-version",
                 "2.18", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gid_choice"] == {"mlx5_0:1": 3, "mlx5_1:1": 3, "mlx5_bond_0:1": 5}
    assert [f["rule"] for f in data["findings"]] == ["gid.index-differs"]
    assert data["findings"][0]["severity"] == "warning" and data["env"]["NCCL_IB_GID_INDEX"] == "3"


@pytest.mark.parametrize("verb", ["doctor", "env"])
def test_bad_gids_file_exits_2(verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\x00binary")
    assert main([verb, "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", str(bad)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main([verb, "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", str(tmp_path / "missing.txt")]) == 2
