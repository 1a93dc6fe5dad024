from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tensorfabric.errors import InputError
from tensorfabric.host.discovery import affinity, discover, parse_memlock, parse_nccl_conf, parse_route
from tensorfabric.host.gids import Gid, gid_version, select_gid
from tensorfabric.host.pci import chain_of, distance

from .conftest import SYSFS, write


def test_mlx5_host_ports_gids_and_netdevs() -> None:
    inv = discover(SYSFS / "mlx5-roce")
    assert [d.name for d in inv.rdma_devices] == ["mlx5_0", "mlx5_1"]
    dev = inv.rdma_devices[0]
    assert (dev.driver, dev.pci_address, dev.numa_node, dev.hca_type) == ("mlx5_core", "0000:05:00.0", 0, "MT4129")
    port = dev.ports[0]
    assert port.active and port.is_roce and port.netdev == "ens1f0np0"
    assert [(g.index, g.version, g.is_link_local, g.ipv4) for g in port.gids] == [
        (0, 1, True, None), (1, 2, True, None), (2, 1, False, "192.168.1.1"), (3, 2, False, "192.168.1.1")]
    assert inv.netdevs["ens1f0np0"].mtu == 9000
    assert inv.netdevs["ens1f0np0"].ecn_np[3] is True and inv.netdevs["ens1f0np0"].ecn_rp[0] is False
    assert len(inv.gpus) == 8 and inv.memlock == "unlimited" and inv.default_route == "eno1"
    assert inv.dev_infiniband == ("rdma_cm", "uverbs0", "uverbs1")
    assert inv.gdr_support == ("sys/module/nvidia_peermem",)


def test_gpu_nic_distance_from_pci_tree() -> None:
    pairs = {a.gpu: (a.nic, a.distance) for a in affinity(discover(SYSFS / "mlx5-roce"))}
    assert pairs["0000:03:00.0"] == ("mlx5_0", "PIX")  # same PCIe switch as the NIC
    assert pairs["0000:08:00.0"][1] == "PHB"  # other root port, same socket
    assert pairs["0000:83:00.0"][1] == "SYS"  # other socket


def test_distance_rules() -> None:
    hb = ("pci0000:00", "0000:00:01.0", "0000:01:00.0")
    assert distance((*hb, "0000:02:00.0", "0000:03:00.0"), (*hb, "0000:02:01.0", "0000:04:00.0")) == "PIX"
    nested = (*hb, "0000:02:00.0", "0000:03:00.0", "0000:04:00.0", "0000:05:00.0")
    assert distance(nested, (*hb, "0000:02:01.0", "0000:06:00.0")) == "PXB"
    assert distance(("pci0000:00", "0000:00:01.0", "0000:01:00.0"), ("pci0000:00", "0000:00:02.0",
                                                                      "0000:06:00.0")) == "PHB"
    assert distance(("pci0000:00", "0000:00:01.0"), ("pci0000:80", "0000:80:01.0"), 0, 1) == "SYS"
    assert distance(("pci0000:00", "0000:00:01.0"), ("pci0000:40", "0000:40:01.0"), 0, 0) == "PHB"
    assert chain_of("sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0") == ("pci0000:00", "0000:00:03.0")
    assert chain_of("sys/devices/virtual/net/lo") == ()


def test_bnxt_ib_and_no_rdma_hosts() -> None:
    bnxt = discover(SYSFS / "bnxt-roce")
    assert bnxt.rdma_devices[0].driver == "bnxt_en" and bnxt.rdma_devices[0].ports[0].netdev == "ens2f0np0"
    assert bnxt.memlock == 65536 and not bnxt.gpus
    ib = discover(SYSFS / "ib-host")
    port = ib.rdma_devices[0].ports[0]
    assert port.link_layer == "InfiniBand" and not port.is_roce and port.netdev == "ib0"  # IPoIB via device/net
    bare = discover(SYSFS / "no-rdma")
    assert bare.rdma_devices == () and bare.dev_infiniband is None and bare.in_container
    assert bare.default_route == "eth0" and bare.memlock == 8 * 1024 * 1024


def test_bad_roots(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a directory"):
        discover(tmp_path / "nope")
    with pytest.raises(InputError, match="no sys/"):
        discover(tmp_path)


def test_traffic_class_override_and_missing_attributes(clone: Callable[[str], Path]) -> None:
    root = clone("mlx5-roce")
    write(root, "sys/class/infiniband/mlx5_0/tc/1/traffic_class", "Global tclass=106")
    (root / "sys/class/infiniband/mlx5_1/ports/1/gid_attrs/types/3").unlink()  # EINVAL in containers
    shutil.rmtree(root / "proc")
    inv = discover(root)
    assert inv.rdma_devices[0].ports[0].traffic_class == 106
    assert inv.rdma_devices[1].ports[0].gids[3].version is None
    assert inv.memlock is None and inv.default_route is None


def test_gid_helpers() -> None:
    assert gid_version("IB/RoCE v1") == 1 and gid_version("RoCE v2") == 2 and gid_version(None) is None
    gids = [Gid(0, "fe80::1", "RoCE v2"), Gid(1, "::ffff:10.0.0.1", "IB/RoCE v1"),
            Gid(2, "::ffff:10.0.0.1", "RoCE v2"), Gid(3, "2001:db8::1", "RoCE v2")]
    assert select_gid(gids) == gids[2]
    assert select_gid(gids, family="AF_INET6") == gids[3]
    assert select_gid(gids[:2]) is None
    assert Gid(4, "garbage").is_zero


def test_proc_parsers() -> None:
    assert parse_memlock("Max locked memory         unlimited            unlimited            bytes") == "unlimited"
    assert parse_memlock("Max open files 1 1 files") is None
    route = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\nb\t00000000\t0\t0003\t0\t0\t200\t" \
            "00000000\na\t00000000\t0\t0003\t0\t0\t100\t00000000\nc\t00000000\t0\t0002\t0\t0\t1\t00000000\n"
    assert parse_route(route) == "a"  # lowest metric among routes that are up
    # As NCCL's setEnvFile: 'NCCL_IB_GID_INDEX ' (with its space) is not NCCL_IB_GID_INDEX, quotes stay.
    assert parse_nccl_conf("# c\nNCCL_IB_TC=106\n\nNCCL_IB_GID_INDEX = '3'\nbogus\n") == {"NCCL_IB_TC": "106"}
    assert parse_nccl_conf("NCCL_IB_HCA='=mlx5_0'\nNCCL_IB_HCA==mlx5_1\n") == {"NCCL_IB_HCA": "'=mlx5_0'"}
