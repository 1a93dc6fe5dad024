"""The fabric spec's records: switches, hosts with NICs, links and one QoS plan for the whole lossless fabric.

A spec is YAML validated into frozen pydantic models. Speeds, lengths and sizes accept units (``400G``, ``5m``,
``150KB``); values are kept in base units (``speed_bps``, ``cable_length_m``, bytes). Devices may carry a ``qos``
override block: the plan says what the fabric should be, an override records what one device really does
differently (the linter then reports it). Loading lives in :mod:`.load`, which imports these records (never the
other way round): its ``load_spec`` turns YAML and validation errors into :class:`~tensorfabric.errors.ParseError`
naming the field path, e.g. ``links[3].cable_length``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from tensorfabric import topology
from tensorfabric.fabric.spec.asic import AsicSpec
from tensorfabric.fabric.spec.qos import NcclPlan, NicQos, QosPlan, SwitchQos
from tensorfabric.fabric.spec.types import Length, Mtu, Size, SpecModel, Speed, Text, check_text

__all__ = ["NOS_NAMES", "FabricSpec", "HostSpec", "LinkSpec", "NicSpec", "SwitchPortSpec", "SwitchSpec"]

NosName = Literal["sonic", "cumulus", "eos", "nxos"]
NOS_NAMES: tuple[str, ...] = ("sonic", "cumulus", "eos", "nxos")
_ROLE_TIER = {"leaf": 0, "tor": 0, "switch": 0, "spine": 1, "core": 2}
_RANGE = re.compile(r"^(?P<head>.*)\[(?P<lo>\d+)-(?P<hi>\d+)(?::(?P<step>\d+))?\](?P<tail>.*)$")


class SwitchPortSpec(SpecModel):
    name: Text = Field(min_length=1)
    speed_bps: Speed | None = Field(default=None, alias="speed")
    mtu: Mtu | None = None
    cable_length_m: Length | None = Field(default=None, alias="cable_length")
    """Cable length configured on the port for headroom; defaults to the link's real length."""
    headroom_xoff: Size | None = None
    """A statically configured XOFF headroom (traditional buffer mode, NX-OS pause buffer-size)."""


def _expand_ports(items: Any) -> Any:
    if not isinstance(items, list):
        return items
    out: list[Any] = []
    for item in items:
        entry = {"name": item} if isinstance(item, str) else item
        name = entry.get("name") if isinstance(entry, dict) else None
        match = _RANGE.match(name) if isinstance(name, str) else None
        if match is None:
            out.append(entry)
            continue
        lo, hi, step = int(match["lo"]), int(match["hi"]), int(match["step"] or 1)
        if hi < lo or hi - lo > 4096 or step < 1:
            out.append(entry)  # left unexpanded; the name then fails as an unknown port where used
            continue
        out.extend({**entry, "name": f"{match['head']}{i}{match['tail']}"} for i in range(lo, hi + 1, step))
    return out


class SwitchSpec(SpecModel):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    nos: NosName
    role: topology.SwitchRole = "leaf"
    tier: int | None = Field(default=None, ge=0, le=8)
    asic: AsicSpec = AsicSpec()
    speed_bps: Speed | None = Field(default=None, alias="speed")
    ports: tuple[SwitchPortSpec, ...] = ()
    qos: SwitchQos = SwitchQos()

    _expand = field_validator("ports", mode="before")(classmethod(lambda cls, v: _expand_ports(v)))

    @property
    def effective_tier(self) -> int:
        return self.tier if self.tier is not None else _ROLE_TIER[self.role]

    @cached_property
    def _port_index(self) -> dict[str, SwitchPortSpec]:
        return {p.name: p for p in self.ports}

    def port(self, name: str) -> SwitchPortSpec | None:
        return self._port_index.get(name)


class NicSpec(SpecModel):
    netdev: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.:-]+$")
    rdma_device: str = Field(default="", pattern=r"^[A-Za-z0-9_.-]*$")
    vendor: Text = "nvidia"
    model: Text = ""
    speed_bps: Speed | None = Field(default=None, alias="speed")
    mtu: Mtu | None = None
    cable_length_m: Length | None = Field(default=None, alias="cable_length")
    qos: NicQos = NicQos()


class HostSpec(SpecModel):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    gpus: int = Field(default=0, ge=0)
    nics: tuple[NicSpec, ...] = Field(min_length=1)
    nccl: NcclPlan | None = None
    """Per-host NCCL settings when they differ from the plan's."""

    @cached_property
    def _nic_index(self) -> dict[str, NicSpec]:
        return {n.netdev: n for n in self.nics}

    def nic(self, netdev: str) -> NicSpec | None:
        return self._nic_index.get(netdev)


class LinkSpec(SpecModel):
    a: str
    b: str
    speed_bps: Speed | None = Field(default=None, alias="speed")
    cable_length_m: Length = Field(default=3.0, alias="cable_length")
    medium: Literal["copper", "fiber"] = "copper"
    lossless: bool = True

    @field_validator("a", "b")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        check_text(value)
        device, sep, port = value.partition(":")
        if not sep or not device or not port:
            raise ValueError("must be 'device:port', e.g. 'leaf1:Ethernet0' or 'h1:eth2'")
        return value

    @property
    def ends(self) -> tuple[topology.Endpoint, topology.Endpoint]:
        return topology.Endpoint.parse(self.a), topology.Endpoint.parse(self.b)


def _first_repeated(names: list[str]) -> str | None:
    met: set[str] = set()
    for name in names:
        if name in met:
            return name
        met.add(name)
    return None


class FabricSpec(SpecModel):
    """A whole fabric; construction checks names are unique and links name known ports."""

    name: Text = "fabric"
    qos: QosPlan = QosPlan()
    switches: tuple[SwitchSpec, ...] = ()
    hosts: tuple[HostSpec, ...] = ()
    links: tuple[LinkSpec, ...] = ()

    @model_validator(mode="after")
    def _references(self) -> FabricSpec:
        seen: dict[str, str] = {}
        ports_of: dict[str, set[str]] = {}  # each device's port (or NIC) names, built once: links name them often
        groups: tuple[tuple[str, tuple[SwitchSpec | HostSpec, ...]], ...] = (
            ("switches", self.switches), ("hosts", self.hosts))
        for kind, devices in groups:
            for i, dev in enumerate(devices):
                if dev.name in seen:
                    raise ValueError(f"{kind}[{i}].name: {dev.name!r} is used twice (first at {seen[dev.name]}); "
                                     "device names must be unique")
                seen[dev.name] = f"{kind}[{i}]"
                names = [p.name for p in dev.ports] if isinstance(dev, SwitchSpec) else [n.netdev for n in dev.nics]
                known = ports_of[dev.name] = set(names)
                dup = _first_repeated(names) if len(known) < len(names) else None
                if dup is not None:
                    what = "ports" if isinstance(dev, SwitchSpec) else "nics"
                    raise ValueError(f"{kind}[{i}].{what}: {dup!r} is listed twice on {dev.name!r}")
        used: dict[str, int] = {}
        for i, link in enumerate(self.links):
            for side in ("a", "b"):
                text = getattr(link, side)
                device, _, port = text.partition(":")
                if device not in seen:
                    raise ValueError(f"links[{i}].{side}: {text!r} names unknown device {device!r}; "
                                     f"known: {', '.join(sorted(seen)) or 'none'}")
                if port not in ports_of[device]:
                    raise ValueError(f"links[{i}].{side}: {text!r} names unknown port {port!r} on {device!r}; "
                                     f"declare it under {seen[device]}")
                if text in used:
                    raise ValueError(f"links[{i}].{side}: {text!r} is already cabled by links[{used[text]}]")
                used[text] = i
            if link.a.partition(":")[0] == link.b.partition(":")[0]:
                raise ValueError(f"links[{i}]: {link.a!r} and {link.b!r} are on the same device")
            if self.link_speed(link) is None:
                raise ValueError(f"links[{i}].speed: no speed given on the link or its ports; add e.g. speed: 400G")
        return self

    # -- lookups -----------------------------------------------------------------------------------------------
    # Indexes are built once per (frozen) spec: lint and render ask for thousands of ports on large fabrics.
    @cached_property
    def _switch_index(self) -> dict[str, SwitchSpec]:
        return {s.name: s for s in self.switches}

    @cached_property
    def _host_index(self) -> dict[str, HostSpec]:
        return {h.name: h for h in self.hosts}

    @cached_property
    def _link_index(self) -> dict[str, LinkSpec]:
        index: dict[str, LinkSpec] = {}
        for link in self.links:
            index.setdefault(link.a, link)
            index.setdefault(link.b, link)
        return index

    @cached_property
    def _cabled_ports(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for link in self.links:
            for end in (link.a, link.b):
                device, _, port = end.partition(":")
                out.setdefault(device, []).append(port)
        return out

    def cabled_ports(self, device: str) -> list[str]:
        """Port names of ``device`` that links use, in link order."""
        return list(self._cabled_ports.get(device, ()))

    def switch(self, name: str) -> SwitchSpec | None:
        return self._switch_index.get(name)

    def host(self, name: str) -> HostSpec | None:
        return self._host_index.get(name)

    def is_switch(self, device: str) -> bool:
        return self.switch(device) is not None

    def link_at(self, endpoint: str) -> LinkSpec | None:
        return self._link_index.get(endpoint)

    def peer_of(self, endpoint: str) -> str | None:
        link = self.link_at(endpoint)
        if link is None:
            return None
        return link.b if link.a == endpoint else link.a

    @cached_property
    def _speeds(self) -> dict[str, float | None]:
        return {}  # filled by port_speed: plans, topology and headroom ask for each endpoint several times

    def port_speed(self, endpoint: str) -> float | None:
        speeds = self._speeds
        if endpoint in speeds:
            return speeds[endpoint]
        speed = speeds[endpoint] = self._port_speed(endpoint)
        return speed

    def _port_speed(self, endpoint: str) -> float | None:
        device, _, port = endpoint.partition(":")
        sw = self.switch(device)
        if sw is not None:
            spec = sw.port(port)
            return (spec.speed_bps if spec else None) or sw.speed_bps
        host = self.host(device)
        nic = host.nic(port) if host else None
        return nic.speed_bps if nic else None

    def link_speed(self, link: LinkSpec) -> float | None:
        if link.speed_bps:
            return link.speed_bps
        speeds = [s for s in (self.port_speed(link.a), self.port_speed(link.b)) if s]
        return min(speeds) if speeds else None

    def port_mtu(self, endpoint: str) -> int:
        device, _, port = endpoint.partition(":")
        sw = self.switch(device)
        if sw is not None:
            spec = sw.port(port)
            return (spec.mtu if spec and spec.mtu else None) or sw.qos.mtu or self.qos.mtu.switch
        host = self.host(device)
        nic = host.nic(port) if host else None
        return (nic.mtu if nic and nic.mtu else None) or (nic.qos.mtu if nic else None) or self.qos.mtu.host

    def configured_cable_m(self, endpoint: str) -> float | None:
        """The cable length the device was told (for headroom); falls back to the link's real length."""
        device, _, port = endpoint.partition(":")
        sw = self.switch(device)
        host = self.host(device)
        spec: SwitchPortSpec | NicSpec | None = sw.port(port) if sw is not None else (
            host.nic(port) if host is not None else None)
        configured = spec.cable_length_m if spec is not None else None
        link = self.link_at(endpoint)
        return configured if configured is not None else (link.cable_length_m if link else None)

    def nics(self) -> Iterator[tuple[HostSpec, NicSpec]]:
        for host in self.hosts:
            for nic in host.nics:
                yield host, nic

    def nccl_for(self, host: HostSpec) -> NcclPlan:
        return host.nccl or self.qos.nccl

    # -- conversions -------------------------------------------------------------------------------------------
    def to_topology(self) -> topology.Fabric:
        """The fabric as :mod:`tensorfabric.topology` sees it; built once per (frozen) spec."""
        return self._topology

    def topology_nics(self, host: HostSpec) -> tuple[topology.Nic, ...]:
        """``host``'s NICs as :mod:`tensorfabric.topology` sees them (what ``to_topology()`` gives the host), without
        building the whole fabric: a render asks for them host by host."""
        nics = []
        for n in host.nics:
            endpoint = f"{host.name}:{n.netdev}"
            speed = self.port_speed(endpoint) or self._cabled_speed(host.name, n.netdev)
            nics.append(topology.Nic(n.netdev, speed, n.rdma_device, n.vendor, n.model, self.port_mtu(endpoint)))
        return tuple(nics)

    @cached_property
    def _topology(self) -> topology.Fabric:
        hosts = tuple(topology.Host(h.name, self.topology_nics(h), h.gpus) for h in self.hosts)
        switches = tuple(
            topology.Switch(s.name, s.role, s.nos, tuple(
                topology.Port(p.name, self.port_speed(f"{s.name}:{p.name}") or self._cabled_speed(s.name, p.name),
                              self.port_mtu(f"{s.name}:{p.name}"))
                for p in s.ports), s.effective_tier)
            for s in self.switches)
        links = tuple(
            topology.Link(*lk.ends, self.link_speed(lk) or 0.0, lk.cable_length_m, lk.medium) for lk in self.links)
        return topology.Fabric(hosts=hosts, switches=switches, links=links, name=self.name)

    def _cabled_speed(self, device: str, port: str) -> float:
        link = self.link_at(f"{device}:{port}")
        return (self.link_speed(link) or 0.0) if link else 0.0

