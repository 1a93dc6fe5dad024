"""Captured GID tables (show_gids, ibv_devinfo -v, sysfs gids; rdma link, ibstat, ibstatus, ibdev2netdev): the
recommended index per node and port, the answers about whole nodes, the read report, the CLI."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.cli.main import main
from tensorfabric.errors import ParseError
from tensorfabric.host.doctor import gid_table_summary
from tensorfabric.host.gid_capture import GidCapture, parse_gid_capture
from tensorfabric.host.gids import Gid, preferred_gid, select_gid

from .conftest import FIXTURES, SYSFS

GIDS = FIXTURES / "gids"
ROWS = list(csv.DictReader((GIDS / "expected.csv").open()))
PORT_ROWS = [r for r in ROWS if r["device"]]
NODE_ROWS = [r for r in ROWS if not r["device"]]
ROW = "mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1\tv2\teth0\n"


def read(name: str) -> GidCapture:
    return parse_gid_capture((GIDS / name).read_bytes(), source=name)


def test_the_table_covers_every_fixture_and_format() -> None:
    files = {p.name for p in GIDS.glob("*.txt")}
    assert {r["file"] for r in ROWS} == files and len(files) >= 25
    formats = {f for name in files for port in read(name) for f in port.formats}
    assert formats == {"show_gids", "ibv_devinfo", "sysfs", "rdma link", "ibstat", "ibstatus", "ibdev2netdev"}


@pytest.mark.parametrize("row", PORT_ROWS, ids=[f"{r['file']}:{r['node']}:{r['device']}" for r in PORT_ROWS])
def test_recommended_index_per_node_and_port(row: dict[str, str]) -> None:
    summary = {(t["node"], t["device"], t["port"]): t for t in gid_table_summary(read(row["file"]))}
    table = summary[(row["node"], row["device"], int(row["port"]))]
    want = int(row["recommended_index"]) if row["recommended_index"] else None
    assert table["recommended_index"] == want
    assert {f["rule"] for f in table["findings"]} == set(filter(None, row["rules"].split(";")))


@pytest.mark.parametrize("name", sorted({r["file"] for r in ROWS}))
def test_every_port_node_and_answer_of_a_fixture_is_in_the_table(name: str) -> None:
    capture = read(name)
    assert {(p.node, p.device, str(p.port)) for p in capture} == {
        (r["node"], r["device"], r["port"]) for r in PORT_ROWS if r["file"] == name}
    assert {(f.evidence["node"], f.rule) for f in capture.findings()} == {
        (r["node"], r["rules"]) for r in NODE_ROWS if r["file"] == name}
    assert not capture.read.not_understood, capture.read.summary()


def test_an_empty_table_is_an_answer_not_an_error() -> None:
    capture = read("show_gids_empty_pod.txt")
    assert capture.ports == () and capture.empty == ("infer-decode-6c9f7",)
    [answer] = capture.findings()
    assert answer.message.startswith("no RoCE GIDs: no RoCE netdev in this namespace or pod")
    bare = parse_gid_capture("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\nn_gids_found=0\n")
    assert bare.empty == ("",) and bare.read.used == 2


def test_two_nodes_of_one_paste_get_one_answer_each() -> None:
    pods = read("show_gids_two_pods_prose.txt")
    assert pods.nodes == ("#1", "#2") and [p.gids[-1].ndev for p in pods] == ["net1", "net1"]  # "net1." read as net1
    hosts = read("show_gids_two_hosts_prompts.txt")
    assert [(p.label, [g.index for g in p.gids]) for p in hosts] == [
        ("trn-a17 mlx5_0:1", [0, 1, 2, 3]), ("trn-a18 mlx5_0:1", [0, 1, 2, 3, 4, 5])]
    # an identical second table of the same port is the same node printed twice, not another node
    twice = parse_gid_capture((GIDS / "show_gids_bond.txt").read_text() * 2)
    assert twice.nodes == ("",) and len(twice) == 1


def test_an_overlay_is_never_preferred_over_the_roce_netdev() -> None:
    [port] = read("show_gids_overlay_same_ipv4.txt")
    nccl = select_gid(port.gids)
    assert nccl is not None and nccl.index == 3  # what NCCL itself would take: the vxlan's
    [finding] = [f for f in gid_table_summary([port])[0]["findings"]]
    assert finding["evidence"]["netdevs"] == {"b2.vxlan.30200": 3, "macvlan-bond0": 5, "bond0": 7}
    assert finding["evidence"]["overlays"] == ["b2.vxlan.30200", "macvlan-bond0"]
    assert "NCCL_IB_GID_INDEX=7" in finding["fix"]
    only_overlays = [Gid(3, "::ffff:10.1.1.1", "RoCE v2", "flannel.1"), Gid(5, "::ffff:10.2.2.2", "RoCE v2", "cali0")]
    fallback = preferred_gid(only_overlays)
    assert fallback is not None and fallback.index == 3  # nothing better: NCCL's own answer


def test_forms_that_name_the_device_elsewhere() -> None:
    [italic] = read("ibv_devinfo_port_only_italic_command.txt")
    assert italic.name == "mlx5_bond_1:1" and italic.gids[1].gid == "fe80::ac0:ebff:fe6b:29d0"
    loose = read("ibv_devinfo_port_only_no_device.txt")
    assert loose[0].name == "unknown device:1" and "unknown device" in loose.read.warnings[0]
    [sysfs] = read("sysfs_cat_per_index.txt")
    assert [g.describe() for g in sysfs.gids] == ["[1] fe80::e42:a1ff:fe77:90c2 v2", "[3] 10.13.0.11 v2 on eth13"]
    base = "/sys/class/infiniband/mlx5_2/ports/1"
    tail = parse_gid_capture(f"$ tail -n +1 {base}/gids/3 {base}/gid_attrs/types/3\n==> {base}/gids/3 <==\n"
                             f"::ffff:10.0.0.9\n\n==> {base}/gid_attrs/types/3 <==\nRoCE v2\n")
    assert [g.describe() for g in tail[0].gids] == ["[3] 10.0.0.9 v2"]
    with pytest.raises(ParseError, match="nothing here reads"):
        parse_gid_capture("server:\nport: 1\nstate: up\n")  # a config's keys, not an ibv_devinfo section


def test_states_netdevs_and_types_are_read() -> None:
    ports = {p.name: p for p in read("rdma_link_and_show_gids.txt")}
    assert ports["mlx5_1:1"].state == "DOWN" and not ports["mlx5_1:1"].usable
    assert ports["mlx5_0:1"].netdev == "ens1f0np0" and ports["mlx5_0:1"].formats == ("rdma link", "show_gids")
    full = {p.name: p for p in read("ibv_devinfo_v_full.txt")}
    assert [g.describe() for g in full["mlx5_0:1"].gids][3] == "[3] 192.168.10.3 v2"
    assert full["mlx5_1:1"].state == "PORT_DOWN (1)"
    ib = {p.name: p for p in read("rdma_link_only.txt")}
    assert ib["mlx5_2:1"].link_layer == "InfiniBand" and not ib["mlx5_2:1"].is_roce
    ibstat = {p.name: p for p in read("ibstat_roce_ports.txt")}
    assert (ibstat["mlx5_1:1"].state, ibstat["mlx5_1:1"].link_layer) == ("Down", "Ethernet")
    assert [p.netdev for p in read("rdma_link_ifindex_prefix.txt")] == ["rbond0", "rbond1", "rbond2"]
    grep = read("sysfs_grep_gids_types.txt")
    assert [g.type for g in grep[0].gids] == ["IB/RoCE v1", "RoCE v2", "IB/RoCE v1", "RoCE v2"]
    assert not grep[0].types_assumed and read("sysfs_printf_loop_untyped.txt")[0].types_assumed


def test_the_read_report_says_what_was_read() -> None:
    report = read("show_gids_pdsh_two_hosts.txt").read
    assert report.format == "show_gids GID table" and "pdsh prefix" in report.envelopes
    assert report.summary().startswith("read show_gids_pdsh_two_hosts.txt as show_gids GID table (")
    assert read("rdma_link_and_show_gids.txt").read.format == "rdma link + show_gids GID table"


def test_malformed_lines_are_warnings_naming_the_line() -> None:
    text = ROW + "mlx5_0\t1\t5\t0000:zz\t\tv2\teth0\n" + ROW.replace("10.0.0.1", "10.0.0.2").replace("0001", "0002")
    capture = parse_gid_capture(text, source="cap.txt")
    assert [g.index for g in capture[0].gids] == [3]  # the first entry for index 3 is kept
    assert capture.read.not_understood == (2, 3)
    assert capture.read.warnings[0].startswith("line 2: looks like a show_gids row")
    assert "line 3: mlx5_0 port 1 GID index 3 listed again" in capture.read.warnings[1]
    cut = parse_gid_capture("DEV PORT INDEX GID IPv4 VER DEV\n" + ROW + "n_gids_found=4\n")
    assert "counted 4 GIDs but 1 rows" in cut.read.warnings[0]
    glob = parse_gid_capture("$ cat /sys/class/infiniband/rxe0/ports/1/gids/*\n"
                             "fe80:0000:0000:0000:0000:0000:0000:0001\n" + ROW)
    assert "indices are unknown" in glob.read.warnings[0] and glob.read.not_understood == (2,)


@pytest.mark.parametrize(("text", "match"), [
    (b"\x00\x01\x02", "not text"), (b"\xff\xfe", "empty input"), (b"hello\nworld\n", "nothing here reads as GID"),
    (b"mlx5_0\t1\t3\t0000:zz\t\tv2\teth0\n", "the first line is 'mlx5_0"),
    (b"x" * 70000, "over the length limit"),
])
def test_texts_without_a_recognised_line_raise_parse_error(text: bytes, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        parse_gid_capture(text, source="cap.txt")


def test_a_ten_megabyte_line_is_skipped_and_the_rest_read() -> None:
    capture = parse_gid_capture("mlx5_0\t1\t" + "0" * 10_000_000 + "\n" + ROW)
    assert capture.read.long_lines == (1,) and capture[0].gids[0].index == 3


@settings(max_examples=50, deadline=None)
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
    assert data["gid_capture"]["read"]["used"] == 11 and data["gid_capture"]["nodes"] == [""]


def test_doctor_answers_an_empty_table(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["doctor", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", str(GIDS / "show_gids_empty_pod.txt")]
    assert main([*args, "--json"]) == 1  # rdma.no-device on the no-rdma tree, not a refused paste
    data = json.loads(capsys.readouterr().out)
    assert data["gid_tables"] == [] and data["gid_capture"]["empty_tables"] == ["infer-decode-6c9f7"]
    assert "gid.no-roce-gids" in {f["rule"] for f in data["findings"]}
    main(args)
    assert "infer-decode-6c9f7 GID table: no RoCE GIDs: no RoCE netdev in this namespace or pod" in \
        " ".join(capsys.readouterr().out.split())


def test_doctor_text_names_nodes_and_assumptions(capsys: pytest.CaptureFixture[str]) -> None:
    main(["doctor", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", str(GIDS / "show_gids_two_hosts_prompts.txt")])
    out = " ".join(capsys.readouterr().out.split())
    assert "GID table trn-a17 mlx5_0:1: recommended index 3" in out
    assert "GID table trn-a18 mlx5_0:1: recommended index 5" in out
    main(["doctor", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids", str(GIDS / "ibv_devinfo_untyped_pairs.txt")])
    assert "recommended index 3 (RoCE v1/v2 assumed from the mlx5 pairing)" in " ".join(capsys.readouterr().out.split())


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
    assert main(["env", "--sysfs-root", str(SYSFS / "no-rdma"), "--gids",
                 str(GIDS / "show_gids_overlay_same_ipv4.txt"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["gid_choice"] == {"mlx5_bond_0:1": 7}


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
