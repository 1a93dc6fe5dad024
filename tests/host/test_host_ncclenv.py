from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tensorfabric.errors import InputError
from tensorfabric.host.discovery import discover
from tensorfabric.host.ncclenv import derive_env, nccl_env_for_nics, parse_nccl_version, tcp_interface
from tensorfabric.topology import Nic

from .conftest import SYSFS, write


def test_env_from_plan_alone() -> None:
    nics = [Nic("eth2", 400e9, "mlx5_0"), Nic("eth3", 400e9, "mlx5_1")]
    assert nccl_env_for_nics(nics) == {
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_TC": "106", "NCCL_IB_ROCE_VERSION_NUM": "2",
        "NCCL_IB_ADDR_FAMILY": "AF_INET", "NCCL_SOCKET_IFNAME": "=eth2,eth3", "GLOO_SOCKET_IFNAME": "eth2"}
    env = nccl_env_for_nics(nics, roce_dscp=24, rail_optimized=True, ports={"mlx5_1": 2}, require_rdma=True)
    assert env["NCCL_IB_TC"] == "98" and env["NCCL_CROSS_NIC"] == "0" and env["NCCL_NET"] == "IB"
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:2"
    assert nccl_env_for_nics(nics, ib_tc=106)["NCCL_IB_TC"] == "106"
    assert nccl_env_for_nics([Nic("eth0", 1e9)]) == {"NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0"}


@pytest.mark.parametrize("kwargs", [{"roce_dscp": 64}, {"roce_dscp": -1}, {"ib_tc": 96}, {"ib_tc": 300},
                                    {"nccl_version": "two"}])
def test_plan_rejects_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        nccl_env_for_nics([Nic("eth2", 400e9, "mlx5_0")], **kwargs)  # type: ignore[arg-type]


def test_versions() -> None:
    assert parse_nccl_version("2.21.5+cuda12.4") == (2, 21) and parse_nccl_version(None) is None


def test_mlx5_host_env_and_reasons() -> None:
    plan = derive_env(discover(SYSFS / "mlx5-roce"), environ={})
    env = plan.as_dict()
    assert env["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1" and env["NCCL_NET_GDR_LEVEL"] == "PHB"
    assert "NCCL_IB_GID_INDEX" not in env and env["NCCL_IB_ROCE_VERSION_NUM"] == "2"
    reasons = {v.name: v.reason for v in plan.variables}
    assert "mlx5_10" in reasons["NCCL_IB_HCA"] and "4 GPU(s) SYS" in reasons["NCCL_NET_GDR_LEVEL"]


def test_old_nccl_gets_a_gid_index(clone: Callable[[str], Path]) -> None:
    env = derive_env(discover(SYSFS / "mlx5-roce"), environ={}, nccl_version="2.18.3").as_dict()
    assert env["NCCL_IB_GID_INDEX"] == "3" and "NCCL_IB_ROCE_VERSION_NUM" not in env
    root = clone("mlx5-roce")  # mlx5_1's IPv4 v2 GID moved to index 5: one index cannot fit both ports
    write(root, "sys/class/infiniband/mlx5_1/ports/1/gids/3", "0000:0000:0000:0000:0000:0000:0000:0000")
    write(root, "sys/class/infiniband/mlx5_1/ports/1/gids/5", "0000:0000:0000:0000:0000:ffff:c0a8:0201")
    write(root, "sys/class/infiniband/mlx5_1/ports/1/gid_attrs/types/5", "RoCE v2")
    plan = derive_env(discover(root), environ={}, nccl_version="2.18")
    assert [f.rule for f in plan.findings] == ["gid.index-differs"]


def test_ipv6_only_ports_select_af_inet6(clone: Callable[[str], Path]) -> None:
    root = clone("bnxt-roce")
    base = "sys/class/infiniband/bnxt_re0/ports/1"
    write(root, f"{base}/gids/2", "2001:0db8:0000:0000:0000:0000:0000:0005")
    write(root, f"{base}/gids/3", "2001:0db8:0000:0000:0000:0000:0000:0005")
    env = derive_env(discover(root), environ={}).as_dict()
    assert env["NCCL_IB_ADDR_FAMILY"] == "AF_INET6"
    assert env["NCCL_SOCKET_IFNAME"] == "=ens2f0np0"  # falls back to the default route


def test_user_values_are_kept_and_reported() -> None:
    plan = derive_env(discover(SYSFS / "mlx5-roce"), environ={"NCCL_IB_HCA": "mlx5_0", "NCCL_IB_TC": "104"})
    assert "NCCL_IB_HCA" not in plan.as_dict() and "NCCL_IB_TC" not in plan.as_dict()
    assert plan.kept == {"NCCL_IB_HCA": "mlx5_0", "NCCL_IB_TC": "104"}
    assert [(f.rule, f.subject) for f in plan.findings] == [("env.user-value-kept", "NCCL_IB_HCA")]


def test_hosts_without_roce() -> None:
    assert derive_env(discover(SYSFS / "ib-host"), environ={}).as_dict() == {
        "NCCL_IB_HCA": "=mlx5_0:1", "NCCL_SOCKET_IFNAME": "=eno1", "GLOO_SOCKET_IFNAME": "eno1"}
    assert derive_env(discover(SYSFS / "no-rdma"), environ={}).as_dict() == {
        "NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0"}


def test_tcp_interface_without_default_route(clone: Callable[[str], Path]) -> None:
    root = clone("mlx5-roce")
    write(root, "proc/net/route", "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask")
    choice = tcp_interface(discover(root))
    assert choice.interface == "eno1" and "no default route" in choice.reason  # docker0 and lo are skipped
