"""``doctor --ucx-log``: UCX/NIXL logs written in the syntax UCX 1.15-1.19 print (lane lines of UCX_LOG_LEVEL=info
and UCX_PROTO_INFO=y tables, as quoted in openucx/ucx and ai-dynamo/nixl threads), judged against the fixture
hosts; the table in tests/fixtures/ucx_logs/expected.csv says what each one must give."""

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
from tensorfabric.host.ucx_report import parse_ucx_report

from .conftest import FIXTURES, LOGS, SYSFS

UCX_LOGS = FIXTURES / "ucx_logs"
MLX5 = str(SYSFS / "mlx5-roce")
NO_RDMA = str(SYSFS / "no-rdma")


def _table() -> list[tuple[str, str, str, list[str], list[str]]]:
    with open(UCX_LOGS / "expected.csv", newline="") as handle:
        rows = [r for r in csv.reader(handle) if r and not r[0].startswith("#")]
    return [(name, cls, verdict, [d for d in devices.split(";") if d], [r for r in rules.split(";") if r])
            for name, cls, verdict, devices, rules in rows]


def _ucx_rules(path: Path, root: str = MLX5, *, require_rdma: bool = False) -> dict[str, str]:
    report = parse_ucx_report(path.read_bytes(), source=path.name)
    found = run_doctor(discover(root), environ={}, ucx_log=report, require_rdma=require_rdma)
    return {f.rule: f.severity for f in found.findings if f.rule.startswith("ucx.")}


def test_every_fixture_is_in_the_table() -> None:
    names = {row[0] for row in _table()}
    assert len(names) >= 6
    assert names == {p.name for p in UCX_LOGS.glob("*.log")}


@pytest.mark.parametrize(("name", "cls", "verdict", "devices", "rules"), _table())
def test_fixture_class_devices_and_findings(name: str, cls: str, verdict: str, devices: list[str],
                                            rules: list[str]) -> None:
    report = parse_ucx_report((UCX_LOGS / name).read_bytes(), source=name)
    assert (report.transport.kind, report.verdict, list(report.devices)) == (cls, verdict, devices)
    assert sorted(_ucx_rules(UCX_LOGS / name)) == sorted(rules)


def test_fallback_severity_depends_on_the_host_and_require_rdma() -> None:
    tcp = UCX_LOGS / "tcp_two_hosts.log"
    assert _ucx_rules(tcp) == {"ucx.tcp-data-path": "warning"}  # this host has mlx5 ports: a real fallback
    assert _ucx_rules(tcp, NO_RDMA) == {"ucx.tcp-data-path": "info"}  # nothing else was possible here
    assert _ucx_rules(tcp, NO_RDMA, require_rdma=True) == {"ucx.tcp-data-path": "error"}
    assert _ucx_rules(UCX_LOGS / "self_only.log", require_rdma=True) == {"ucx.self-only": "error"}
    assert _ucx_rules(UCX_LOGS / "roce_rc_mlx5_proto.log", require_rdma=True) == {}
    # rc_verbs is still RDMA: only the info about the accelerated transport, never an error.
    assert _ucx_rules(UCX_LOGS / "rc_verbs_inter_node.log", require_rdma=True) == {"ucx.rc-verbs": "info"}


def test_lane_suffixes_and_version() -> None:
    report = parse_ucx_report((UCX_LOGS / "roce_rc_mlx5_proto.log").read_text(), source="x")
    # "/path0" and "50% on path0 and 50% on path1" name the same lane as the endpoint line.
    assert report.transport.lanes == ("rc_mlx5/mlx5_0:1",)
    assert report.version == "1.18.0" and report.inter_node


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
    main(["doctor", "--sysfs-root", MLX5, "--ucx-log", str(UCX_LOGS / "tcp_two_hosts.log")])
    out = " ".join(capsys.readouterr().out.split())
    assert "class tcp, verdict tcp, lanes tcp/ens1f0np0, devices ens1f0np0" in out


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
    b"[1.0] [h:1:0] ucp_worker.c:1888 UCX  INFO    w inter-node cfg#1 rma(rc_mlx5/mlx5_0:1 (x)\n",
])
def test_bad_logs_exit_2_with_one_line(tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ucx.log"
    path.write_bytes(content)
    assert main(["doctor", "--sysfs-root", MLX5, "--ucx-log", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err


def test_missing_file_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--sysfs-root", MLX5, "--ucx-log", "/nonexistent/ucx.log"]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_a_10mb_line_is_linear() -> None:
    lane = "[1.0] [h:1:0] ucp_worker.c:1888 UCX  INFO    w inter-node cfg#1 " + "rma(rc_mlx5/mlx5_0:1) " * 450_000
    row = "[1.0] [h:1:0]   | " + "0..inf | zero-copy | " * 500_000 + "|"
    report = parse_ucx_report(lane + "\n" + row + "\n", source="big")
    assert report.verdict in ("rdma", "unknown")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["| w inter-node cfg#1 | remote memory write |", "| 0..inf | short | tcp/eth0 |",
                                 "[1.0] [h:1:0] x.c:1 UCX  INFO  Version 1.16.0", "|", "| |", "rma(", ")"]))
       .map("\n".join) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_random_text_only_ever_raises_parse_error(text: str) -> None:
    try:
        report = parse_ucx_report(text, source="fuzz")
    except ParseError:
        return
    assert report.verdict in ("rdma", "tcp", "shm", "self-only", "no-lanes", "unknown")


@pytest.mark.parametrize(("lanes", "scope", "rules"), [
    ("rma(rc_mlx5/mlx5_0:1)  am(rc_mlx5/mlx5_0:1)", "intra-node", {"ucx.no-inter-node": "warning"}),
    ("rma(cuda_ipc/cuda)  am(cuda_ipc/cuda)", "intra-node", {"ucx.transport-unknown": "warning"}),
    # The data (rma) lanes decide: rc_mlx5 on the am lane alone does not make the writes accelerated.
    ("rma(rc_verbs/mlx5_0:1)  am(rc_mlx5/mlx5_0:1)", "inter-node", {"ucx.rc-verbs": "info"}),
    ("rma(rc_mlx5/mlx5_0:1)  am(rc_verbs/mlx5_0:1)", "inter-node", {}),
])
def test_inline_lane_lines(tmp_path: Path, lanes: str, scope: str, rules: dict[str, str]) -> None:
    path = tmp_path / "ucx.log"
    path.write_text(f"[1733056000.1] [gpu-c17:4410:0]      ucp_worker.c:1888 UCX  INFO    w0 {scope} cfg#1 {lanes}\n")
    assert _ucx_rules(path) == rules
