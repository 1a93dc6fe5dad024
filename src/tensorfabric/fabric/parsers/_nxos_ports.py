"""NX-OS interfaces: the lines of an ``interface`` block and the policy-maps its service-policy lines name
(:class:`Policies`: undefined in a whole config is a defect, in an excerpt unknown)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tensorfabric.fabric.deployed import ConfigDefect, EcnProfile, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._common import Block, Where, parse_int
from tensorfabric.fabric.parsers._read import Reading

__all__ = ["Policies", "QosPolicy", "Queuing", "interface_ports"]


@dataclass
class Queuing:
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)
    ecn: dict[int, EcnProfile] = field(default_factory=dict)
    complete: bool = True
    """Every class it names resolves to a queue; otherwise which queue lacks ECN or priority is unknown."""


@dataclass
class QosPolicy:
    dscp: dict[int, int]
    uses_dscp: bool
    uses_cos: bool
    complete: bool
    """Every class it names is defined in the text: otherwise a class's DSCPs are unknown, not unclassified."""


class Policies:
    """The policy-maps a service-policy line names, resolved against the ones the text defines; ``whole``: the text
    is a whole config (hostname and interfaces), so a policy-map it lacks is a defect, not a part left out."""

    def __init__(self, r: Reading, qos_policies: Mapping[str, QosPolicy], queuing: Mapping[str, Queuing], *,
                 whole: bool) -> None:
        self.r, self.qos_policies, self.queuing_policies, self.whole = r, qos_policies, queuing, whole
        self.defects: dict[str, ConfigDefect] = {}

    def undefined(self, kind: str, name: str, number: int, effect: str) -> None:
        if self.whole:
            self.defects.setdefault(f"{kind} {name}", ConfigDefect(
                number, f"service-policy type {kind} {name!r} names a policy-map that is not defined: {effect}",
                f"policy-map type {kind} {name} with its classes, or a service-policy naming an existing one"))

    def classify(self, policy: tuple[str, int] | None) -> tuple[dict[int, int] | None, Trust | None]:
        if policy is None:
            return None, None
        name, number = policy
        entry = self.qos_policies.get(name)
        if entry is None:
            self.r.warn(number, f"service-policy type qos {name!r} is not defined in this text; classification "
                                "unknown")
            self.undefined("qos", name, number, "ingress traffic is not classified, so RoCE and CNPs land in "
                                                "class-default")
            return None, None
        self.r.use(number)
        if not entry.complete:
            return None, None
        trust: Trust | None = "pcp,dscp" if entry.uses_dscp and entry.uses_cos else (
            "dscp" if entry.uses_dscp else ("pcp" if entry.uses_cos else None))
        return entry.dscp, trust

    def queuing(self, policy: tuple[str, int] | None) -> Queuing | None:
        if policy is None:
            return None
        name, number = policy
        if name not in self.queuing_policies:
            self.r.warn(number, f"service-policy type queuing {name!r} is not defined in this text; scheduling "
                                "unknown")
            self.undefined("queuing", name, number, "the queues keep the default scheduling, without ECN or a strict "
                                                    "CNP queue")
            return None
        self.r.use(number)
        return self.queuing_policies[name] if self.queuing_policies[name].complete else None


@dataclass
class _Port:
    """What the lines of one interface block say."""

    pfc: frozenset[int] | None
    """The system's lossless classes, which ``priority-flow-control mode on`` turns on here."""
    mtu: int | None = None
    port_pfc: frozenset[int] | None = None
    wd: bool | None = None
    qos_policy: tuple[str, int] | None = None
    queue_policy: tuple[str, int] | None = None
    acl: str | None = None
    routed: bool | None = None


_PortLine = tuple[Callable[[list[str]], bool], str, Callable[[Block, Where, _Port], object]]
_INTERFACE_LINES: tuple[_PortLine, ...] = (
    (lambda w: w == ["no", "switchport"] or w[:2] in (["ip", "address"], ["ipv6", "address"]), "routed",
     lambda line, where, port: True),
    (lambda w: w == ["switchport"] or w[:2] == ["switchport", "mode"], "routed", lambda line, where, port: False),
    (lambda w: w[0] == "mtu" and len(w) == 2, "mtu",
     lambda line, where, port: parse_int(line.words[1], where, what="mtu", lo=68, hi=65535)),
    (lambda w: w[:2] == ["priority-flow-control", "mode"] and len(w) >= 3, "port_pfc",
     lambda line, where, port: {"on": port.pfc, "off": frozenset()}.get(line.words[2])),
    (lambda w: w[:2] == ["priority-flow-control", "watch-dog-interval"] and len(w) == 3, "wd",
     lambda line, where, port: line.words[2] == "on"),
    (lambda w: w[:3] == ["service-policy", "type", "qos"] and "input" in w, "qos_policy",
     lambda line, where, port: (line.words[-1], line.line)),
    (lambda w: w[:3] == ["service-policy", "type", "queuing"] and "output" in w, "queue_policy",
     lambda line, where, port: (line.words[-1], line.line)),
    (lambda w: w[0] in ("ip", "ipv4") and w[1:2] == ["access-group"] and len(w) == 4 and w[3] == "in", "acl",
     lambda line, where, port: line.words[2]),
)
"""Interface lines, tried in order: the first whose test holds sets that attribute of the port to its value."""


def interface_ports(block: Block, names: list[str], policies: Policies, pfc: frozenset[int] | None,
               timers: Watchdog) -> list[PortQos]:
    r = policies.r
    port = _Port(pfc)
    for line in block.children:
        with r.statement(line.line):
            found = next(((attr, value) for test, attr, value in _INTERFACE_LINES if test(line.words)), None)
            if found is None:
                continue
            setattr(port, found[0], found[1](line, line.where(r.source), port))
            r.use(line.line)
    dscp, trust = policies.classify(port.qos_policy)
    q = policies.queuing(port.queue_policy)
    wd = port.wd
    return [PortQos(
        name=name, mtu=port.mtu, pfc_priorities=port.port_pfc, trust=trust, dscp_to_priority=dscp,
        ecn=dict(q.ecn) if q else None, strict_queues=frozenset(q.strict) if q else None,
        queue_weights=dict(q.weights) if q else None, routed=port.routed,
        watchdog=None if wd is None else Watchdog(wd, timers.detection_ms, timers.restoration_ms, timers.action,
                                                  timers.polling_ms),
        acl_in=port.acl,
    ) for name in names]
