"""One test per doctor check, each on a fixture tree with one fact changed."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tensorfabric.findings import Finding
from tensorfabric.host.checks import CHECKS
from tensorfabric.host.checks.mtu import roce_mtu
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.nccl_log import parse_nccl_log
from tensorfabric.host.ncclenv import derive_env

from .conftest import LOGS, SYSFS, write

Clone = Callable[[str], Path]


def _doctor(root: Path, environ: Mapping[str, str] | None = None, **kw: object) -> list[Finding]:
    return list(run_doctor(discover(root), environ=environ or {}, **kw).findings)  # type: ignore[arg-type]


def _rules(findings: list[Finding]) -> dict[str, str]:
    return {f.rule: f.severity for f in findings}


def _good_env(root: Path) -> dict[str, str]:
    return derive_env(discover(root), environ={}).as_dict()


def test_registry_has_every_topic() -> None:
    assert {"rdma.devices", "rdma.ports", "limits.memlock", "net.tcp-path", "gid.table", "gid.index-env",
            "env.ib-hca", "env.net", "env.tc", "env.socket-ifname", "gdr", "mtu", "ecn", "log"} <= set(CHECKS)


def test_healthy_host_with_derived_env_has_no_findings() -> None:
    root = SYSFS / "mlx5-roce"
    assert _doctor(root, _good_env(root)) == []


def test_no_rdma_reports_container_hint_and_tcp_path() -> None:
    report = run_doctor(discover(SYSFS / "no-rdma"), environ={})
    rules = _rules(list(report.findings))
    assert rules == {"rdma.no-device": "error", "net.tcp-path": "info"}
    no_dev = next(f for f in report.findings if f.rule == "rdma.no-device")
    assert "--device=/dev/infiniband" in no_dev.fix and no_dev.evidence["in_container"] is True
    assert report.tcp_path.interface == "eth0" and report.exit_code == 1


def test_missing_dev_infiniband(clone: Clone) -> None:
    root = clone("mlx5-roce")
    shutil.rmtree(root / "dev")
    assert _rules(_doctor(root, _good_env(root)))["rdma.no-dev-infiniband"] == "error"


def test_port_down(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, "sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN")
    write(root, "sys/class/infiniband/mlx5_1/ports/1/phys_state", "3: Disabled")
    findings = _doctor(root, _good_env(root))
    assert [(f.rule, f.severity, f.subject) for f in findings] == [("rdma.port-down", "warning", "mlx5_1 port 1")]
    write(root, "sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN")
    assert _rules(_doctor(root))["rdma.port-down"] == "error"  # nothing left active


def test_no_rocev2_gid_and_link_local_only(clone: Clone) -> None:
    root = clone("mlx5-roce")
    for i in (1, 3):
        write(root, f"sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/{i}", "IB/RoCE v1")
    for i in (2, 3):  # mlx5_1 loses its IPv4 address
        write(root, f"sys/class/infiniband/mlx5_1/ports/1/gids/{i}", "0000:0000:0000:0000:0000:0000:0000:0000")
    findings = {(f.rule, f.subject) for f in _doctor(root, _good_env(SYSFS / "mlx5-roce"))}
    assert ("gid.no-rocev2", "mlx5_0 port 1") in findings
    assert ("gid.link-local-only", "mlx5_1 port 1") in findings


@pytest.mark.parametrize(("index", "problem"), [("2", "RoCE v1"), ("1", "link-local"), ("9", "empty"),
                                                ("", "link-local"), ("x", "not an integer")])
def test_gid_index_env_pointing_at_bad_gid(index: str, problem: str) -> None:
    root = SYSFS / "mlx5-roce"
    findings = [f for f in _doctor(root, {**_good_env(root), "NCCL_IB_GID_INDEX": index}) if f.rule == "gid.index-env"]
    assert findings and all(f.severity == "error" and problem in f.message for f in findings)


def test_gid_index_env_valid_is_the_pinned_warning_only() -> None:
    root = SYSFS / "mlx5-roce"
    assert _rules(_doctor(root, {**_good_env(root), "NCCL_IB_GID_INDEX": "3"})) == {"nccl.gid-index-pinned": "warning"}


def test_ib_hca_prefix_pitfall(clone: Clone) -> None:
    root = clone("mlx5-roce")
    base = _good_env(SYSFS / "mlx5-roce")
    assert _rules(_doctor(root, {**base, "NCCL_IB_HCA": "mlx5_0,mlx5_1"}))["nccl.hca-prefix-match"] == "warning"
    # Give the host an mlx5_10: now 'mlx5_1' really over-selects.
    (root / "sys/class/infiniband/mlx5_10").symlink_to("mlx5_1")
    found = [f for f in _doctor(root, {**base, "NCCL_IB_HCA": "mlx5_1"}) if f.rule == "nccl.hca-prefix-match"]
    assert found[0].severity == "error" and "mlx5_10" in found[0].message
    assert "NCCL_IB_HCA==mlx5_1" in found[0].fix
    exact = _doctor(root, {**base, "NCCL_IB_HCA": "=mlx5_1:1"})
    assert not [f for f in exact if f.rule.startswith(("env.ib-hca", "nccl.hca"))]
    assert _rules(_doctor(root, {**base, "NCCL_IB_HCA": "=mlx5_7"}))["env.ib-hca-unknown"] == "error"


def test_mtu_too_small_and_unequal(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, "sys/class/net/ens1f1np1/mtu", "4000")
    rules = _rules(_doctor(root, _good_env(root)))
    assert rules == {"mtu.too-small": "warning", "mtu.unequal": "warning"}
    assert roce_mtu(9000) == 4096 and roce_mtu(4192) == 4096 and roce_mtu(4191) == 2048 and roce_mtu(1500) == 1024
    assert _rules(_doctor(SYSFS / "mlx5-roce", _good_env(root), mtu=4200)) == {"mtu.plan-mismatch": "warning"}


@pytest.mark.parametrize(("tc", "bad"), [(None, True), ("0", True), ("96", True), ("104", False), ("106", False),
                                          ("abc", True)])
def test_tc_must_carry_the_lossless_dscp(tc: str | None, bad: bool) -> None:
    root = SYSFS / "mlx5-roce"
    env = {k: v for k, v in _good_env(root).items() if k != "NCCL_IB_TC"}
    if tc is not None:
        env["NCCL_IB_TC"] = tc
    assert ("nccl.tc-not-lossless" in _rules(_doctor(root, env))) is bad


def test_tc_from_global_override_and_spec_dscp(clone: Clone) -> None:
    root = clone("mlx5-roce")
    env = {k: v for k, v in _good_env(root).items() if k != "NCCL_IB_TC"}
    for dev in ("mlx5_0", "mlx5_1"):
        write(root, f"sys/class/infiniband/{dev}/tc/1/traffic_class", "Global tclass=106")
    assert "nccl.tc-not-lossless" not in _rules(_doctor(root, env))
    assert "nccl.tc-not-lossless" in _rules(_doctor(root, env, roce_dscp=24))


def test_ecn_off_on_roce_priority(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, "sys/class/net/ens1f0np0/ecn/roce_np/enable/3", "0")
    found = [f for f in _doctor(root, _good_env(root)) if f.rule == "ecn.off"]
    assert len(found) == 1 and found[0].evidence["disabled"] == ["roce_np"]
    assert "roce_np/enable/3" in found[0].fix
    assert [f.rule for f in _doctor(root, _good_env(root), roce_priority=4)] == ["ecn.off"] * 2  # both off on 4


@pytest.mark.parametrize(("env", "rule"), [({"NCCL_IB_DISABLE": "1"}, "env.ib-disabled"),
                                           ({"NCCL_NET": "socket"}, "env.net-socket")])
def test_rdma_disabled_by_environment(env: dict[str, str], rule: str) -> None:
    root = SYSFS / "mlx5-roce"
    assert _rules(_doctor(root, {**_good_env(root), **env})) == {rule: "error"}


def test_nccl_conf_counts_like_the_environment(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, "etc/nccl.conf", "NCCL_IB_DISABLE=1\nNCCL_IB_TC=106")
    env = {k: v for k, v in _good_env(root).items() if k != "NCCL_IB_TC"}
    assert _rules(_doctor(root, env)) == {"env.ib-disabled": "error"}
    assert _rules(_doctor(root, {**env, "NCCL_IB_DISABLE": "0"})) == {}  # the process environment wins


def test_socket_ifname_missing() -> None:
    root = SYSFS / "mlx5-roce"
    env = _good_env(root)
    assert _rules(_doctor(root, {**env, "NCCL_SOCKET_IFNAME": "=eth7"}))["env.socket-ifname-missing"] == "error"
    assert _rules(_doctor(root, {**env, "GLOO_SOCKET_IFNAME": "ens1"}))["env.socket-ifname-missing"] == "error"
    assert _rules(_doctor(root, {**env, "NCCL_SOCKET_IFNAME": "ens1"})) == {}


@pytest.mark.parametrize(("level", "blocked"), [("LOC", 8), ("PIX", 6), ("0", 8), ("1", 6), ("PXB", 6),
                                                ("PHB", 0), ("SYS", 0), ("5", 0)])
def test_gdr_level_stricter_than_measured_distance(level: str, blocked: int) -> None:
    root = SYSFS / "mlx5-roce"
    found = [f for f in _doctor(root, {**_good_env(root), "NCCL_NET_GDR_LEVEL": level})
             if f.rule == "gdr.level-too-strict"]
    assert (len(found[0].evidence["blocked"]) if found else 0) == blocked


def test_gdr_without_peermem_and_invalid_level(clone: Clone) -> None:
    root = clone("mlx5-roce")
    shutil.rmtree(root / "sys/module/nvidia_peermem")
    env = _good_env(root)
    assert _rules(_doctor(root, env)) == {"gdr.no-peermem": "warning"}
    for bad in ("CLOSE", "\u00b2"):
        assert _rules(_doctor(root, {**env, "NCCL_NET_GDR_LEVEL": bad}))["gdr.level-invalid"] == "error"


def test_memlock(clone: Clone) -> None:
    assert _rules(_doctor(SYSFS / "bnxt-roce", _good_env(SYSFS / "bnxt-roce")))["limits.memlock"] == "error"
    root = clone("mlx5-roce")
    write(root, "proc/self/limits", "Max locked memory         2147483648           2147483648           bytes")
    assert _rules(_doctor(root, _good_env(root))) == {"limits.memlock": "warning"}


def test_ib_host_needs_no_roce_checks() -> None:
    root = SYSFS / "ib-host"
    assert _doctor(root, _good_env(root)) == []


@pytest.mark.parametrize(("log", "rules"), [
    ("socket_fallback_no_device.log", {"log.socket-transport": "error", "log.no-libibverbs": "error",
                                       "log.env-not-logged": "info"}),
    ("roce_gdr_disabled.log", {"log.gdr-disabled": "warning", "log.env-not-logged": "info"}),
    ("completion_error_12.log", {"log.completion-error-12": "error", "log.watchdog-timeout": "error",
                                 "log.env-not-logged": "info"}),
    ("roce_gdr_2.21.log", {}),
])
def test_log_findings(log: str, rules: dict[str, str]) -> None:
    root = SYSFS / "mlx5-roce"
    report = parse_nccl_log((LOGS / log).read_text(), source=log)
    assert _rules(_doctor(root, _good_env(root), nccl_log=report)) == rules


def test_log_unknown_transport() -> None:
    root = SYSFS / "mlx5-roce"
    report = parse_nccl_log("h:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")
    assert _rules(_doctor(root, _good_env(root), nccl_log=report)) == {"log.transport-unknown": "warning",
                                                                       "log.env-not-logged": "info"}


def test_log_gid_index_must_be_rocev2_on_this_host() -> None:
    root = SYSFS / "mlx5-roce"
    text = (LOGS / "roce_gdr_2.21.log").read_text()
    assert "log.gid-not-rocev2" not in _rules(_doctor(root, _good_env(root), nccl_log=parse_nccl_log(text)))
    moved = parse_nccl_log(text.replace("GID 3 (", "GID 2 ("))
    found = [f for f in _doctor(root, _good_env(root), nccl_log=moved) if f.rule == "log.gid-not-rocev2"]
    assert len(found) == 2 and found[0].severity == "error" and "192.168.1.1 v1" in found[0].message


def test_log_reports_the_environment_nccl_saw() -> None:
    root = SYSFS / "mlx5-roce"
    base = "h:1:2 [0] NCCL INFO Using network IB\nh:1:2 [0] NCCL INFO NCCL_IB_TC set by environment to {}.\n"
    good = parse_nccl_log(base.format(106))
    assert good.environment == {"NCCL_IB_TC": "106"}
    # The shell's own (wrong) value never enters a verdict about the logged job ...
    assert "nccl.tc-not-lossless" not in _rules(_doctor(root, {"NCCL_IB_TC": "0"}, nccl_log=good))
    bad = parse_nccl_log(base.format(0))
    # ... nor does the shell's right value hide the job's wrong one.
    found = [f for f in _doctor(root, _good_env(root), nccl_log=bad) if f.rule == "nccl.tc-not-lossless"]
    assert len(found) == 1 and found[0].severity == "error"
    assert found[0].subject == "log <log> env NCCL_IB_TC" and found[0].evidence["environment_source"] == "log"


def test_log_with_both_socket_and_ib_channels() -> None:
    root = SYSFS / "mlx5-roce"
    text = ("a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
            "b:3:4 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/Socket/0\n")
    report = parse_nccl_log(text)
    assert report.transport == "socket"
    assert _rules(_doctor(root, _good_env(root), nccl_log=report)) == {
        "log.mixed-transports": "error", "log.socket-transport": "error", "log.env-not-logged": "info"}
