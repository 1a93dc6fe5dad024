"""Per-device plans: the spec resolved into exactly what each switch and host must be told.

Renderers never read the spec. This module applies the fabric-wide QoS plan, each device's ``qos`` override
and the per-port headroom once, into frozen records whose fields use the vocabulary of
:mod:`tensorfabric.fabric.deployed`, so a rendered file parsed back can be compared field by field with the
plan it came from (the round-trip tests do exactly that).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from tensorfabric import roce
from tensorfabric.errors import InputError
from tensorfabric.fabric.deployed import EcnProfile, Headroom, Watchdog
from tensorfabric.fabric.headroom import HeadroomResult, headroom_for_port
from tensorfabric.fabric.spec import AsicSpec, FabricSpec, HostSpec, LinkSpec, SwitchSpec
from tensorfabric.fabric.spec.qos import WatchdogPlan

__all__ = ["HostPlan", "NcclEnvFor", "NicPlan", "PortPlan", "SwitchPlan", "host_plans", "switch_plans"]


_T = TypeVar("_T")
NcclEnvFor = Callable[..., Mapping[str, str]]
"""``(host_nics: Sequence[Nic], *, roce_dscp: int) -> Mapping[str, str]``: the host doctor's ``nccl_env_for_nics``.
It is called with ``roce_dscp`` as a keyword so both keyword-only and positional implementations fit, and must be a
function of its arguments alone: hosts with equal NICs share one call."""


@dataclass(frozen=True, slots=True)
class PortPlan:
    name: str
    peer: str
    speed_bps: float
    mtu: int
    cable_length_m: float | None
    """``None`` for a declared port without a cable: it is configured, but headroom cannot be sized."""
    lossless: bool
    headroom: Headroom | None
    ecn: EcnProfile
    xon_offset: int | None = None
    """Broadcom presets and tables: the profile's ``xon_offset``."""
    dynamic_th: int = 0
    """The profile's ``dynamic_th`` (0 unless the vendor preset or table sets one)."""


@dataclass(frozen=True, slots=True)
class SwitchPlan:
    name: str
    nos: str
    trust: Literal["dscp", "pcp"]
    dscp_to_priority: Mapping[int, int]
    roce_dscps: tuple[int, ...]
    roce_priority: int
    cnp_dscp: int
    cnp_priority: int
    lossless: tuple[int, ...]
    strict: tuple[int, ...]
    ets: Mapping[int, int]
    ecn_enabled: bool
    watchdog: Watchdog
    mtu: int
    classifier: Literal["dscp", "acl"]
    acl_name: str
    udp_port: int
    ports: tuple[PortPlan, ...]

    def ecn_profiles(self) -> dict[float, EcnProfile]:
        """One ECN profile per port speed, in first-seen order."""
        out: dict[float, EcnProfile] = {}
        for port in self.ports:
            out.setdefault(port.speed_bps, port.ecn)
        return out


@dataclass(frozen=True, slots=True)
class NicPlan:
    netdev: str
    rdma_device: str
    speed_bps: float
    mtu: int
    cable_length_m: float | None
    trust: Literal["dscp", "pcp"]
    pfc: tuple[int, ...]
    dscp_to_priority: Mapping[int, int]
    """Only the entries that differ from the NIC default ``prio = DSCP >> 3``."""
    dscp_explicit: Mapping[int, int]
    """Every DSCP the plan names (RoCE, CNP, extra entries), for NICs without the ``>> 3`` default."""
    vendor: str
    cnp_dscp: int
    cnp_priority: int
    ecn_priorities: tuple[int, ...]
    storm_prevention_ms: int | None
    roce_tclass: int
    link_pause: bool
    dcbx: Literal["os", "firmware"]


@dataclass(frozen=True, slots=True)
class HostPlan:
    name: str
    nics: tuple[NicPlan, ...]
    nccl_env: Mapping[str, str]


_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.:/-]*$")


def _check_name(value: str, what: str) -> None:
    # Names end up in CLI configs that people paste into shells; refuse anything that could break a line.
    if not _SAFE_NAME.fullmatch(value) or len(value) > 64:
        raise InputError(f"{what}: {value!r} may hold only letters, digits and _ . : / - (at most 64)")


def _watchdog(plan: WatchdogPlan) -> Watchdog:
    return Watchdog(plan.enabled, float(plan.detection_ms), float(plan.restoration_ms), plan.action,
                    float(plan.poll_ms))


def _switch_ports(spec: FabricSpec, sw: SwitchSpec) -> list[str]:
    names = [p.name for p in sw.ports]
    declared = set(names)
    for port in spec.cabled_ports(sw.name):
        if port not in declared:
            declared.add(port)
            names.append(port)
    return names


def _headroom(spec: FabricSpec, asic: AsicSpec, endpoint: str, link: LinkSpec | None, speed: float, mtu: int,
              memo: dict[tuple[Any, ...], HeadroomResult | None]) -> HeadroomResult | None:
    """``headroom_for_port(spec, endpoint)``, computed once per switch ASIC and port inputs: a leaf's ports share one
    speed, cable length and MTU, and the headroom models were most of a large fabric's planning. ``asic`` stands for
    every switch whose ASIC record equals it (tables included), and lives as long as the memo."""
    if link is None:
        return None
    # Exactly what headroom_for_port reads for a switch port (tests/fabric/test_fabric_render_scale.py holds the
    # two equal on every port of the example specs).
    key = (id(asic), speed, spec.configured_cable_m(endpoint), link.cable_length_m, mtu)
    if key not in memo:
        memo[key] = headroom_for_port(spec, endpoint)
    return memo[key]


def switch_plans(spec: FabricSpec) -> list[SwitchPlan]:
    plans: list[SwitchPlan] = []
    qos = spec.qos
    default_dscp = qos.dscp_to_priority()
    rooms: dict[tuple[Any, ...], HeadroomResult | None] = {}
    ecn_by_speed: dict[float, Any] = {}  # qos.ecn_for is a scan of the ECN profiles; a fabric has a few speeds
    ecn_records: dict[tuple[int, bool], EcnProfile] = {}  # one record per (spec profile, on): ports share them
    checked: set[str] = set()  # names already found safe: a host is the peer of one port, a port name recurs
    asics: dict[AsicSpec, AsicSpec] = {}  # the first of each set of equal ASIC records (leaves share one)
    for sw in spec.switches:
        asic = asics.setdefault(sw.asic, sw.asic)
        over = sw.qos
        dscp = default_dscp | dict(over.dscp_map or {})
        ecn_on = over.ecn_enabled if over.ecn_enabled is not None else True
        ports: list[PortPlan] = []
        for name in _switch_ports(spec, sw):
            endpoint = f"{sw.name}:{name}"
            if name not in checked:
                _check_name(name, f"switches[{sw.name}].ports")
                checked.add(name)
            link = spec.link_at(endpoint)
            speed = (spec.link_speed(link) if link else spec.port_speed(endpoint)) or 0.0
            mtu = spec.port_mtu(endpoint)
            room = _headroom(spec, asic, endpoint, link, speed, mtu, rooms)
            port_spec = sw.port(name)
            headroom = None
            xon_offset, dynamic_th = (room.xon_offset_bytes, room.dynamic_th or 0) if room is not None else (None, 0)
            if room is not None:
                xoff = port_spec.headroom_xoff if port_spec and port_spec.headroom_xoff else room.xoff_bytes
                size = room.size_bytes if xoff == room.xoff_bytes else xoff + room.xon_bytes
                headroom = Headroom(xoff, room.xon_bytes, size)
            profile = over.ecn
            if not profile:
                if speed not in ecn_by_speed:
                    ecn_by_speed[speed] = qos.ecn_for(speed)
                profile = ecn_by_speed[speed]
            peer = spec.peer_of(endpoint) or ""
            if peer not in checked:
                _check_name(peer, f"link peer of {endpoint}")
                checked.add(peer)
            ecn = ecn_records.get((id(profile), ecn_on))  # profiles belong to the spec, so their ids are theirs
            if ecn is None:
                ecn = ecn_records[(id(profile), ecn_on)] = EcnProfile(profile.kmin, profile.kmax, float(profile.pmax),
                                                                  ecn_on)
            ports.append(PortPlan(
                name=name, peer=peer, speed_bps=speed, mtu=mtu,
                cable_length_m=spec.configured_cable_m(endpoint), lossless=link.lossless if link else True,
                headroom=headroom, ecn=ecn,
                xon_offset=xon_offset, dynamic_th=dynamic_th,
            ))
        strict = over.strict_priorities if over.strict_priorities is not None else (
            (qos.cnp.priority,) if qos.cnp.strict else ())
        plans.append(SwitchPlan(
            name=sw.name, nos=sw.nos, trust=over.trust or qos.trust, dscp_to_priority=dscp,
            roce_dscps=tuple(qos.roce.dscp), roce_priority=qos.roce.priority, cnp_dscp=qos.cnp.dscp,
            cnp_priority=qos.cnp.priority,
            lossless=tuple(sorted(over.pfc_priorities if over.pfc_priorities is not None else qos.lossless_priorities)),
            strict=tuple(sorted(strict)), ets=dict(qos.ets.weights), ecn_enabled=ecn_on,
            watchdog=_watchdog(over.watchdog or qos.watchdog), mtu=over.mtu or qos.mtu.switch,
            classifier=qos.classifier.kind, acl_name=qos.classifier.acl_name, udp_port=qos.classifier.udp_port,
            ports=tuple(ports),
        ))
    return plans


def _nccl_env(spec: FabricSpec, host: HostSpec, nccl_env_for: NcclEnvFor | None,
              memo: dict[Any, Mapping[str, str]]) -> Mapping[str, str]:
    """The host's NCCL variables; hosts with equal NICs and NCCL settings get the same (shared, read-only) mapping."""
    qos = spec.qos
    plan = spec.nccl_for(host)
    if nccl_env_for is not None:
        nics = spec.topology_nics(host)
        # Hosts with equal NICs (every host of a starter fabric) share one derivation.
        key: tuple[Any, ...] = (nics, qos.roce.dscp[0])
        if key not in memo:
            memo[key] = nccl_env_for(nics, roce_dscp=qos.roce.dscp[0])
    else:
        rdma = tuple(n.rdma_device for n in host.nics if n.rdma_device)
        netdevs = tuple(n.netdev for n in host.nics)
        key = ("plain", rdma, netdevs)
        if key not in memo:
            memo[key] = ({"NCCL_IB_HCA": "=" + ",".join(f"{dev}:1" for dev in rdma)} if rdma else {}) | {
                "NCCL_SOCKET_IFNAME": "=" + ",".join(netdevs)}
    derived = memo[key]
    # The spec is the plan of record for what it pins (the traffic class above all): it must agree with the
    # switches, so it overrides what was derived from the NICs.
    pinned = memo.get(id(plan))
    if pinned is None:
        pinned = memo[id(plan)] = qos.nccl_env(plan)
    merged = ("env", id(derived), id(pinned))  # both live in the memo for the whole call, so their ids stay theirs
    env = memo.get(merged)
    if env is None:
        env = memo[merged] = dict(sorted({**derived, **pinned}.items()))
    return env


class _Interned:
    """One object per distinct value within one ``host_plans`` call: hosts of a large fabric are mostly alike,
    and a renderer given the same NIC records and NCCL mapping for two hosts renders their bodies once (see
    :func:`tensorfabric.fabric.renderers.host.render`). Keys hold the objects they name by ``id`` alive in
    ``self.values``, so an id is never reused within the call."""

    def __init__(self) -> None:
        self.values: dict[Hashable, Any] = {}

    def get(self, key: Hashable, make: Callable[[], _T]) -> _T:
        value: _T | None = self.values.get(key)
        if value is None:
            value = self.values[key] = make()
        return value


def _nic_plan(spec: FabricSpec, host: HostSpec, nic: Any, default_dscp: dict[int, int], tclass: int,
              interned: _Interned) -> NicPlan:
    qos = spec.qos
    over = nic.qos
    endpoint = f"{host.name}:{nic.netdev}"
    extra = tuple(sorted(over.dscp_map.items())) if over.dscp_map else ()
    full = interned.get(("dscp", extra), lambda: dict(sorted((default_dscp | dict(extra)).items())))
    moved = interned.get(("moved", id(full)), lambda: {
        d: p for d, p in full.items() if p != roce.default_priority(d)})
    storm = over.storm_prevention_ms if over.storm_prevention_ms is not None else qos.nic_storm_prevention_ms
    pfc = tuple(sorted(over.pfc_priorities if over.pfc_priorities is not None else qos.lossless_priorities))
    ecn_on = over.ecn_enabled if over.ecn_enabled is not None else True
    fields = dict(
        netdev=nic.netdev, rdma_device=nic.rdma_device, speed_bps=spec.port_speed(endpoint) or 0.0,
        mtu=spec.port_mtu(endpoint), cable_length_m=spec.configured_cable_m(endpoint),
        trust=over.trust or qos.trust, pfc=pfc, dscp_to_priority=moved, dscp_explicit=full, vendor=nic.vendor,
        cnp_dscp=over.cnp_dscp if over.cnp_dscp is not None else qos.cnp.dscp,
        cnp_priority=over.cnp_priority if over.cnp_priority is not None else qos.cnp.priority,
        ecn_priorities=pfc if ecn_on else (), storm_prevention_ms=storm, roce_tclass=tclass,
        link_pause=bool(over.link_pause), dcbx=(over.dcbx or qos.dcbx).owner)
    # By type as well as value: 400 and 400.0 are equal keys but would not render alike.
    key = ("nic", *((id(v) if isinstance(v, dict) else (v.__class__, v)) for v in fields.values()))
    return interned.get(key, lambda: NicPlan(**fields))


def host_plans(spec: FabricSpec, nccl_env_for: NcclEnvFor | None = None) -> list[HostPlan]:
    """One plan per host, in spec order. Equal values are shared: two hosts with equal NICs get the same
    ``nics`` tuple and ``nccl_env`` mapping (records are frozen; the mappings are never changed after this)."""
    qos = spec.qos
    plans: list[HostPlan] = []
    default_dscp = qos.dscp_to_priority()
    envs: dict[Any, Mapping[str, str]] = {}
    interned = _Interned()
    for host in spec.hosts:
        tclass = qos.nccl_tc(spec.nccl_for(host))
        nic_plans = tuple(_nic_plan(spec, host, nic, default_dscp, tclass, interned) for nic in host.nics)
        nics: tuple[NicPlan, ...] = interned.values.setdefault(("nics", *map(id, nic_plans)), nic_plans)
        plans.append(HostPlan(host.name, nics, _nccl_env(spec, host, nccl_env_for, envs)))
    return plans
