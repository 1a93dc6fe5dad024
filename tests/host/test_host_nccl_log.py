from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.errors import ParseError
from tensorfabric.host.nccl_log import NcclLogReport, parse_nccl_log

from .conftest import LOGS


def _parse(name: str) -> NcclLogReport:
    return parse_nccl_log((LOGS / name).read_bytes(), source=name)


@pytest.mark.parametrize(("name", "transport", "gpudirect", "devices"), [
    ("roce_gdr_2.21.log", "roce", True, ["mlx5_0:1/RoCE", "mlx5_1:1/RoCE"]),
    ("roce_gdr_disabled.log", "roce", False, ["mlx5_0:1/RoCE", "mlx5_1:1/RoCE"]),
    ("socket_fallback_no_device.log", "socket", False, ["eth0:10.0.0.7/Socket"]),
    ("socket_ring_2.3.log", "socket", False, ["eth0:10.1.4.9/Socket"]),
    ("ib_ring_2.4.log", "ib", True, ["mlx5_0:1/IB"]),
    ("plugin_ibext.log", "plugin", True, ["mlx5_0:1/RoCE", "mlx5_3:1/RoCE", "mlx5_4:1/RoCE", "mlx5_5:1/RoCE"]),
    ("aws_libfabric.log", "plugin", True, []),
    ("completion_error_12.log", "roce", True, ["mlx5_0:1/RoCE", "mlx5_1:1/RoCE"]),
])
def test_verdict_per_log(name: str, transport: str, gpudirect: bool, devices: list[str]) -> None:
    report = _parse(name)
    assert (report.transport, report.gpudirect, [str(d) for d in report.devices]) == (transport, gpudirect, devices)
    assert set(report.to_dict()) >= {"transport", "gpudirect", "devices", "signatures", "channels"}


def test_details_channels_gid_version_plugin() -> None:
    new = _parse("roce_gdr_2.21.log")
    assert new.gid_index == 3 and new.version == "2.21.5" and new.network == "IB" and new.rdma is True
    assert [(c.channel, c.src, c.dst, c.direction, c.net, c.net_device, c.gdr) for c in new.channels][:1] == [
        (0, 1, 0, "receive", "IB", 0, True)]
    old = _parse("ib_ring_2.4.log")
    assert old.channels[0].via == "NET/IB/0/GDRDMA" and old.channels[0].direction == "receive"
    sock = _parse("socket_ring_2.3.log")
    assert [c.net for c in sock.channels] == ["Socket", None]  # the P2P/IPC ring is intra-node
    assert sock.rdma is False and sock.no_device
    plugin = _parse("plugin_ibext.log")
    assert plugin.plugin == "NCCL RDMA Plugin" and plugin.network == "IBext_v8" and plugin.rdma is True
    assert _parse("aws_libfabric.log").channels[0].net == "AWS Libfabric"
    assert _parse("roce_gdr_disabled.log").version == "2.26.2"


def test_signatures_with_fixes() -> None:
    hits = {h.id: h for h in _parse("completion_error_12.log").signatures}
    assert hits["nccl.completion-error-12"].count == 2 and hits["nccl.completion-error-12"].line == 5
    assert "ib_write_bw" in hits["nccl.completion-error-12"].fix
    assert "nccl.watchdog-timeout" in hits
    assert {h.id for h in _parse("roce_gdr_disabled.log").signatures} == {"nccl.gdr-disabled"}
    assert {h.id for h in _parse("socket_fallback_no_device.log").signatures} == {"nccl.no-ib-device",
                                                                                "nccl.no-libibverbs"}


PREFIXES = [
    "gpu-a01:48211:48290 [0] NCCL INFO ",  # 2.x standard
    "[2026-11-02 08:14:03] gpu-a01:48211:48290 [3] NCCL INFO ",  # 2.26+ NCCL_DEBUG_TIMESTAMP_FORMAT
    "[rank7]: gpu-a01:48211:48290 [7] NCCL INFO ",  # torchrun --tee / vLLM worker prefix
    "0: gpu-a01:48211:48290 [0] NCCL INFO ",  # srun --label
    "(RayWorkerWrapper pid=4121) gpu-a01:4121:4190 [1] NCCL INFO ",  # Ray actor prefix
]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize(("body", "transport", "gdr"), [
    (["NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>", "Using network IB",
      "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA"], "roce", True),  # 2.12+
    (["NET/IB : Using [0]mlx5_bond_0:1/RoCE [RO]; OOB bond0:10.0.0.1<0>", "Using network IB",
      "Channel 00/0 : 3[3] -> 8[0] [send] via NET/IB/0(1)/GDRDMA",  # PXN through rank 1's NIC
      "Channel 00 : 0[0] -> 1[1] via NVL/NET/0"], "roce", True),
    (["NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>",
      "Ring 00 : 0[0] -> 1[1] [send] via NET/IB/0"], "roce", False),  # 2.4 - 2.6
    (["NET/IB : No device found.", "NET/Socket : Using [0]eth0:10.0.0.1<0>", "Using network Socket",
      "Channel 01/0 : 1[1] -> 0[0] [receive] via NET/Socket/0"], "socket", False),
    (["Ring 00 : 7 -> 8 [send] via NET/Socket/0"], "socket", False),  # 2.3
])
def test_rank_prefixed_lines_of_several_versions(prefix: str, body: list[str], transport: str, gdr: bool) -> None:
    report = parse_nccl_log("\n".join(prefix + line for line in body) + "\n")
    assert (report.transport, report.gpudirect) == (transport, gdr)


@pytest.mark.parametrize(("data", "match"), [
    (b"", "empty"), (b"  \n\n", "empty"), (b"\x7fELF\x02\x01\x01\x00\x00", "NUL"),
    (b"\xff\xfe\x00N\x00C", "UTF-8"), (b"just an application log\nno nccl here\n", "no NCCL lines"),
    ((LOGS / "truncated.log").read_bytes(), "truncated"),
    (b"h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/", "truncated"),
    (b"h:1:2 [0] NCCL INFO Using network IB\nh:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[", "truncated"),
    ("".join(chr(c) for c in range(1, 9)).encode() * 40, "control"),
])
def test_bad_input_raises_parse_error(data: bytes, match: str) -> None:
    with pytest.raises(ParseError, match=match) as info:
        parse_nccl_log(data, source="bad.log")
    assert "bad.log" in str(info.value)


def test_complete_last_line_without_newline_is_fine() -> None:
    text = "h:1:2 [0] NCCL INFO Using network IB\nh:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0"
    report = parse_nccl_log(text)  # NET/IB, but no banner or QP line names the link layer
    assert (report.transport, report.rdma, report.scope) == ("unknown", True, "inter-node")
    assert parse_nccl_log("h:1:2 [0] NCCL INFO Init COMPLETE").transport == "unknown"


_BASE_LOGS = ["roce_gdr_2.21.log", "socket_fallback_no_device.log", "roce_gdr_disabled.log", "plugin_ibext.log",
              "ib_ring_2.4.log", "era23_ib_sideband.log", "era222_ib_qp_lid_no_banner.log", "prefix_mpirun_tag.log",
              "trap_single_node_p2p.log", "trap_idx_maps_roce.log", "plugin_aws_ofi_no_nic_info.log",
              "fail_gid_link_local.log"]
_unrelated = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=80).filter(lambda s: "NCCL" not in s)


@given(name=st.sampled_from(_BASE_LOGS), noise=st.lists(st.tuples(st.integers(0, 10_000), _unrelated), max_size=25))
def test_unrelated_lines_never_change_the_verdict(name: str, noise: list[tuple[int, str]]) -> None:
    lines = (LOGS / name).read_text().splitlines()
    base = parse_nccl_log("\n".join(lines) + "\n")
    mixed = list(lines)
    for position, text in noise:
        mixed.insert(position % (len(mixed) + 1), text)
    report = parse_nccl_log("\n".join(mixed) + "\n")
    assert report.verdict() == base.verdict()
    assert [h.id for h in report.signatures] == [h.id for h in base.signatures]


@given(st.binary(max_size=2048))
def test_random_bytes_raise_only_parse_error(data: bytes) -> None:
    try:
        parse_nccl_log(data)
    except ParseError:
        pass


@given(st.lists(st.sampled_from(["NCCL INFO ", "NCCL WARN ", "Channel 00/0 : ", "Ring 01 : ", "0[0] -> 1[1] ",
                                 "via NET/", "IB/0", "/GDRDMA", "Socket", "Using network ", "NET/IB : Using ",
                                 "[0]mlx5_0:1/RoCE", "\n", "GPU Direct RDMA Disabled for HCA 0 'x'", "GID 3 (0/1)",
                                 "x", " "]), max_size=60))
def test_nccl_shaped_garbage_raises_only_parse_error(parts: list[str]) -> None:
    try:
        report = parse_nccl_log("".join(parts))
    except ParseError:
        return
    assert report.transport in ("roce", "ib", "socket", "plugin", "unknown")
