"""The NCCL log corpus: every fixture log against one table (tests/fixtures/nccl_logs/expected.csv) of its expected
transport, evidence grade, GPUDirect verdict, scope, signatures and doctor rules; plus the linear-time guarantees."""

from __future__ import annotations

import csv

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.errors import ParseError
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.nccl_log import MAX_LINE_CHARS, parse_nccl_log

from .conftest import LOGS, SYSFS

ROWS = list(csv.DictReader((LOGS / "expected.csv").open()))
_GDR = {"on": True, "receive-only": True, "partial": False, "off": False, "unknown": None}


def test_the_table_lists_every_log_and_covers_the_corpus() -> None:
    assert {r["file"] for r in ROWS} == {p.name for p in LOGS.glob("*.log")}
    assert len(ROWS) >= 80
    assert {r["transport"] for r in ROWS} == {"roce", "ib", "socket", "plugin", "unknown"}
    assert {r["scope"] for r in ROWS} == {"inter-node", "intra-node", "unknown"}
    assert {r["gpudirect"] for r in ROWS} == {"on", "off", "unknown", "receive-only"}
    assert {r["evidence"] for r in ROWS} == {"data-path", "selected", "devices", "none"}
    majors = {tuple(int(x) for x in r["version"].split(".")[:2]) for r in ROWS if r["version"]}
    assert {(2, 3), (2, 4), (2, 5), (2, 7), (2, 8), (2, 12), (2, 19), (2, 21), (2, 26), (2, 27), (2, 28)} <= majors


@pytest.mark.parametrize("row", ROWS, ids=[r["file"] for r in ROWS])
def test_each_log_gives_its_expected_verdict(row: dict[str, str]) -> None:
    data = (LOGS / row["file"]).read_bytes()
    report = parse_nccl_log(data, source=row["file"])
    assert (report.transport, report.evidence, report.gpudirect_mode, report.scope) == (
        row["transport"], row["evidence"], row["gpudirect"], row["scope"])
    assert report.gpudirect == _GDR[row["gpudirect"]]
    assert sorted(h.id for h in report.signatures) == sorted(filter(None, row["signatures"].split(";")))
    assert (report.version or "") == row["version"]
    # The doctor on the fixture host, with a shell environment that would be wrong for every job: it must not matter.
    shell = {"NCCL_IB_TC": "0", "NCCL_IB_GID_INDEX": "0", "NCCL_NET": "Socket"}
    rules = {f.rule for f in run_doctor(discover(SYSFS / "mlx5-roce"), environ=shell, nccl_log=report).findings}
    assert rules == set(filter(None, row["rules"].split(";")))
    if report.transport != "unknown":
        assert report.proof and report.proof.startswith("line ")
    assert report.read is not None and report.read.used >= 1 and report.to_dict()["read"]["format"].endswith("log")


def test_single_node_logs_say_so_and_prove_nothing() -> None:
    for name in ("trap_single_node_p2p.log", "trap_single_node_shm_nvls.log", "net_channels_one_host.log"):
        report = parse_nccl_log((LOGS / name).read_bytes(), source=name)
        finding = next(f for f in run_doctor(discover(SYSFS / "mlx5-roce"), environ={}, nccl_log=report).findings
                       if f.rule == "log.no-inter-node")
        assert "no inter-node traffic in this log" in finding.message and report.scope == "intra-node"
    looped = parse_nccl_log((LOGS / "net_channels_one_host.log").read_bytes())
    assert looped.transport == "roce" and looped.evidence == "data-path"  # NET channels, but inside one host


def test_qp_lines_give_the_gid_and_the_link_layer() -> None:
    roce = parse_nccl_log((LOGS / "era228_env_lines.log").read_bytes())
    assert [(q.link, q.gid_index, q.gid) for q in roce.qps] == [("RoCE", 3, "::ffff:192.168.1.1")]
    ib = parse_nccl_log((LOGS / "era222_ib_qp_lid_no_banner.log").read_bytes())
    assert [(q.link, q.gid_index) for q in ib.qps] == [("IB", None)] and ib.devices == ()
    local = parse_nccl_log((LOGS / "fail_gid_link_local.log").read_bytes())
    assert local.qps[0].gid == "fe80::ac0:ebff:fe0d:2b3c"


def test_the_job_environment_is_reported() -> None:
    report = parse_nccl_log((LOGS / "era228_env_lines.log").read_bytes())
    assert report.environment == {"NCCL_SOCKET_IFNAME": "=ens1f0np0", "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1",
                                  "NCCL_IB_TC": "104", "NCCL_IB_ROCE_VERSION_NUM": "2"}


def test_a_ten_megabyte_line_is_reported_not_scanned() -> None:
    body = (LOGS / "roce_gdr_2.21.log").read_text()
    crafted = "h:1:2 [0] NCCL INFO Channel 00/0 : " + "0[0] -> " * 1_250_000  # 10 MB of a channel prefix
    report = parse_nccl_log(body + crafted + "\n" + body, source="crafted")
    assert report.transport == "roce" and report.long_lines == (body.count("\n") + 1,)
    assert len(crafted) > 10_000_000 > MAX_LINE_CHARS
    with pytest.raises(ParseError, match="no NCCL lines"):
        parse_nccl_log("NCCL " * 2_000_001 + "\n")  # over the cap: skipped, so nothing NCCL remains


_PIECES = ["NCCL INFO ", "NCCL WARN ", "Channel 00/0 : ", "Ring 01 : ", "0[0] -> 1[1] ", "via NET/", "IB/0",
           "/GDRDMA", "Socket", "Using network ", "NET/IB : Using ", "[0]mlx5_0:1/RoCE",
           "GPU Direct RDMA Disabled for ",
           "GPU 3 / HCA 1 (distance ", "Got completion from peer ", "with status=", "ibv_modify_qp failed with ",
           "GID 3 (", "80FE/", "0/101A8C0FFFF0000)", "LID 4 ", "qp_num 7 mtu 5 ", "set by environment to ",
           "NCCL_IB_TC", "Connected all rings, use ring PXN 1 GDR ", "Bootstrap : Using lo:127.0.0.1",
           "NET/OFI Couldn't open AV", "localGid fe80:", "\n", " ", "x", "(", ")", "[", "]", ":", "/"]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(_PIECES), max_size=80), st.integers(0, 3))
def test_nccl_shaped_garbage_raises_only_parse_error(parts: list[str], repeat: int) -> None:
    text = "".join(parts) * (1 + repeat * 50)
    try:
        report = parse_nccl_log(text)
    except ParseError:
        return
    assert report.transport in ("roce", "ib", "socket", "plugin", "unknown")
    report.to_dict()
    run_doctor(discover(SYSFS / "mlx5-roce"), environ={}, nccl_log=report)


@given(st.binary(min_size=1, max_size=4096).filter(lambda b: b"\x00" in b or b"\xff" in b))
def test_binary_input_raises_parse_error(data: bytes) -> None:
    with pytest.raises(ParseError):
        parse_nccl_log(data)


@pytest.mark.parametrize(("name", "transport", "rdma"), [
    ("trap_sideband_ib0_socket.log", "socket", False),  # NET/Socket on ib0, data over NET/Socket: socket
    ("trap_bootstrap_socket_ib_channels.log", "ib", True),  # bootstrap NET/Socket lines + IB channels: ib
    ("trap_idx_maps_roce.log", "roce", True),  # NET/IB/3 -> banner [3]mlx5_3:1/RoCE, though [0..2] are IB
    ("trap_idx_maps_ib.log", "ib", True),  # NET/IB/0 -> banner [0]mlx5_0:1/IB
    ("trap_single_node_p2p.log", "roce", True),  # selected; intra-node only, so nothing about the fabric
    ("trap_banner_only.log", "roce", True),  # banner + Using network IB: selected, not proven by a data path
    ("trap_using_network_only.log", "unknown", True),  # NET/IB chosen, link layer never named
    ("merged_vnic_net_ib_11.log", "roce", True),  # NET/IB/11 beyond 8 banner devices: the shared link layer
])
def test_the_traps(name: str, transport: str, rdma: bool | None) -> None:
    report = parse_nccl_log((LOGS / name).read_bytes(), source=name)
    assert (report.transport, report.rdma) == (transport, rdma)


def test_doctor_cli_shows_the_job_environment_and_gid_tables(capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from tensorfabric.cli.main import main

    monkeypatch.setenv("COLUMNS", "250")
    log = str(LOGS / "era228_env_lines.log")
    gids = str(LOGS.parent / "gids" / "show_gids_spaces.txt")
    assert main(["doctor", "--sysfs-root", str(SYSFS / "mlx5-roce"), "--nccl-log", log, "--gids", gids]) == 0
    out = capsys.readouterr().out
    assert "job environment (from the log): NCCL_IB_HCA==mlx5_0:1,mlx5_1:1" in out
    assert "GID table mlx5_0:1: recommended index 3" in out and "proof: line 9: channel 00 0 -> 1" in out
    assert main(["doctor", "--sysfs-root", str(SYSFS / "mlx5-roce"), "--nccl-log", log, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["environment_source"] == "log" and data["nccl_log"]["scope"] == "inter-node"
    assert data["nccl_log"]["qps"][0]["gid"] == "::ffff:192.168.1.1"
