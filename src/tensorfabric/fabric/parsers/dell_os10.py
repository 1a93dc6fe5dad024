"""Dell SmartFabric OS10 running-config (the QoS/PFC subset) into a :class:`Deployed`.

OS10 classifies with trust maps, not policies: ``trust dscp-map NAME`` (``qos-group G dscp 24-31``) or ``trust
dot1p-map NAME`` (``qos-group G dot1p 3``), applied by ``trust-map dscp|dot1p NAME`` under ``system qos`` or an
interface (``trust-map dscp default`` is the built-in table, DSCP >> 3). A ``policy-map type qos`` whose classes
``set qos-group`` from ``class-map`` ``match [ip] dscp`` lines, applied with ``service-policy input type qos``,
classifies the same way. The qos-group is the priority; ``qos-map traffic-class NAME`` (``queue Q qos-group G``)
sends it to a queue, queue = qos-group without one.

PFC: a ``policy-map type network-qos`` whose class (``class-map type network-qos`` with ``match qos-group N``)
says ``pause`` and ``pfc-cos 3``, applied by ``service-policy input type network-qos`` together with
``priority-flow-control mode on`` on the interface. Scheduling and ECN: a ``policy-map type queuing`` whose
classes (``class-map type queuing`` with ``match queue N``) give ``bandwidth percent``, ``priority`` (strict) and
``random-detect PROFILE``, a ``wred PROFILE`` block (``random-detect color green minimum-threshold KB
maximum-threshold KB drop-probability P``, ``random-detect ecn``), applied by ``service-policy output type
queuing``. WRED thresholds are KB as the CLI takes them (``kbytes``), never compared with byte counts.

A map or policy the text names but does not define leaves what depends on it unknown (a warning); in a whole
config (``hostname`` and interfaces) it is a defect the device silently ignores. ``dcbx enable`` and ``ets mode
on`` are read and carry no fact. The PFC watchdog of OS10 is not modelled (no published OS10 config shows one).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric import roce
from tensorfabric.fabric.deployed import ConfigDefect, Deployed, EcnProfile, PortQos, Trust
from tensorfabric.fabric.parsers._common import block_tree, device_from_source
from tensorfabric.fabric.parsers._os10_blocks import TRUST, Applied, Port, State, top
from tensorfabric.fabric.parsers._read import Reading, config_lines, markers, tail_open

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "default_dscp_map", "read"]

FORMAT = "dell-os10"
NAME = "Dell OS10"
SUFFIXES = (".os10",)
EXPECTED = ("Dell OS10 QoS statements (trust dscp-map / dot1p-map, qos-map traffic-class, wred, policy-map type "
            "network-qos with pfc-cos, policy-map type queuing, system qos trust-map, interface ethernet1/1/1)")
MARKERS = markers(
    ("trust dscp-map|dot1p-map", r"^\s*trust (?:dscp|dot1p)-map \S"),
    ("trust-map dscp|dot1p", r"^\s*trust-map (?:dscp|dot1p) \S"),
    ("qos-map traffic-class", r"^\s*qos-map traffic-class \S"),
    ("qos-group N dscp|dot1p", r"^\s*qos-group \d+ (?:dscp|dot1p) "),
    ("queue N qos-group", r"^\s*queue \d+ qos-group "),
    ("match queue N", r"^\s*match queue \d"),
    ("pfc-cos", r"^\s*pfc-cos [\d,-]+\s*$"),
    ("wred PROFILE", r"^\s*wred \S+\s*$"),
    ("random-detect color", r"^\s*random-detect color (?:green|yellow|red) minimum-threshold\b"),
    ("service-policy input|output type", r"^\s*service-policy (?:input|output) type (?:qos|queuing|network-qos)\b"),
    ("ets mode on", r"^\s*ets mode on\s*$"),
    ("dcbx enable", r"^\s*dcbx enable\s*$"),
    ("interface ethernet1/1/1", r"^\s*interface (?:range )?ethernet ?\d+/\d+/\d+"),
    ("OS10 prompt mode", r"\((?:config|conf)-(?:pmap-c-que|pmap-c-nqos|cmap-queuing|wred|sys-qos|if-eth\d+/\d+/\d+)"),
)
_REMARK = re.compile(r"[A-Z*_>]")
# A prompt the intake leaves on the line ('OS10(conf-if-eth1/1/3)# mtu 9216'): the mode says how deep it sits.
_PROMPT = re.compile(r"^[A-Za-z][\w.-]{0,62}\((conf(?:ig)?-[\w/.:-]{1,96})\)# ?(.*)$")
_TOP = frozenset({"interface", "class-map", "policy-map", "trust", "qos-map", "wred", "system", "hostname", "dcbx"})


def _unprompted(number: int, text: str) -> tuple[int, str]:
    match = _PROMPT.match(text[:4096])
    if match is None:
        return number, text
    mode, command = match[1], match[2].strip()
    if not command or command.split(" ", 1)[0] in ("exit", "end", "do", "show"):
        return number, ""
    first = command.split(" ", 1)[0]
    depth = 0 if first in _TOP else (2 if "-c-" in mode and first != "class" else 1)
    return number, "  " * depth + command


def default_dscp_map() -> dict[int, int]:
    """OS10's built-in DSCP -> qos-group table (``trust-map dscp default``): the class selector, DSCP >> 3."""
    return {d: roce.default_priority(d) for d in range(64)}


_Queues = tuple[frozenset[int], dict[int, int], dict[int, EcnProfile] | None]


@dataclass
class _Resolver:
    """Resolves the maps and policies ``system qos`` and the interfaces apply by name."""

    st: State
    r: Reading
    complete: bool
    reported: set[tuple[str, int]] = field(default_factory=set)

    def missing(self, what: str, ref: tuple[str, int]) -> None:
        """A name applied but not defined: a defect of a whole config, unknown in an excerpt."""
        if ref in self.reported:
            return
        self.reported.add(ref)
        if self.complete:
            self.st.defects.append(ConfigDefect(
                ref[1], f"{what} {ref[0]!r} is applied but never defined; the device applies nothing for it",
                f"define {what} {ref[0]} or apply one that exists"))
        else:
            self.r.warn(ref[1], f"{what} {ref[0]!r} is not defined in this text; what it sets is unknown")

    def dscp_table(self, applied: Applied) -> tuple[dict[int, int] | None, Trust | None, bool]:
        """(DSCP -> priority, trust, built-in table) of what ``applied`` names."""
        st = self.st
        table: dict[int, int] | None = None
        builtin = False
        trusts: list[Trust] = []
        if applied.qos is not None:
            policy = st.qos_policies.get(applied.qos[0], {})
            if applied.qos[0] not in st.qos_policies:
                self.missing("policy-map type qos", applied.qos)
            elif policy:
                table = policy
                trusts.append("dscp")
        for kind, ref in sorted(applied.trust.items()):
            trusts.append(TRUST[kind])
            if kind != "dscp" or table is not None:
                if kind != "dscp" and ref[0] != "default" and (kind, ref[0]) not in st.trust_maps:
                    self.missing("trust dot1p-map", ref)
                continue
            if ref[0] == "default":
                table, builtin = default_dscp_map(), True
            elif (kind, ref[0]) in st.trust_maps:
                table = st.trust_maps[(kind, ref[0])]
            else:
                self.missing("trust dscp-map", ref)
        trust: Trust | None = "pcp,dscp" if len(set(trusts)) > 1 else (trusts[0] if trusts else None)
        return table, trust, builtin

    def tc_map(self, ref: tuple[str, int] | None) -> dict[int, int]:
        if ref is None:
            return {}
        if ref[0] not in self.st.tc_maps:
            self.missing("qos-map traffic-class", ref)
            return {}
        return self.st.tc_maps[ref[0]]

    def pfc_of(self, applied: Applied) -> frozenset[int] | None:
        ref = applied.nqos or self.st.system.nqos
        if ref is None:
            return None
        if ref[0] not in self.st.nqos:
            self.missing("policy-map type network-qos", ref)
            return None
        return frozenset(self.st.nqos[ref[0]])

    def queuing_of(self, applied: Applied) -> _Queues | None:
        st = self.st
        ref = applied.queuing or st.system.queuing
        if ref is None:
            return None
        q = st.queuing.get(ref[0])
        if q is None:
            self.missing("policy-map type queuing", ref)
            return None
        if not q.complete:
            return None
        ecn: dict[int, EcnProfile] | None = {}
        for queue, (profile, number) in q.wred.items():
            found = st.wreds.get(profile)
            if profile not in st.wreds:
                self.missing("wred profile", (profile, number))
            if found is not None and ecn is not None:
                ecn[queue] = found
            elif profile in st.wreds or not self.complete:
                ecn = None  # a profile without thresholds, or one outside the excerpt: that queue's ECN is unknown
        return frozenset(q.strict), dict(q.weights), ecn

    def pfc(self, p: Port, system_pfc: frozenset[int] | None) -> frozenset[int] | None:
        """The priorities a port pauses: its network-qos policy's, once 'priority-flow-control mode on'."""
        policy_pfc = self.pfc_of(p.applied) if p.applied.nqos is not None else system_pfc
        if p.pfc_mode is False:
            return frozenset()
        if p.pfc_mode:
            if policy_pfc is not None:
                return policy_pfc
            return frozenset() if self.complete and p.applied.nqos is None and self.st.system.nqos is None else None
        # A network-qos policy without 'priority-flow-control mode on' reserves buffers and pauses nothing.
        return frozenset() if self.complete and p.qos_lines else None


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    st = State(r)
    # OS10 statements are lower case; a line that starts with a capital or markup is a remark between them
    # ("Here is the leaf's QoS:"), and read as a statement it would cut the block it sits in.
    lines = [(n, t) for n, t in (_unprompted(n, t) for n, t in config_lines(r)) if not _REMARK.match(t)]
    roots = block_tree(lines)
    if len(roots) > 1 and tail_open(lines) and roots[-1].children and roots[-1].words[0] in (
            "class-map", "policy-map", "trust", "qos-map", "wred"):
        # A map cut at the end of the paste may have lost entries that would read as deviations.
        last = roots.pop()
        r.warn(last.line, f"the text ends inside '{last.text[:60]}' without a closing line; it may be cut short, so "
                          "it is not used")
    for block in roots:
        with r.statement(block.line):
            top(block, st)
    r.unread_under(roots)
    # A whole running-config closes with 'end'; a paste cut short stops inside a block (remarks after 'end' are not
    # part of the config).
    ended = not tail_open(lines) or any(t.strip() == "end" for _, t in lines)
    res = _Resolver(st, r, st.hostname is not None and bool(st.ports) and ended)
    system_dscp, system_trust, builtin = res.dscp_table(st.system)
    queue_map = res.tc_map(st.system.tc_map)
    system_pfc = res.pfc_of(st.system) if st.system.nqos is not None else None
    system_q = res.queuing_of(st.system) if st.system.queuing is not None else None
    ports: list[PortQos] = []
    for p in st.ports:
        if p.mtu is None and not p.qos_lines:
            continue  # access and uplink ports with no QoS line say nothing a rule checks
        dscp, trust, port_builtin = res.dscp_table(p.applied)
        builtin = builtin or port_builtin
        queue_map = queue_map or res.tc_map(p.applied.tc_map)
        pfc = res.pfc(p, system_pfc)
        q = res.queuing_of(p.applied) if p.applied.queuing is not None else system_q
        ports.extend(PortQos(
            name=name, mtu=p.mtu, routed=p.routed, pfc_priorities=pfc, trust=trust, dscp_to_priority=dscp,
            strict_queues=q[0] if q else None, queue_weights=q[1] if q else None,
            ecn=q[2] if q else None, link_pause=p.link_pause) for name in p.names)
    return Deployed(
        device=device or st.hostname or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=system_dscp or {}, priority_to_queue=queue_map, pfc_priorities=system_pfc,
        trust=system_trust, ecn=system_q[2] if system_q else None,
        strict_queues=system_q[0] if system_q else None, queue_weights=system_q[1] if system_q else {},
        ports=tuple(ports), dscp_conflicts={d: frozenset(g) for d, g in st.conflicts.items()},
        default_dscp_map=builtin, complete=res.complete, defects=tuple(st.defects),
        notes=("WRED thresholds are OS10 KB, kept unconverted",) if st.wreds else (),
    )
