"""The linter's view of a fabric: one :class:`~tensorfabric.fabric.deployed.Deployed` record per device.

A spec is turned into the same records the parsers produce from real configs (format ``spec``), so every rule
is written once over one vocabulary and a deployed file simply replaces the spec's record of that device. The
records come from the renderers' per-device plans (:mod:`tensorfabric.fabric.plan`), the one place
the spec is resolved: what lint expects is exactly what render writes (every port, the same PG sizes).
A few host facts have no field in ``Deployed`` (link-level pause, NIC storm prevention, DCBX ownership); they
travel in :class:`HostExtras` and are known only from a spec.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from tensorfabric.fabric.deployed import Deployed, Headroom, PortQos
from tensorfabric.fabric.headroom import (
    HeadroomResult,
    compute_headroom,
    headroom_for_port,
    least_switch_headroom,
)
from tensorfabric.fabric.lint.intent import LosslessClass, RoceIntent, lossless_classes, roce_intent
from tensorfabric.fabric.plan import HostPlan, SwitchPlan, host_plans, switch_plans
from tensorfabric.fabric.spec import FabricSpec, HostSpec
from tensorfabric.fabric.spec.qos import DcbxSetting, QosPlan

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

    def lossless_classes(self, ref: PortRef) -> tuple[LosslessClass, ...] | None:
        """The port's lossless classes as its own config wires them (None when its PFC priorities are unknown)."""
        return lossless_classes(ref)

    def roce_intent(self, ref: PortRef) -> RoceIntent:
        """Where the port's config puts the plan's RoCE DSCP, and the lossless classes to judge RoCE on."""
        return roce_intent(ref, self.plan.roce.dscp)

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


def _switch(plan: SwitchPlan) -> Deployed:
    # The renderers' plan is the one resolution of the spec; the lint view only re-keys it as a Deployed.
    lossless = frozenset(plan.lossless)
    ports: list[PortQos] = []
    for p in plan.ports:
        headroom = dict.fromkeys(lossless, p.headroom) if p.headroom is not None and p.lossless else {}
        # A port the plan keeps lossy (a lossless: false link) is not held to the ECN profile.
        ecn = (dict.fromkeys(lossless, p.ecn) if plan.ecn_enabled else {}) if p.lossless else None
        ports.append(PortQos(
            name=p.name, mtu=p.mtu, speed_bps=p.speed_bps or None, cable_length_m=p.cable_length_m,
            headroom=headroom, ecn=ecn,
            acl_in=plan.acl_name if plan.classifier == "acl" else None,
        ))
    return Deployed(
        device=plan.name, kind="switch", format="spec", source=f"spec switch {plan.name}",
        dscp_to_priority=dict(plan.dscp_to_priority), pfc_priorities=lossless, trust=plan.trust,
        strict_queues=frozenset(plan.strict), queue_weights=dict(plan.ets), watchdog=plan.watchdog,
        ports=tuple(ports),
    )


def _host(spec: FabricSpec, host: HostSpec, plan: HostPlan) -> tuple[Deployed, dict[str, HostExtras]]:
    qos = spec.qos
    ports: list[PortQos] = []
    extras: dict[str, HostExtras] = {}
    for nic, nic_plan in zip(host.nics, plan.nics, strict=True):
        endpoint = f"{host.name}:{nic.netdev}"
        link = spec.link_at(endpoint)
        pfc = frozenset(nic_plan.pfc)
        computed = headroom_for_port(spec, endpoint)
        headroom = {prio: Headroom(computed.xoff_bytes, computed.xon_bytes, computed.size_bytes)
                    for prio in pfc} if computed is not None else None
        ports.append(PortQos(
            name=nic.netdev, pfc_priorities=pfc, trust=nic_plan.trust, mtu=nic_plan.mtu,
            speed_bps=spec.link_speed(link) if link else nic.speed_bps,
            cable_length_m=nic_plan.cable_length_m, headroom=headroom,
            ecn_priorities=frozenset(nic_plan.ecn_priorities), dscp_to_priority=dict(nic_plan.dscp_explicit),
            cnp_dscp=nic_plan.cnp_dscp, cnp_priority=nic_plan.cnp_priority,
        ))
        over = nic.qos
        extras[endpoint] = HostExtras(link_pause=nic_plan.link_pause, storm_prevention_ms=nic_plan.storm_prevention_ms,
                                      dcbx=over.dcbx or qos.dcbx)
    record = Deployed(device=host.name, kind="host", format="spec", source=f"spec host {host.name}",
                      nccl_env=qos.nccl_env(spec.nccl_for(host)), ports=tuple(ports))
    return record, extras


def deployed_from_spec(spec: FabricSpec) -> tuple[dict[str, Deployed], dict[str, HostExtras]]:
    """The records a perfect deployment of ``spec`` would read back as, plus host extras."""
    devices: dict[str, Deployed] = {plan.name: _switch(plan) for plan in switch_plans(spec)}
    extras: dict[str, HostExtras] = {}
    for host, host_plan in zip(spec.hosts, host_plans(spec), strict=True):
        devices[host.name], more = _host(spec, host, host_plan)
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
