from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.errors import ParseError
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.nccl_log import NcclLogReport, parse_nccl_log
from tensorfabric.host.records import HostName

from .conftest import LOGS, SYSFS


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
    (b"\xff\xfe\x00N\x00C", "NCCL log"), (b"just an application log\nno nccl here\n", "no NCCL lines"),
    ("".join(chr(c) for c in range(1, 9)).encode() * 40, "control"),
])
def test_bad_input_raises_parse_error(data: bytes, match: str) -> None:
    with pytest.raises(ParseError, match=match) as info:
        parse_nccl_log(data, source="bad.log")
    assert "bad.log" in str(info.value)


def test_the_refusal_says_what_was_expected_and_shows_the_first_line() -> None:
    with pytest.raises(ParseError, match=r"expected lines holding 'NCCL INFO'.*first line is 'torch says hi'"):
        parse_nccl_log("torch says hi\nand bye\n")


@pytest.mark.parametrize("data", [
    (LOGS / "truncated.log").read_bytes(),
    b"h:1:2 [0] NCCL INFO Using network IB\nh:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/",
    b"h:1:2 [0] NCCL INFO Using network IB\nh:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[",
])
def test_a_cut_final_line_is_a_warning_and_the_rest_is_read(data: bytes) -> None:
    report = parse_nccl_log(data, source="cut.log")
    assert report.read is not None and any("ends in the middle" in w for w in report.read.warnings)
    assert not report.channels  # the cut channel line is not read as a channel without GPUDirect
    assert report.rdma is True


def test_complete_last_line_without_newline_is_fine() -> None:
    text = "h:1:2 [0] NCCL INFO Using network IB\nh:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0"
    report = parse_nccl_log(text)  # NET/IB, but no banner or QP line names the link layer
    assert (report.transport, report.rdma, report.scope, report.evidence) == ("unknown", True, "inter-node",
                                                                              "data-path")
    assert report.read is not None and not report.read.warnings


@pytest.mark.parametrize(("line", "transport", "evidence"), [
    ("NCCL version 2.21.5+cuda12.4", "unknown", "none"),
    ("RCCL version 2.20.5+hip6.2 HEAD:45b618a+", "unknown", "none"),
    ("h:1:2 [0] NCCL INFO Init COMPLETE", "unknown", "none"),
    ("h:1:2 [0] NCCL INFO Using network Socket", "socket", "selected"),
    ("h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.1<0>", "ib", "devices"),
    ("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0", "socket", "data-path"),
    ("h:1:2 [0] NCCL INFO NET/IB: Dev 0 Port 1 qpn 7 mtu 5 LID 4", "ib", "data-path"),
])
def test_one_recognised_line_is_never_refused(line: str, transport: str, evidence: str) -> None:
    report = parse_nccl_log(line)
    assert (report.transport, report.evidence) == (transport, evidence)


def test_numbers_too_long_for_int_are_not_read_not_a_crash() -> None:
    report = parse_nccl_log("h:1:2 [0] NCCL INFO Channel " + "1" * 5000 + "/0 : 0[0] -> 1[0] [send] via NET/IB/0\n")
    assert report.transport == "unknown" and report.read is not None and report.read.not_understood == (1,)


def test_the_read_report_lists_network_lines_no_rule_read() -> None:
    text = ("h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n"
            "h:1:2 [0] NCCL INFO NET/IB : Frobnicated the widget on mlx5_0\n"
            "h:1:2 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1\n"
            "some application line\n"
            "h:1:2 [0] NCCL INFO Using network IB\n")
    read = parse_nccl_log(text, source="r.log").read
    assert read is not None and (read.used, read.not_understood, read.skipped) == (2, (2,), 2)
    assert read.summary() == "read r.log as NCCL log: 2 lines used, 1 not understood (2), 2 other skipped"


@pytest.mark.parametrize(("body", "transport", "evidence", "gdr"), [
    (["NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>", "Using network IB"], "roce", "selected",
     "unknown"),
    (["NET/IB: [0] mlx5_3:1/IB", "Using internal Network IB"], "ib", "selected", "unknown"),
    (["NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>", "Initialized NET plugin IB"], "roce", "selected",
     "unknown"),
    (["NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>", "Using network IBext_v8"], "plugin", "selected",
     "unknown"),
    (["Using network AWS Libfabric"], "plugin", "selected", "unknown"),
    (["NET/IB : No device found.", "NET/Socket : Using [0]eth0:10.0.0.1<0>"], "socket", "selected", "off"),
    (["NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>"], "unknown", "none", "unknown"),
    (["NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>", "Using network IB",
      "GPU Direct RDMA Enabled for GPU 3b000 / HCA 0 (distance 3 <= 3), read 0"], "roce", "selected",
     "receive-only"),
    (["NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.1<0>",
      "Channel 00/0 : 1[1] -> 0[0] [receive] via NET/IB/0/GDRDMA", "Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0",
      "Channel 01/0 : 1[1] -> 0[0] [receive] via NET/IB/0"], "roce", "data-path", "partial"),
])
def test_evidence_is_graded_not_withheld(body: list[str], transport: str, evidence: str, gdr: str) -> None:
    report = parse_nccl_log("\n".join("h:1:2 [0] NCCL INFO " + line for line in body) + "\n")
    assert (report.transport, report.evidence, report.gpudirect_mode) == (transport, evidence, gdr)


def test_dropping_the_data_path_lowers_evidence_and_keeps_the_transport() -> None:
    full = (LOGS / "roce_gdr_2.21.log").read_text()
    cut = "\n".join(line for line in full.splitlines() if "via NET/" not in line and " qp" not in line) + "\n"
    before, after = parse_nccl_log(full), parse_nccl_log(cut)
    assert (before.transport, before.evidence) == ("roce", "data-path")
    assert (after.transport, after.evidence) == ("roce", "selected")


def test_plugins_keep_their_name_and_link_layer() -> None:
    sharp = _parse("sel_network_ibext_sharp.log")
    assert (sharp.transport, sharp.network, sharp.plugin, sharp.plugin_link) == ("plugin", "IBext", "IBext", "IB")
    v8 = _parse("plugin_ibext.log")
    assert (v8.network, v8.plugin_link, v8.gpudirect_mode) == ("IBext_v8", "RoCE", "on")
    assert _parse("sel_network_libfabric.log").plugin == "aws-ofi-nccl 1.13.2"


def test_newer_line_forms() -> None:
    dev = _parse("dev_line_rocep_provider_2.27.log")
    assert (dev.transport, [c.net_device for c in dev.channels]) == ("roce", [0, 1, 0, 1])
    rccl = _parse("rccl_channel_comm_nranks.log")
    assert (rccl.product, rccl.version, rccl.channels[0].via) == ("RCCL", "2.18.3", "NET/IB/0/GDRDMA")
    assert rccl.read is not None and rccl.read.label == "RCCL 2.18.3 log"
    ece = _parse("qp_query_ece_2.21.log")
    assert [(q.net_device, q.gid_index, q.gid) for q in ece.qps] == [(0, 3, "::ffff:192.168.16.11"),
                                                                    (1, 3, "::ffff:192.168.17.11")]
    assert ece.read is not None and ece.read.not_understood == ()
    separate = _parse("qp_query_ece_separate_2.28.log").read
    assert separate is not None and separate.not_understood == ()
    merged = _parse("merged_vnic_net_ib_11.log")
    assert (merged.transport, {c.net_device for c in merged.channels}) == ("roce", {9, 11})


def test_scope_follows_the_hosts_not_the_channels() -> None:
    assert _parse("net_channels_one_host.log").scope == "intra-node"  # nNodes 1
    assert _parse("net_channels_one_host_prefix.log").scope == "intra-node"  # one host printed ranks 0 and 1 of 2
    assert _parse("devices_banner_only.log").scope == "inter-node"  # two hosts' banners
    assert _parse("trap_banner_only.log").scope == "unknown"  # rank 0 of 16 on one host says nothing


def test_plugin_signatures_need_no_plugin_loaded_after_them() -> None:
    assert not _parse("sel_network_ibext_v8_roce.log").signatures  # v9 probe, then v8 loaded
    assert [h.id for h in _parse("fail_plugin_symbol_unsupported.log").signatures] == ["nccl.net-plugin-unsupported"]
    hits = {h.id: h for h in _parse("fail_plugin_glibc.log").signatures}
    assert "GLIBC_2.32" in hits["nccl.net-plugin-failed"].excerpt and "ldd" in hits["nccl.net-plugin-failed"].fix


def test_the_job_socket_ifname_is_judged_against_the_log_not_this_host() -> None:
    host = discover(SYSFS / "mlx5-roce")  # has ens1f0np0, not the job's ens9f0np0
    bound = _parse("env_socket_ifname_bound.log")
    assert bound.interfaces == ("ens9f0np0",)
    assert not [f for f in run_doctor(host, environ={}, nccl_log=bound).findings if f.rule.startswith("env.socket")]
    other = parse_nccl_log((LOGS / "env_socket_ifname_bound.log").read_text().replace(
        "set by environment to ens9f0np0", "set by environment to ens7"))
    found = [f for f in run_doctor(host, environ={}, nccl_log=other).findings if f.rule == "env.socket-ifname-missing"]
    assert len(found) == 1 and found[0].severity == "warning" and "ens9f0np0" in found[0].message
    failed = _parse("fail_bad_socket_ifname.log")  # nothing bound: the AF_INET signature says it, not the env check
    assert "env.socket-ifname-missing" not in {f.rule for f in run_doctor(host, environ={}, nccl_log=failed).findings}
    here = replace(failed, hosts=("gpu-k1",))  # the doctor runs live on the logged host: judge against it
    same = run_doctor(host, environ={}, nccl_log=here, hostname=HostName("gpu-k1"))
    assert "env.socket-ifname-missing" in {f.rule for f in same.findings}


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
