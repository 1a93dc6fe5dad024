"""Frozen records of what discovery found on a host: RDMA devices and ports, netdevs, GPUs, limits."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tensorfabric.host.gids import Gid
from tensorfabric.host.nccl_conf import NcclConf

__all__ = ["Gpu", "HostInventory", "HostName", "Memlock", "NetDev", "RdmaDevice", "RdmaPort", "RouteChoice"]

Memlock = int | Literal["unlimited"] | None
"""Bytes, ``"unlimited"``, or ``None`` when the limit could not be read."""


@dataclass(frozen=True, slots=True)
class RdmaPort:
    device: str
    port: int
    state: str = ""
    phys_state: str = ""
    rate: str = ""
    link_layer: str = ""
    gids: tuple[Gid, ...] = ()
    netdev: str | None = None
    traffic_class: int | None = None
    """MLNX_OFED global override (``tc/<port>/traffic_class``); ``None`` when absent or unset."""

    @property
    def active(self) -> bool:
        return self.state.split(":")[-1].strip().upper() == "ACTIVE"

    @property
    def is_roce(self) -> bool:
        return self.link_layer.lower() == "ethernet"

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "port": self.port, "state": self.state, "phys_state": self.phys_state,
                "rate": self.rate, "link_layer": self.link_layer, "netdev": self.netdev,
                "traffic_class": self.traffic_class, "gids": [g.describe() for g in self.gids]}


@dataclass(frozen=True, slots=True)
class RdmaDevice:
    name: str
    node_type: str = ""
    fw_ver: str = ""
    hca_type: str = ""
    driver: str | None = None
    pci_address: str | None = None
    numa_node: int | None = None
    ports: tuple[RdmaPort, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "node_type": self.node_type, "fw_ver": self.fw_ver, "hca_type": self.hca_type,
                "driver": self.driver, "pci_address": self.pci_address, "numa_node": self.numa_node,
                "ports": [p.to_dict() for p in self.ports]}


@dataclass(frozen=True, slots=True)
class NetDev:
    name: str
    mtu: int | None = None
    speed_mbps: int | None = None
    operstate: str = ""
    pci_address: str | None = None
    ecn_np: Mapping[int, bool] = field(default_factory=dict)
    """``ecn/roce_np/enable/<prio>`` (receiver sends CNPs); empty where the knobs do not exist."""
    ecn_rp: Mapping[int, bool] = field(default_factory=dict)
    """``ecn/roce_rp/enable/<prio>`` (sender reacts with DCQCN)."""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "mtu": self.mtu, "speed_mbps": self.speed_mbps, "operstate": self.operstate,
                "pci_address": self.pci_address, "ecn_np": dict(self.ecn_np), "ecn_rp": dict(self.ecn_rp)}


@dataclass(frozen=True, slots=True)
class Gpu:
    pci_address: str
    device_id: str = ""
    numa_node: int | None = None


@dataclass(frozen=True, slots=True)
class RouteChoice:
    """The interface TCP traffic (bootstrap, Gloo, NCCL's socket transport) would use, and why."""

    interface: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"interface": self.interface, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class HostName:
    """This host's name and the addresses it resolves to (what Gloo and NCCL advertise to peers)."""

    name: str
    addresses: tuple[str, ...] = ()
    error: str | None = None
    """Why resolution failed, when it did."""

    @property
    def loopback(self) -> tuple[str, ...]:
        return tuple(a for a in self.addresses if a.startswith("127.") or a == "::1")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "addresses": list(self.addresses), "error": self.error}


@dataclass(frozen=True, slots=True)
class HostInventory:
    """Everything discovery read, with the root it read it from."""

    root: str
    rdma_devices: tuple[RdmaDevice, ...] = ()
    netdevs: Mapping[str, NetDev] = field(default_factory=dict)
    gpus: tuple[Gpu, ...] = ()
    pci_paths: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """PCI address -> chain from the host bridge (``pci0000:00``) down to the device itself."""
    pci_numa: Mapping[str, int | None] = field(default_factory=dict)
    dev_infiniband: tuple[str, ...] | None = None
    """Entries of /dev/infiniband, ``None`` when the directory is missing."""
    memlock: Memlock = None
    default_route: str | None = None
    gdr_support: tuple[str, ...] = ()
    """Evidence that GPUDirect RDMA can work (peer-memory module paths found)."""
    in_container: bool = False
    nccl_conf: Mapping[str, str] = field(default_factory=dict)
    """What NCCL's configuration files set, before the environment (NCCL_CONF_FILE or ~/.nccl.conf, then
    /etc/nccl.conf; the first file wins)."""
    nccl_conf_read: NcclConf = field(default_factory=NcclConf)
    """Those files as read: each value's file, each line that does not set what it appears to, shadowed values."""

    @property
    def ports(self) -> tuple[RdmaPort, ...]:
        return tuple(p for d in self.rdma_devices for p in d.ports)

    @property
    def roce_ports(self) -> tuple[RdmaPort, ...]:
        return tuple(p for p in self.ports if p.is_roce)

    def device(self, name: str) -> RdmaDevice | None:
        return next((d for d in self.rdma_devices if d.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"root": self.root, "rdma_devices": [d.to_dict() for d in self.rdma_devices],
                "netdevs": {k: v.to_dict() for k, v in self.netdevs.items()},
                "gpus": [g.pci_address for g in self.gpus], "dev_infiniband": self.dev_infiniband,
                "memlock": self.memlock, "default_route": self.default_route,
                "gdr_support": list(self.gdr_support), "in_container": self.in_container}
