"""The linter's view of a fabric: one :class:`~tensorfabric.fabric.deployed.Deployed` record per device.

A spec is turned into the same records the parsers produce from real configs (format ``spec``), so every rule
is written once over one vocabulary and a deployed file simply replaces the spec's record of that device.
A few host facts have no field in ``Deployed`` (link-level pause, NIC storm prevention, DCBX ownership); they
travel in :class:`HostExtras` and are known only from a spec.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from tensorfabric.fabric.deployed import Deployed, EcnProfile, Headroom, PortQos, Watchdog
from tensorfabric.fabric.headroom import HeadroomResult, compute_headroom, headroom_for_port, least_switch_headroom
from tensorfabric.fabric.spec import FabricSpec, HostSpec, SwitchSpec
from tensorfabric.fabric.spec_qos import DcbxSetting, QosPlan, WatchdogPlan

__all__ = ["HostExtras", "LintContext", "PortRef", "build_context", "deployed_from_spec"]


@dataclass(frozen=True, slots=True)
class HostExtras:
    """Per-NIC facts a spec knows but ``Deployed`` does not carry."""

    link_pause: bool = False
    storm_prevention_ms: int | None = None
    dcbx: DcbxSetting | None = None


@dataclass(frozen=True, slots=True)
class PortRef:
    """A resolved port of one device in the view."""

    device: Deployed
    port: PortQos

    @property
    def endpoint(self) -> str:
        if self.port.name == "*":
            return f"{self.device.device} (device default)"
        return f"{self.device.device}:{self.port.name}"

    @property
    def subject(self) -> str:
        if self.port.name == "*":
            return f"{self.device.kind} {self.device.device}"
        return f"{self.device.kind} {self.device.device} port {self.port.name}"


@dataclass(frozen=True)
class LintContext:
    """What the rules see: the plan, device records, the cabling (possibly unknown) and the spec if any."""

    plan: QosPlan
    devices: Mapping[str, Deployed]
    links: tuple[tuple[str, str], ...] = ()
    spec: FabricSpec | None = None
    extras: Mapping[str, HostExtras] = field(default_factory=dict)
    """Keyed by endpoint ``host:netdev``."""

    @cached_property
    def _resolved(self) -> dict[str, dict[str, PortQos]]:
        # Resolving a port copies a record; every rule walks every port, so resolve each once.
        out: dict[str, dict[str, PortQos]] = {}
        for name, dev in self.devices.items():
            # A parsed file with no per-port sections still states device-wide defaults: lint those as port "*".
            ports = dev.resolved_ports() or ((dev.port("*"),) if dev.format != "spec" else ())
            out[name] = {p.name: p for p in ports}
        return out

    def ports(self, kind: str | None = None) -> Iterator[PortRef]:
        for name, dev in self.devices.items():
            if kind is not None and dev.kind != kind:
                continue
            for port in self._resolved[name].values():
                yield PortRef(dev, port)

    def port(self, endpoint: str) -> PortRef | None:
        device, _, name = endpoint.partition(":")
        dev = self.devices.get(device)
        if dev is None:
            return None
        known = self._resolved[device].get(name)
        return PortRef(dev, known if known is not None else dev.port(name))

    def pairs(self) -> Iterator[tuple[PortRef, PortRef, str]]:
        """Both ends of every link; without cabling, every host port against every switch (device defaults)."""
        if self.links:
            for a, b in self.links:
                left, right = self.port(a), self.port(b)
                if left is not None and right is not None:
                    yield left, right, f"link {a}—{b}"
            return
        switches = [d for d in self.devices.values() if d.kind == "switch"]
        for ref in self.ports("host"):
            for sw in switches:
                yield ref, PortRef(sw, sw.port("*")), f"{ref.endpoint} vs switch {sw.device}"
        for i, sw in enumerate(switches):
            for other in switches[i + 1:]:
                yield PortRef(sw, sw.port("*")), PortRef(other, other.port("*")), \
                    f"switch {sw.device} vs switch {other.device}"

    def needed_headroom(self, ref: PortRef) -> HeadroomResult | None:
        """What the port needs for its real cable, speed and MTU."""
        if self.spec is not None and self.spec.link_at(ref.endpoint) is not None:
            return headroom_for_port(self.spec, ref.endpoint, configured=False)
        if ref.port.speed_bps and ref.port.cable_length_m:
            speed, cable = ref.port.speed_bps, ref.port.cable_length_m
            if ref.device.kind == "host":
                return compute_headroom(speed, cable, ref.port.mtu or self.plan.mtu.host, "mlx5-nic")
            # Without a spec the ASIC is unknown: only flag what no Spectrum preset could get away with.
            mtu = ref.port.mtu or self.plan.mtu.switch
            return least_switch_headroom(speed, cable, mtu)
        return None


def _watchdog(plan: WatchdogPlan) -> Watchdog:
    return Watchdog(plan.enabled, float(plan.detection_ms), float(plan.restoration_ms), plan.action,
                    float(plan.poll_ms))


def _switch(spec: FabricSpec, sw: SwitchSpec) -> Deployed:
    plan, over = spec.qos, sw.qos
    table = plan.dscp_to_priority() | dict(over.dscp_map or {})
    pfc = frozenset(over.pfc_priorities if over.pfc_priorities is not None else plan.lossless_priorities)
    strict = frozenset(over.strict_priorities if over.strict_priorities is not None
                       else ((plan.cnp.priority,) if plan.cnp.strict else ()))
    ecn_on = over.ecn_enabled if over.ecn_enabled is not None else True
    ports: list[PortQos] = []
    for p in sw.ports:
        endpoint = f"{sw.name}:{p.name}"
        link = spec.link_at(endpoint)
        if link is None:
            continue
        speed = spec.link_speed(link)
        profile = over.ecn or plan.ecn_for(speed)
        ecn = {prio: EcnProfile(profile.kmin, profile.kmax, float(profile.pmax)) for prio in pfc} if ecn_on else {}
        computed = headroom_for_port(spec, endpoint)
        headroom: dict[int, Headroom] = {}
        if computed is not None:
            xoff = p.headroom_xoff if p.headroom_xoff is not None else computed.xoff_bytes
            headroom = {prio: Headroom(xoff, computed.xon_bytes, xoff + computed.xon_bytes) for prio in pfc}
        ports.append(PortQos(name=p.name, mtu=spec.port_mtu(endpoint), speed_bps=speed,
                             cable_length_m=spec.configured_cable_m(endpoint), headroom=headroom, ecn=ecn,
                             acl_in=plan.classifier.acl_name if plan.classifier.kind == "acl" else None))
    return Deployed(
        device=sw.name, kind="switch", format="spec", source=f"spec switch {sw.name}",
        dscp_to_priority=table, pfc_priorities=pfc, trust=over.trust or plan.trust,
        strict_queues=strict, queue_weights=dict(plan.ets.weights),
        watchdog=_watchdog(over.watchdog or plan.watchdog), ports=tuple(ports),
    )


def _host(spec: FabricSpec, host: HostSpec) -> tuple[Deployed, dict[str, HostExtras]]:
    plan = spec.qos
    ports: list[PortQos] = []
    extras: dict[str, HostExtras] = {}
    for nic in host.nics:
        over = nic.qos
        endpoint = f"{host.name}:{nic.netdev}"
        link = spec.link_at(endpoint)
        pfc = frozenset(over.pfc_priorities if over.pfc_priorities is not None else plan.lossless_priorities)
        computed = headroom_for_port(spec, endpoint)
        headroom = {prio: Headroom(computed.xoff_bytes, computed.xon_bytes, computed.size_bytes)
                    for prio in pfc} if computed is not None else None
        ecn_on = over.ecn_enabled if over.ecn_enabled is not None else True
        ports.append(PortQos(
            name=nic.netdev, pfc_priorities=pfc, trust=over.trust or plan.trust, mtu=spec.port_mtu(endpoint),
            speed_bps=spec.link_speed(link) if link else nic.speed_bps,
            cable_length_m=spec.configured_cable_m(endpoint), headroom=headroom,
            ecn_priorities=frozenset(plan.roce.priority for _ in [0] if ecn_on),
            dscp_to_priority=plan.dscp_to_priority() | dict(over.dscp_map or {}),
            cnp_dscp=over.cnp_dscp if over.cnp_dscp is not None else plan.cnp.dscp,
            cnp_priority=over.cnp_priority if over.cnp_priority is not None else plan.cnp.priority,
        ))
        storm = over.storm_prevention_ms if over.storm_prevention_ms is not None else plan.nic_storm_prevention_ms
        extras[endpoint] = HostExtras(link_pause=bool(over.link_pause), storm_prevention_ms=storm,
                                      dcbx=over.dcbx or plan.dcbx)
    nccl = spec.nccl_for(host)
    env = plan.nccl_env(nccl)
    record = Deployed(device=host.name, kind="host", format="spec", source=f"spec host {host.name}",
                      nccl_env=env, ports=tuple(ports))
    return record, extras


def deployed_from_spec(spec: FabricSpec) -> tuple[dict[str, Deployed], dict[str, HostExtras]]:
    """The records a perfect deployment of ``spec`` would read back as, plus host extras."""
    devices: dict[str, Deployed] = {sw.name: _switch(spec, sw) for sw in spec.switches}
    extras: dict[str, HostExtras] = {}
    for host in spec.hosts:
        devices[host.name], more = _host(spec, host)
        extras.update(more)
    return devices, extras


def build_context(spec: FabricSpec | None, deployed: Sequence[Deployed] = ()) -> LintContext:
    """Spec-derived records with every deployed record laid over the device of the same name."""
    if spec is None:
        devices: dict[str, Deployed] = {}
        extras: dict[str, HostExtras] = {}
        plan = QosPlan()
        links: tuple[tuple[str, str], ...] = ()
    else:
        devices, extras = deployed_from_spec(spec)
        plan = spec.qos
        links = tuple((lk.a, lk.b) for lk in spec.links if lk.lossless)
    for record in deployed:
        if record.device in devices and devices[record.device].kind == "host" and record.kind == "host":
            devices[record.device] = _merge_host(devices[record.device], record)
        else:
            devices[record.device] = record
    return LintContext(plan=plan, devices=devices, links=links, spec=spec, extras=extras)


def _merge_host(base: Deployed, record: Deployed) -> Deployed:
    # Host facts arrive in pieces (mlnx_qos per NIC, an NCCL env file): keep what the new piece does not say.
    ports = {p.name: p for p in base.ports}
    for port in record.resolved_ports():
        ports[port.name] = port
    env = dict(base.nccl_env) | dict(record.nccl_env)
    return Deployed(device=record.device, kind="host", format=record.format, source=record.source,
                    nccl_env=env, ports=tuple(ports.values()))
