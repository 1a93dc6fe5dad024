"""Frozen records of what is really configured on one device, as read back from its configuration.

Every parser in :mod:`tensorfabric.fabric.parsers` turns a vendor format into a :class:`Deployed`; the
linter compares these records with the spec and with each other, so it never needs to know a vendor
dialect. The vocabulary is vendor-neutral:

* *priority* is the internal class a packet is assigned on ingress: SONiC's TC, Cumulus' switch-priority,
  EOS' traffic-class, NX-OS' qos-group, the NIC's ``prio``. PFC is enabled per priority.
* *queue* is the egress queue a priority is served from; ECN thresholds and strict scheduling are per queue.

A value of ``None`` means "not configured in what was parsed", which the linter treats differently from an
explicit value (a missing watchdog is not the same as a disabled one when the file is only a fragment).

Device-level fields hold the default every port inherits; :class:`PortQos` fields override them for one
port. :meth:`Deployed.port` resolves that inheritance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tensorfabric.intake import ReadReport

__all__ = [
    "ConfigDefect",
    "Detection",
    "DeviceKind",
    "Deployed",
    "EcnProfile",
    "Headroom",
    "PortQos",
    "Trust",
    "Watchdog",
]

Trust = Literal["dscp", "pcp", "pcp,dscp"]
"""How ingress packets are classified; ``pcp,dscp`` classifies IP packets by DSCP and the rest by 802.1p."""

DeviceKind = Literal["switch", "host"]


@dataclass(frozen=True, slots=True)
class EcnProfile:
    """ECN/WRED marking on one egress queue: mark from ``kmin_bytes`` up to ``pmax_percent`` at ``kmax_bytes``."""

    kmin_bytes: int
    kmax_bytes: int
    pmax_percent: float
    ecn: bool = True
    """True when packets are marked (ECN); False when the profile only drops (WRED)."""
    unit: Literal["bytes", "segments", "kbytes", "percent"] = "bytes"
    """What the thresholds count. ``segments`` (EOS), ``kbytes`` (Dell SONiC CLI, 1000 or 1024 by release) and
    ``percent`` (Junos fill level)
    depend on the platform, so they are kept as written and never compared with byte counts."""


@dataclass(frozen=True, slots=True)
class Headroom:
    """The PFC buffer of one lossless priority group: XOFF point, XON point and reserved size, in bytes."""

    xoff_bytes: int
    xon_bytes: int
    size_bytes: int
    hysteresis_bytes: int | None = None
    """How far the fill must fall below the pause point before PFC resumes (NX-OS pause minus resume
    threshold, Cumulus ``xon_delta``); 0 means pause and resume at the same fill: the port flaps."""


@dataclass(frozen=True, slots=True)
class Watchdog:
    """The PFC storm watchdog; times in milliseconds, ``None`` where the config leaves the default."""

    enabled: bool
    detection_ms: float | None = None
    restoration_ms: float | None = None
    action: str | None = None
    polling_ms: float | None = None


@dataclass(frozen=True, slots=True)
class PortQos:
    """One port (switch interface or host netdev). ``None`` fields inherit the device default."""

    name: str
    pfc_priorities: frozenset[int] | None = None
    trust: Trust | None = None
    mtu: int | None = None
    speed_bps: float | None = None
    cable_length_m: float | None = None
    headroom: Mapping[int, Headroom] | None = None
    """Per lossless priority group."""
    ecn: Mapping[int, EcnProfile] | None = None
    """Per egress queue."""
    ecn_priorities: frozenset[int] | None = None
    """Host NICs: priorities with DCQCN notification and reaction points enabled (``roce_np``/``roce_rp``)."""
    strict_queues: frozenset[int] | None = None
    watchdog: Watchdog | None = None
    dscp_to_priority: Mapping[int, int] | None = None
    cnp_dscp: int | None = None
    cnp_priority: int | None = None
    acl_in: str | None = None
    link_pause: bool | None = None
    """Link-level (802.3x) pause on; it excludes PFC on the same port."""
    storm_prevention_ms: float | None = None
    """Host NICs: PFC storm prevention timeout (mlx5 ``pfc-prevention-tout``); 0 = off."""
    dcbx: Literal["os", "firmware"] | None = None
    """Host NICs: who owns DCBX."""
    routed: bool | None = None
    """The port forwards at layer 3 (an IP address, ``no switchport``): 802.1p tags do not survive a hop."""
    queue_weights: Mapping[int, int] | None = None
    """DWRR/ETS share per queue on this port."""
    lossy_pgs: frozenset[int] | None = None
    """Ingress priority groups bound to a lossy buffer profile or pool."""
    lossy_queues: frozenset[int] | None = None
    """Egress queues bound to a lossy buffer profile or pool."""


@dataclass(frozen=True, slots=True)
class ConfigDefect:
    """Something the configuration itself says that cannot take effect, found while reading it.

    ``fabric lint`` reports each as a finding (rule ``config.undefined-reference``): the device silently ignores
    such lines, so the operator's intent and the device's behaviour differ.
    """

    line: int | None
    message: str
    fix: str


@dataclass(frozen=True, slots=True)
class Detection:
    """How the dialect was chosen: the markers each dialect's reader recognised in the text."""

    format: str
    name: str
    how: Literal["content", "extension", "--format"]
    score: int
    markers: tuple[str, ...]
    runner_up: str | None = None
    runner_up_name: str | None = None
    runner_up_score: int = 0

    def summary(self) -> str:
        """``detected as NX-OS: 14 markers (policy-map type network-qos, ...); next EOS with 3``."""
        if self.how == "--format":
            head = f"read as {self.name} (--format {self.format})"
        elif self.how == "extension":
            head = f"read as {self.name} (file extension)"
        else:
            head = f"detected as {self.name}"
        shown = ", ".join(self.markers[:4]) + (", ..." if len(self.markers) > 4 else "")
        text = f"{head}: {self.score} marker{'s' if self.score != 1 else ''}" + (f" ({shown})" if shown else "")
        if self.runner_up is not None:
            text += f"; next {self.runner_up_name} with {self.runner_up_score}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.format, "name": self.name, "how": self.how, "score": self.score,
                "markers": list(self.markers), "runner_up": self.runner_up, "runner_up_score": self.runner_up_score,
                "summary": self.summary()}


@dataclass(frozen=True, slots=True)
class Deployed:
    """Everything one configuration file says about one device's lossless set-up.

    ``source`` is the path (or stream name) it came from and ``format`` the parser that read it
    (``sonic``, ``nvue``, ``eos``, ``nxos``, ``mlnx_qos``, ``nccl-env``, ``host-script``).
    """

    device: str
    kind: DeviceKind
    format: str
    source: str = "<input>"
    dscp_to_priority: Mapping[int, int] = field(default_factory=dict)
    priority_to_queue: Mapping[int, int] = field(default_factory=dict)
    priority_to_pg: Mapping[int, int] = field(default_factory=dict)
    pfc_priorities: frozenset[int] | None = None
    trust: Trust | None = None
    mtu: int | None = None
    ecn: Mapping[int, EcnProfile] | None = None
    """Device default ECN per egress queue; ``None`` when the file does not say (a fragment), ``{}`` when it
    configures queues without marking."""
    strict_queues: frozenset[int] | None = None
    queue_weights: Mapping[int, int] = field(default_factory=dict)
    """DWRR/ETS share per queue (percent or weight, as configured)."""
    watchdog: Watchdog | None = None
    headroom: Mapping[int, Headroom] = field(default_factory=dict)
    cable_length_m: float | None = None
    cnp_dscp: int | None = None
    cnp_priority: int | None = None
    nccl_env: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[PortQos, ...] = ()
    dscp_conflicts: Mapping[int, frozenset[int]] = field(default_factory=dict)
    """DSCPs the config puts in more than one class, with every priority it names for them."""
    priority_to_dscp: Mapping[int, int] = field(default_factory=dict)
    """Egress rewrite (EOS ``qos map traffic-class N to dscp M``): marks leaving packets, classifies nothing."""
    default_dscp_map: bool = False
    """``dscp_to_priority`` is the platform's built-in table because the config names none."""
    complete: bool = False
    """The file is a whole device configuration, so a feature it does not mention is off, not unknown."""
    notes: tuple[str, ...] = ()
    """What the parser read but cannot check (platform-dependent units, statements it models as unknown)."""
    defects: tuple[ConfigDefect, ...] = ()
    """Statements the device ignores as written (a list naming a group whose keys carry another name)."""
    read: ReadReport | None = None
    """What the reader made of the text: lines used, not understood, warnings (None for records built from a spec)."""
    detection: Detection | None = None
    """How the dialect was chosen (None for records built from a spec)."""

    def port(self, name: str) -> PortQos:
        """The port ``name`` with every unset field filled from the device default.

        A port the file never mentions resolves to the device defaults, so callers can ask about any
        port named in the spec.
        """
        for candidate in self.ports:
            if candidate.name == name:
                return self._resolve(candidate)
        return self._resolve(PortQos(name=name))

    def has_facts(self) -> bool:
        """Whether the record says anything a rule can check (an empty record means nothing was understood)."""
        device_level = (self.dscp_to_priority, self.priority_to_queue, self.pfc_priorities is not None, self.trust,
                        self.mtu, self.ecn, self.strict_queues is not None, self.queue_weights, self.watchdog,
                        self.headroom, self.nccl_env, self.cnp_dscp is not None, self.defects)
        if any(device_level):
            return True
        return any(getattr(p, f) is not None for p in self.ports for f in PortQos.__slots__ if f != "name")

    def resolved_ports(self) -> tuple[PortQos, ...]:
        return tuple(self._resolve(p) for p in self.ports)

    def _resolve(self, port: PortQos) -> PortQos:
        return replace(
            port,
            pfc_priorities=port.pfc_priorities if port.pfc_priorities is not None else self.pfc_priorities,
            trust=port.trust if port.trust is not None else self.trust,
            mtu=port.mtu if port.mtu is not None else self.mtu,
            cable_length_m=port.cable_length_m if port.cable_length_m is not None else self.cable_length_m,
            headroom=port.headroom if port.headroom is not None else self.headroom,
            ecn=port.ecn if port.ecn is not None else self.ecn,
            strict_queues=port.strict_queues if port.strict_queues is not None else self.strict_queues,
            watchdog=port.watchdog if port.watchdog is not None else self.watchdog,
            dscp_to_priority=port.dscp_to_priority if port.dscp_to_priority is not None else self.dscp_to_priority,
            cnp_dscp=port.cnp_dscp if port.cnp_dscp is not None else self.cnp_dscp,
            cnp_priority=port.cnp_priority if port.cnp_priority is not None else self.cnp_priority,
            queue_weights=port.queue_weights if port.queue_weights is not None else (self.queue_weights or None),
        )

    def priority_of(self, dscp: int, port: str | None = None) -> int | None:
        """The priority a packet marked ``dscp`` gets, or ``None`` if the map does not cover it."""
        table = self.port(port).dscp_to_priority if port is not None else self.dscp_to_priority
        return None if table is None else table.get(dscp)

    def queue_of(self, priority: int) -> int:
        """The egress queue of ``priority``; without an explicit map queues equal priorities."""
        return self.priority_to_queue.get(priority, priority)
