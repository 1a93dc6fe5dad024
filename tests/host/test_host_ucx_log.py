"""``doctor --ucx-log``: UCX/NIXL logs written in the syntax UCX 1.11-1.19 print (lane lines of UCX_LOG_LEVEL=info in
their three shapes, UCX_PROTO_INFO=y tables with and without prefixes, WARN/ERROR lines of backends that never came
up), as quoted in openucx/ucx, ai-dynamo/nixl, vllm and parthenon threads (docs/formats.md lists them), judged
against the fixture hosts; tests/fixtures/ucx_logs/expected.csv says what each one must give, per scope."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.cli.main import main
from tensorfabric.errors import ParseError
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.ucx_report import UcxLogReport, parse_ucx_report

from .conftest import FIXTURES, LOGS, SYSFS

UCX_LOGS = FIXTURES / "ucx_logs"
MLX5 = str(SYSFS / "mlx5-roce")
NO_RDMA = str(SYSFS / "no-rdma")
VERDICTS = ("rdma", "gpu-ipc", "tcp", "shm", "self-only", "no-lanes", "no-data-path", "unknown")


def _table() -> list[tuple[str, str, str, list[str], str, list[str]]]:
    with open(UCX_LOGS / "expected.csv", newline="") as handle:
        rows = [r for r in csv.reader(handle) if r and not r[0].startswith("#")]
    return [(name, cls, verdict, [d for d in devices.split(";") if d], scopes, [r for r in rules.split(";") if r])
            for name, cls, verdict, devices, scopes, rules in rows]


def _scopes(report: UcxLogReport) -> str:
    return ";".join(f"{s.scope}={s.kind}" for s in report.by_scope)


def _ucx_rules(path: Path, root: str = MLX5, *, require_rdma: bool = False) -> dict[str, str]:
    report = parse_ucx_report(path.read_bytes(), source=path.name)
    found = run_doctor(discover(root), environ={}, ucx_log=report, require_rdma=require_rdma)
    return {f.rule: f.severity for f in found.findings if f.rule.startswith("ucx.")}


def test_every_fixture_is_in_the_table() -> None:
    names = {row[0] for row in _table()}
    assert len(names) >= 16
    assert names == {p.name for p in UCX_LOGS.glob("*.log")}


@pytest.mark.parametrize(("name", "cls", "verdict", "devices", "scopes", "rules"), _table())
def test_fixture_class_scopes_devices_and_findings(name: str, cls: str, verdict: str, devices: list[str],
                                                   scopes: str, rules: list[str]) -> None:
    report = parse_ucx_report((UCX_LOGS / name).read_bytes(), source=name)
    assert (report.transport.kind, report.verdict, list(report.devices)) == (cls, verdict, devices)
    assert _scopes(report) == scopes
    assert sorted(_ucx_rules(UCX_LOGS / name)) == sorted(rules)


def test_scopes_are_not_folded_into_one_answer() -> None:
    report = parse_ucx_report((UCX_LOGS / "mixed_scopes.log").read_bytes(), source="mixed")
    scopes = report.to_dict()["by_scope"]
    assert scopes["inter-node"]["data_lanes"] == ["rc_mlx5/mlx5_4:1"]
    assert scopes["inter-node"]["transports"] == {"rc_mlx5/mlx5_4:1": "rdma", "ud_mlx5/mlx5_4:1": "rdma"}
    assert scopes["intra-node"]["data_lanes"] == ["sysv/memory", "posix/memory"]
    assert scopes["intra-node"]["transports"]["cma/memory"] == "shm"
    # the top-level answer is the inter-node one: no shared-memory lane leaks into it
    assert report.transport.lanes == ("rc_mlx5/mlx5_4:1",) and report.devices == ("mlx5_4:1",)
    assert report.summary() == ("inter-node rdma (rc_mlx5/mlx5_4:1); intra-node shm (sysv/memory, posix/memory); "
                                "self loopback (self/memory)")


def test_every_rail_of_a_split_is_a_lane() -> None:
    faq = parse_ucx_report((UCX_LOGS / "proto_mpi_ep_cfg.log").read_bytes(), source="faq")
    own = faq.scope("self")
    assert own is not None
    assert own.transports() == {"self/memory0": "loopback", "xpmem/memory": "shm", "rc_mlx5/mlx5_1:1": "rdma"}
    assert all(e.scope_inferred for e in faq.endpoints) and faq.endpoints[0].worker == "mpi"


def test_error_only_log_says_why_there_is_no_data_path(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(UCX_LOGS / "error_only_gid.log")
    assert main(["doctor", "--sysfs-root", MLX5, "--ucx-log", log, "--json"]) == 1  # read and judged, not exit 2
    data = json.loads(capsys.readouterr().out)
    finding = next(f for f in data["findings"] if f["rule"] == "ucx.backend-failed")
    assert finding["severity"] == "error"
    assert "could not read a GID" in finding["message"] and "index=3" in finding["message"]
    assert "UCX_IB_GID_INDEX" in finding["fix"]
    ucx = data["ucx_log"]
    assert ucx["verdict"] == "no-data-path" and ucx["environment"]["UCX_IB_GID_INDEX"] == "3"
    assert [p["kind"] for p in ucx["problems"]] == ["gid-query-failed", "gid-query-failed", "no-usable-transports",
                                                   "nixl-backend-error"]


def test_unavailable_transports_are_named_before_the_error() -> None:
    report = parse_ucx_report((UCX_LOGS / "error_transports_unavailable.log").read_bytes(), source="x")
    found = run_doctor(discover(MLX5), environ={}, ucx_log=report)
    message = next(f.message for f in found.findings if f.rule == "ucx.backend-failed")
    assert "none of the transports" in message and "'rc_mlx5','rc_verbs' are not available" in message


def test_read_report_counts_what_it_read() -> None:
    report = parse_ucx_report((UCX_LOGS / "roce_rc_mlx5_proto.log").read_text(), source="x")
    read = report.read
    assert (read.format, read.version, read.used, read.not_understood, read.warnings) == ("UCX log", "1.18.0", 7,
                                                                                            (), ())
    assert read.summary().startswith("read x as UCX 1.18.0 log")
    # "/path0" and "50% on path0 and 50% on path1" name the same lane as the endpoint line.
    assert report.transport.lanes == ("rc_mlx5/mlx5_0:1",)
    assert report.version == "1.18.0" and report.inter_node and report.hosts == ("gpu-c14",)


def test_one_recognised_line_is_never_refused() -> None:
    text = "the job died right after start\n[1.5] [h1:7:0]  ucp_context.c:1 UCX  WARN  some future warning\n"
    report = parse_ucx_report(text, source="one")
    assert report.verdict == "no-lanes" and report.read.used == 1 and report.problems[0].kind == "warning"


def test_unknown_info_lines_are_listed_as_not_understood() -> None:
    text = ("[1.0] [h:1:0]  ucp_worker.c:1888 UCX  INFO    w inter-node cfg#1 rma(rc_mlx5/mlx5_0:1)\n"
            "[1.1] [h:1:0]  ucp_context.c:99 UCX  INFO  a line of a newer UCX\n")
    read = parse_ucx_report(text, source="x").read
    assert (read.used, read.not_understood) == (1, (2,))


def test_a_broken_lane_group_is_a_warning_naming_the_line() -> None:
    text = ("[1.0] [h:1:0] ucp_context.c:1 UCX  INFO  Version 1.17.0\n"
            "[1.0] [h:1:0] ucp_worker.c:1888 UCX  INFO    w inter-node cfg#1 rma(rc_mlx5/mlx5_0:1 (x)\n")
    report = parse_ucx_report(text, source="x")
    assert report.verdict == "no-lanes"
    assert report.read.warnings == ("line 2: lane group 'rma(rc_mlx5/mlx5_0:1 (x)' is not lane(transport/device ...)",)


def test_a_hard_wrapped_lane_line_is_rejoined() -> None:
    text = ("[1796115719.43] [vm:8043 :0]  ucp_worker.c:1997 UCX  INFO    r1 intra-node cfg#1 rma(sysv/memory\n"
            "posix/memory)  amo(sysv/memory posix/memory)  am(sysv/memory cma/memory)\n")
    report = parse_ucx_report(text, source="wrapped")
    assert report.transport.lanes == ("sysv/memory", "posix/memory") and report.read.warnings == ()


def test_table_rows_whose_leading_bar_a_collector_took() -> None:
    # "<ISO time> | message" collectors take the first "| " with the timestamp
    text = ("2026-03-13T22:26:02Z | perftest inter-node cfg#0 | remote memory write by ucp_put* from host memory |\n"
            "2026-03-13T22:26:02Z |    0..inf | zero-copy | rc_mlx5/mlx5_7:1 |\n")
    report = parse_ucx_report(text, source="loki")
    assert (report.verdict, report.devices) == ("rdma", ("mlx5_7:1",))
    bare = "".join("| " + line.partition(" | ")[2] + "\n" for line in text.splitlines())  # as ucx_info -e prints
    assert parse_ucx_report(bare, source="bare").devices == ("mlx5_7:1",)


@pytest.mark.parametrize(("line", "kind"), [
    ("ib_device.c:1224 UCX  ERROR ibv_query_gid(dev=mlx5_2 port=1 index=3) failed: Invalid argument",
     "gid-query-failed"),
    ("ucp_context.c:1108 UCX  ERROR no usable transports/devices (asked sockcm,cuda_copy on all devices)",
     "no-usable-transports"),
    ("ib_device.c:1332 UCX  ERROR   ibv_create_ah(dlid=49152 sl=0 port=1 src_path_bits=0 dgid=fe80::1 "
     "sgid_index=0 traffic_class=0) for UD mlx5 connect on mlx5_0 failed: No such device", "address-handle-failed"),
    ("ucp_worker.c:1413 UCX  ERROR uct_iface_open(ud_verbs/erdma_0:1) failed: Input/output error",
     "iface-open-failed"),
    ("ucp_context.c:1774 UCX  WARN  UCP version is incompatible, required: 1.18, actual: 1.12 (release 1)",
     "version-mismatch"),
    ("libperf.c:1086 UCX  ERROR ucp_ep_create() failed: Address not valid", "endpoint-failed"),
    ("ucp_context.c:1268 UCX  WARN  transports 'cuda_ipc','cuda_copy' are not available, please use one or more "
     "of: mm, posix, self, shm, sm, sysv, tcp", "transports-unavailable"),
    ("rc_iface.c:796  UCX  ERROR something new went wrong", "error"),
])
def test_problem_signatures(line: str, kind: str) -> None:
    report = parse_ucx_report(f"[1750000000.1] [n1:42 :0] {line}\n", source="x")
    assert report.problems[0].kind == kind


def test_fallback_severity_depends_on_the_host_and_require_rdma() -> None:
    tcp = UCX_LOGS / "tcp_two_hosts.log"
    assert _ucx_rules(tcp) == {"ucx.tcp-data-path": "warning"}  # this host has mlx5 ports: a real fallback
    assert _ucx_rules(tcp, NO_RDMA) == {"ucx.tcp-data-path": "info"}  # nothing else was possible here
    assert _ucx_rules(tcp, NO_RDMA, require_rdma=True) == {"ucx.tcp-data-path": "error"}
    assert _ucx_rules(UCX_LOGS / "self_only.log", require_rdma=True) == {"ucx.self-only": "error"}
    assert _ucx_rules(UCX_LOGS / "roce_rc_mlx5_proto.log", require_rdma=True) == {}
    # rc_verbs is still RDMA: only the info about the accelerated transport, never an error.
    assert _ucx_rules(UCX_LOGS / "rc_verbs_inter_node.log", require_rdma=True) == {"ucx.rc-verbs": "info"}
    # intra-node shared memory beside inter-node RDMA does not weaken the RDMA verdict
    assert _ucx_rules(UCX_LOGS / "mixed_scopes.log", require_rdma=True) == {}


def test_loopback_tcp_between_local_ranks_is_no_network_proof() -> None:
    rules = _ucx_rules(FIXTURES / "ucx" / "peer_mode_tcp_lo.log")
    assert rules == {"ucx.tcp-data-path": "warning", "ucx.no-inter-node": "warning"}


def test_cli_json_and_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(UCX_LOGS / "roce_rc_mlx5_proto.log")
    main(["doctor", "--sysfs-root", MLX5, "--ucx-log", log, "--json"])
    data = json.loads(capsys.readouterr().out)
    ucx = data["ucx_log"]
    assert (ucx["class"], ucx["verdict"], ucx["lanes"], ucx["devices"]) == (
        "rdma", "rdma", ["rc_mlx5/mlx5_0:1"], ["mlx5_0:1"])
    assert ucx["scopes"] == ["inter-node", "self"] and ucx["by_scope"]["self"]["class"] == "loopback"
    assert ucx["read"]["format"] == "UCX log" and ucx["read"]["used"] == 7
    main(["doctor", "--sysfs-root", MLX5, "--ucx-log", str(UCX_LOGS / "tcp_two_hosts.log")])
    out = " ".join(capsys.readouterr().out.split())
    assert "tcp_two_hosts.log: inter-node tcp (tcp/ens1f0np0); self loopback (self/memory)" in out
    assert "tcp_two_hosts.log as UCX 1.15.0 log (timestamps): 6 lines used" in out


def test_cli_require_rdma_turns_a_fallback_into_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["doctor", "--sysfs-root", NO_RDMA, "--ucx-log", str(UCX_LOGS / "shm_cma_one_host.log"), "--json"]
    main(args)
    plain = {f["rule"]: f["severity"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert main([*args, "--require-rdma"]) == 1
    strict = {f["rule"]: f["severity"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert (plain["ucx.shm-data-path"], strict["ucx.shm-data-path"]) == ("info", "error")


@pytest.mark.parametrize("content", [
    b"",
    (LOGS / "roce_gdr_2.21.log").read_bytes(),  # an NCCL log: no UCX line at all
    bytes(range(256)) * 4,
    b"[1.0] [h:1:0] ucp_worker.c:1 UCX  INFO  Version 1.17.0\x00\x00\n",
])
def test_bad_logs_exit_2_with_one_line(tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ucx.log"
    path.write_bytes(content)
    assert main(["doctor", "--sysfs-root", MLX5, "--ucx-log", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err


def test_nothing_recognised_says_what_was_expected() -> None:
    expected = r"expected the log of a run with UCX_LOG_LEVEL=info UCX_PROTO_INFO=y.*first line is 'hello there'"
    with pytest.raises(ParseError, match=expected):
        parse_ucx_report("hello there\nnothing else\n", source="prose")


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--sysfs-root", MLX5, "--ucx-log", "/nonexistent/ucx.log"]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_a_10mb_line_is_linear() -> None:
    lane = "[1.0] [h:1:0] ucp_worker.c:1888 UCX  INFO    w inter-node cfg#1 " + "rma(rc_mlx5/mlx5_0:1) " * 450_000
    row = "[1.0] [h:1:0]   | " + "0..inf | zero-copy | " * 500_000 + "|"
    ok = "[1.0] [h:1:0] ucp_worker.c:1888 UCX  INFO    w inter-node cfg#2 rma(rc_mlx5/mlx5_1:1)"
    report = parse_ucx_report(lane + "\n" + row + "\n" + ok + "\n", source="big")
    assert report.verdict == "rdma" and report.read.long_lines == (1, 2)
    # below the intake's limit a long lane line is read up to MAX_LINE characters
    mid = "[1.0] [h:1:0] ucp_worker.c:1888 UCX  INFO    w inter-node cfg#1 " + "rma(rc_mlx5/mlx5_0:1) " * 2_900
    assert parse_ucx_report(mid + "\n", source="mid").transport.lanes == ("rc_mlx5/mlx5_0:1",)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["| w inter-node cfg#1 | remote memory write |", "| 0..inf | short | tcp/eth0 |",
                                 "[1.0] [h:1:0] x.c:1 UCX  INFO  Version 1.16.0", "|", "| |", "rma(", ")",
                                 "ep_cfg[1]: tag(", "x ep_cfg[2] | tagged message |", "UCX  ERROR no usable",
                                 "w self cfg#0tag(self/memory)", "50% on rc_mlx5/mlx5_0:1 and"]))
       .map("\n".join) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_random_text_only_ever_raises_parse_error(text: str) -> None:
    try:
        report = parse_ucx_report(text, source="fuzz")
    except ParseError:
        return
    assert report.verdict in VERDICTS


@pytest.mark.parametrize(("lanes", "scope", "rules"), [
    ("rma(rc_mlx5/mlx5_0:1)  am(rc_mlx5/mlx5_0:1)", "intra-node", {"ucx.no-inter-node": "warning"}),
    ("rma(cuda_ipc/cuda)  am(cuda_ipc/cuda)", "intra-node",
     {"ucx.gpu-ipc-data-path": "info", "ucx.no-inter-node": "warning"}),
    ("rma(cuda_copy/cuda)  am(cuda_copy/cuda)", "intra-node", {"ucx.transport-unknown": "warning"}),
    # The data (rma) lanes decide: rc_mlx5 on the am lane alone does not make the writes accelerated.
    ("rma(rc_verbs/mlx5_0:1)  am(rc_mlx5/mlx5_0:1)", "inter-node", {"ucx.rc-verbs": "info"}),
    ("rma(rc_mlx5/mlx5_0:1)  am(rc_verbs/mlx5_0:1)", "inter-node", {}),
])
def test_inline_lane_lines(tmp_path: Path, lanes: str, scope: str, rules: dict[str, str]) -> None:
    path = tmp_path / "ucx.log"
    path.write_text(f"[1733056000.1] [gpu-c17:4410:0]      ucp_worker.c:1888 UCX  INFO    w0 {scope} cfg#1 {lanes}\n")
    assert _ucx_rules(path) == rules


def test_errors_beside_working_endpoints_are_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "ucx.log"
    prefix = "[1745499308.1] [decode-2:760  :0]      "
    path.write_text(f"{prefix}ucp_worker.c:1903 UCX  INFO    ucp_context_0 inter-node cfg#1 rma(rc_mlx5/mlx5_0:1)\n"
                    f"{prefix}ib_device.c:1332 UCX  ERROR   ibv_create_ah(dlid=49152 sl=0 port=1 src_path_bits=0 "
                    "dgid=fe80::5aa2:e1ff:fefe:c130 sgid_index=0 traffic_class=0) for UD mlx5 connect on mlx5_0 "
                    "failed: No such device\n")
    assert _ucx_rules(path) == {"ucx.errors-logged": "warning"}
