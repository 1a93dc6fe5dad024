"""Frozen records of a fabric: hosts, NICs, switches, ports and links.

Shared by the fabric planner (which builds them from a validated spec), the simulator (which runs them),
telemetry (which labels counters with their names) and the lab (which realises small ones in network
namespaces). Speeds are bits per second, lengths metres, sizes bytes.

Endpoints are written ``device:port`` (``leaf1:Ethernet0``, ``h1:eth2``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from tensorfabric.errors import InputError

__all__ = ["Endpoint", "Fabric", "Host", "Link", "Nic", "Port", "Switch", "SwitchRole"]

SwitchRole = Literal["leaf", "spine", "core", "tor", "switch"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One end of a link: a device name and a port (interface) name on it."""

    device: str
    port: str

    @classmethod
    def parse(cls, text: str, *, what: str = "endpoint") -> Endpoint:
        device, sep, port = text.partition(":")
        if not sep or not device or not port:
            raise InputError(f"{what}: {text!r} must be 'device:port', e.g. 'leaf1:Ethernet0' or 'h1:eth2'")
        return cls(device, port)

    def __str__(self) -> str:
        return f"{self.device}:{self.port}"


@dataclass(frozen=True, slots=True)
class Port:
    """A switch port."""

    name: str
    speed_bps: float
    mtu: int = 9100


@dataclass(frozen=True, slots=True)
class Nic:
    """An RDMA-capable NIC on a host, named by its netdev (``eth2``) and RDMA device (``mlx5_0``)."""

    netdev: str
    speed_bps: float
    rdma_device: str = ""
    vendor: str = "nvidia"
    model: str = ""
    mtu: int = 9000


@dataclass(frozen=True, slots=True)
class Host:
    name: str
    nics: tuple[Nic, ...] = ()
    gpus: int = 0

    def nic(self, netdev: str) -> Nic:
        for nic in self.nics:
            if nic.netdev == netdev:
                return nic
        raise InputError(f"host {self.name!r} has no NIC {netdev!r}; it has {[n.netdev for n in self.nics]}")


@dataclass(frozen=True, slots=True)
class Switch:
    name: str
    role: SwitchRole = "switch"
    nos: str = "sonic"
    ports: tuple[Port, ...] = ()
    tier: int = 0
    """0 for leaves/ToRs, 1 for spines, 2 for cores: the order that defines up-down routing."""


@dataclass(frozen=True, slots=True)
class Link:
    """A full-duplex cable between two endpoints."""

    a: Endpoint
    b: Endpoint
    speed_bps: float
    cable_length_m: float = 3.0
    medium: Literal["copper", "fiber"] = "copper"

    def other(self, device: str) -> Endpoint:
        if self.a.device == device:
            return self.b
        if self.b.device == device:
            return self.a
        raise InputError(f"device {device!r} is not on link {self.a}—{self.b}")

    def __str__(self) -> str:
        return f"{self.a}—{self.b}"


@dataclass(frozen=True, slots=True)
class Fabric:
    """A whole fabric. Construction checks names are unique and links reference known devices."""

    hosts: tuple[Host, ...] = ()
    switches: tuple[Switch, ...] = ()
    links: tuple[Link, ...] = ()
    name: str = "fabric"
    _index: dict[str, Host | Switch] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, Host | Switch] = {}
        devices: list[Host | Switch] = [*self.hosts, *self.switches]
        for device in devices:
            if device.name in index:
                raise InputError(f"device name {device.name!r} is used twice; names must be unique")
            index[device.name] = device
        for i, link in enumerate(self.links):
            for end in (link.a, link.b):
                if end.device not in index:
                    raise InputError(f"links[{i}]: endpoint {str(end)!r} names unknown device {end.device!r}")
        object.__setattr__(self, "_index", index)

    def device(self, name: str) -> Host | Switch:
        try:
            return self._index[name]
        except KeyError:
            raise InputError(f"unknown device {name!r}") from None

    def is_switch(self, name: str) -> bool:
        return isinstance(self.device(name), Switch)

    def links_of(self, device: str) -> Iterator[Link]:
        return (link for link in self.links if device in (link.a.device, link.b.device))

    def neighbours(self, device: str) -> list[str]:
        return [link.other(device).device for link in self.links_of(device)]

    @property
    def device_names(self) -> Iterable[str]:
        return self._index.keys()
