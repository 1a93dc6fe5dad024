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
from tensorfabric.fabric.parsers._common import (
    Block,
    Where,
    block_tree,
    device_from_source,
    expand_interfaces,
    parse_float,
    parse_int,
    parse_priorities,
)
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
_TRUST: dict[str, Trust] = {"dscp": "dscp", "dot1p": "pcp"}
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


@dataclass
class _Queuing:
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)
    wred: dict[int, tuple[str, int]] = field(default_factory=dict)
    complete: bool = True


@dataclass
class _Applied:
    """What ``system qos`` or one interface applies, by name; ``None`` where it applies nothing."""

    trust: dict[str, tuple[str, int]] = field(default_factory=dict)
    tc_map: tuple[str, int] | None = None
    nqos: tuple[str, int] | None = None
    queuing: tuple[str, int] | None = None
    qos: tuple[str, int] | None = None


@dataclass
class _Port:
    names: list[str]
    applied: _Applied
    mtu: int | None = None
    routed: bool | None = None
    pfc_mode: bool | None = None
    link_pause: bool | None = None
    qos_lines: bool = False


@dataclass
class _State:
    r: Reading
    hostname: str | None = None
    queue_classes: dict[str, int] = field(default_factory=dict)
    nq_classes: dict[str, int] = field(default_factory=dict)
    qos_classes: dict[str, set[int]] = field(default_factory=dict)
    trust_maps: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    conflicts: dict[int, set[int]] = field(default_factory=dict)
    tc_maps: dict[str, dict[int, int]] = field(default_factory=dict)
    wreds: dict[str, EcnProfile | None] = field(default_factory=dict)
    queuing: dict[str, _Queuing] = field(default_factory=dict)
    nqos: dict[str, set[int]] = field(default_factory=dict)
    qos_policies: dict[str, dict[int, int] | None] = field(default_factory=dict)
    system: _Applied = field(default_factory=_Applied)
    ports: list[_Port] = field(default_factory=list)
    defects: list[ConfigDefect] = field(default_factory=list)


def _trust_map(block: Block, st: _State, kind: str) -> None:
    r = st.r
    table: dict[int, int] = {}
    hi = 63 if kind == "dscp" else 7
    for line in block.children:
        w, where = line.words, line.where(r.source)
        with r.statement(line.line):
            if len(w) != 4 or w[0] != "qos-group" or w[2] != kind:
                continue
            group = parse_int(w[1], where, what="qos-group", lo=0, hi=7)
            for key in parse_priorities(w[3], where, what=kind, hi=hi):
                if kind == "dscp" and key in table and table[key] != group:
                    st.conflicts.setdefault(key, {table[key]}).add(group)
                table.setdefault(key, group)
            r.use(line.line)
    st.trust_maps[(kind, block.words[2])] = table


def _tc_map(block: Block, st: _State) -> None:
    r = st.r
    table: dict[int, int] = {}
    for line in block.children:
        w, where = line.words, line.where(r.source)
        with r.statement(line.line):
            if len(w) == 4 and w[0] == "queue" and w[2] == "qos-group":
                queue = parse_int(w[1], where, what="queue", lo=0, hi=7)
                table.update(dict.fromkeys(parse_priorities(w[3], where, what="qos-group"), queue))
                r.use(line.line)
    st.tc_maps[block.words[2]] = table


def _wred(block: Block, st: _State) -> None:
    r = st.r
    kmin = kmax = None
    prob = 100.0
    ecn = False
    for line in block.children:
        w, where = line.words, line.where(r.source)
        with r.statement(line.line):
            if w[:3] == ["random-detect", "color", "green"] and "minimum-threshold" in w and "maximum-threshold" in w:
                kmin = parse_int(_after(w, "minimum-threshold"), where, what="minimum-threshold", lo=0)
                kmax = parse_int(_after(w, "maximum-threshold"), where, what="maximum-threshold", lo=0)
                if "drop-probability" in w:
                    prob = parse_float(_after(w, "drop-probability"), where, what="drop-probability")
            elif w[:2] == ["random-detect", "color"]:
                pass  # yellow/red thresholds: RoCE is green
            elif w == ["random-detect", "ecn"]:
                ecn = True
            elif w[:2] == ["random-detect", "weight"]:
                pass
            else:
                continue
            r.use(line.line)
    if kmin is None or kmax is None:
        r.warn(block.line, f"wred {block.words[1]!r} has no 'random-detect color green minimum-threshold ... "
                           "maximum-threshold ...'; its ECN is unknown")
        st.wreds[block.words[1]] = None
        return
    st.wreds[block.words[1]] = EcnProfile(kmin, kmax, prob, ecn, unit="kbytes")


def _after(words: list[str], key: str) -> str:
    i = words.index(key) + 1
    return words[i] if i < len(words) else ""


def _class_map(block: Block, st: _State) -> None:
    r, w = st.r, block.words
    kind = w[2] if len(w) >= 4 and w[1] == "type" else "qos"
    name = w[-1]
    for line in block.children:
        lw, where = line.words, line.where(r.source)
        with r.statement(line.line):
            if kind == "queuing" and lw[:2] == ["match", "queue"] and len(lw) == 3:
                st.queue_classes[name] = parse_int(lw[2], where, what="queue", lo=0, hi=7)
            elif kind == "network-qos" and lw[:2] == ["match", "qos-group"] and len(lw) == 3:
                st.nq_classes[name] = parse_int(lw[2], where, what="qos-group", lo=0, hi=7)
            elif kind == "qos" and lw[0] == "match" and "dscp" in lw[1:3] and lw[-1] != "dscp":
                st.qos_classes.setdefault(name, set()).update(
                    parse_priorities(",".join(lw[lw.index("dscp") + 1:]), where, what="dscp", hi=63))
            else:
                continue
            r.use(line.line)
    r.use(block.line)


def _policy(block: Block, st: _State, kind: str) -> None:
    r = st.r
    name = block.words[-1]
    queuing = _Queuing() if kind == "queuing" else None
    pfc: set[int] = set()
    dscp: dict[int, int] | None = {} if kind == "qos" else None
    for cls in block.children:
        if cls.words[0] != "class" or len(cls.words) < 2:
            continue
        cname = cls.words[-1]
        r.use(cls.line)
        queue = st.queue_classes.get(cname, 0)
        if queuing is not None:
            if cname not in st.queue_classes:
                r.warn(cls.line, f"class {cname!r} is not a class-map type queuing with 'match queue N' in this "
                                 "text; the policy's scheduling and ECN are left unknown")
                queuing.complete = False
                continue
        for line in cls.children:
            lw, where = line.words, line.where(r.source)
            with r.statement(line.line):
                if queuing is not None and lw[:2] == ["bandwidth", "percent"] and len(lw) == 3:
                    queuing.weights[queue] = parse_int(lw[2], where, what="bandwidth percent", lo=0, hi=100)
                elif queuing is not None and lw == ["priority"]:
                    queuing.strict.add(queue)
                elif queuing is not None and lw[0] == "random-detect" and len(lw) == 2:
                    queuing.wred[queue] = (lw[1], line.line)
                elif kind == "network-qos" and lw[0] == "pause":
                    pass  # lossless buffer for the class; the priorities come from pfc-cos
                elif kind == "network-qos" and lw[0] == "pfc-cos" and len(lw) >= 2:
                    pfc.update(parse_priorities(",".join(lw[1:]), where, what="pfc-cos"))
                elif kind == "qos" and lw[:2] == ["set", "qos-group"] and len(lw) == 3:
                    group = parse_int(lw[2], where, what="qos-group", lo=0, hi=7)
                    members = st.qos_classes.get(cname)
                    if members is None:
                        r.warn(cls.line, f"class {cname!r} is not defined with 'match dscp' in this text; the "
                                         "policy's DSCP map is left unknown")
                        dscp = None
                    elif dscp is not None:
                        for d in members:
                            dscp.setdefault(d, group)  # classes match in order: the first wins
                else:
                    continue
                r.use(line.line)
    if queuing is not None:
        st.queuing[name] = queuing
    elif kind == "network-qos":
        st.nqos[name] = pfc
    else:
        st.qos_policies[name] = dscp


def _apply(line: Block, applied: _Applied) -> bool:
    """A line of ``system qos`` or an interface that applies a map or policy by name."""
    w = line.words
    ref = (w[-1], line.line)
    if w[0] == "trust-map" and len(w) == 3 and w[1] in _TRUST:
        applied.trust[w[1]] = ref
    elif w[:2] == ["qos-map", "traffic-class"] and len(w) == 3:
        applied.tc_map = ref
    elif w[0] == "service-policy" and len(w) == 5 and w[2] == "type":
        kind = w[3]
        if kind == "network-qos":
            applied.nqos = ref
        elif kind == "queuing":
            applied.queuing = ref
        elif kind == "qos":
            applied.qos = ref
        else:
            return False
    else:
        return False
    return True


_BREAKOUT = re.compile(r"^ethernet ?(\d{1,3}/\d{1,3}/\d{1,3}):(\d{1,2})(?:-(?:\1:)?(\d{1,2}))?$", re.IGNORECASE)


def _names(spec: str, where: Where) -> list[str]:
    """Interface names of ``ethernet1/1/1-1/1/4``, ``ethernet 1/1/5`` or a breakout ``ethernet1/1/1:1-1/1/1:4``."""
    names: list[str] = []
    for item in spec.split(","):
        match = _BREAKOUT.match(item.strip())
        if match is None:
            names.extend(expand_interfaces(item, where))
            continue
        first = int(match[2])
        last = int(match[3]) if match[3] else first
        if last < first:
            raise where.error(f"breakout range {item!r} must run upwards")
        names.extend(f"Ethernet{match[1]}:{n}" for n in range(first, last + 1))
    return names


def _interface(block: Block, st: _State) -> None:
    r = st.r
    names = _names(" ".join(w for w in block.words[1:] if w != "range"), block.where(r.source))
    port = _Port(names, _Applied())
    for line in block.children:
        w, where = line.words, line.where(r.source)
        with r.statement(line.line):
            if _apply(line, port.applied):
                port.qos_lines = True
            elif w[0] == "mtu" and len(w) == 2:
                port.mtu = parse_int(w[1], where, what="mtu", lo=68, hi=65535)
            elif w == ["no", "switchport"] or w[:2] in (["ip", "address"], ["ipv6", "address"]):
                port.routed = True
            elif w[0] == "switchport":
                port.routed = False if port.routed is None else port.routed
            elif w[:2] == ["priority-flow-control", "mode"] and len(w) >= 3:
                port.pfc_mode = w[2] == "on"
                port.qos_lines = True
            elif w == ["no", "priority-flow-control", "mode"] or w == ["no", "priority-flow-control", "mode", "on"]:
                port.pfc_mode = False
                port.qos_lines = True
            elif w[0] == "flowcontrol" and len(w) == 3 and w[1] in ("receive", "transmit"):
                port.link_pause = (port.link_pause or False) or w[2] == "on"
            elif w == ["ets", "mode", "on"]:
                pass
            else:
                continue
            r.use(line.line)
    st.ports.append(port)


def _top(block: Block, st: _State) -> None:
    r, w = st.r, block.words
    if w[0] == "hostname" and len(w) == 2:
        st.hostname = w[1]
    elif w[0] == "class-map" and len(w) >= 2:
        _class_map(block, st)
    elif w[0] == "trust" and len(w) == 3 and w[1] in ("dscp-map", "dot1p-map"):
        _trust_map(block, st, w[1].split("-")[0])
    elif w[:2] == ["qos-map", "traffic-class"] and len(w) == 3:
        _tc_map(block, st)
    elif w[0] == "wred" and len(w) == 2:
        _wred(block, st)
    elif w[0] == "policy-map" and len(w) >= 2:
        kind = w[2] if len(w) == 4 and w[1] == "type" else "qos"
        if kind not in ("queuing", "network-qos", "qos"):
            return  # application and control-plane policies carry no lossless setting
        _policy(block, st, kind)
    elif w == ["system", "qos"]:
        for line in block.children:
            with r.statement(line.line):
                if _apply(line, st.system) or line.words in (["ets", "mode", "on"], ["buffer-statistics-tracking"]):
                    r.use(line.line)
                    for child in line.children:  # buffer-statistics-tracking indented under trust-map
                        r.use(child.line)
    elif w == ["dcbx", "enable"]:
        pass
    elif w[0] == "interface" and len(w) >= 2:
        if w[1].startswith("mgmt") or w[1].lower() == "vlan" or w[1].startswith("loopback"):
            return
        _interface(block, st)
    else:
        return
    r.use(block.line)


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    st = _State(r)
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
            _top(block, st)
    r.unread_under(roots)
    # A whole running-config closes with 'end'; a paste cut short stops inside a block (remarks after 'end' are not
    # part of the config).
    ended = not tail_open(lines) or any(t.strip() == "end" for _, t in lines)
    complete = st.hostname is not None and bool(st.ports) and ended

    reported: set[tuple[str, int]] = set()

    def missing(what: str, ref: tuple[str, int]) -> None:
        if ref in reported:
            return
        reported.add(ref)
        if complete:
            st.defects.append(ConfigDefect(ref[1], f"{what} {ref[0]!r} is applied but never defined; the device "
                                                   "applies nothing for it", f"define {what} {ref[0]} or apply one "
                                                                             "that exists"))
        else:
            r.warn(ref[1], f"{what} {ref[0]!r} is not defined in this text; what it sets is unknown")

    def dscp_table(applied: _Applied) -> tuple[dict[int, int] | None, Trust | None, bool]:
        """(DSCP -> priority, trust, built-in table) of what ``applied`` names."""
        table: dict[int, int] | None = None
        builtin = False
        trusts: list[Trust] = []
        if applied.qos is not None:
            policy = st.qos_policies.get(applied.qos[0], {})
            if applied.qos[0] not in st.qos_policies:
                missing("policy-map type qos", applied.qos)
            elif policy:
                table, builtin = policy, False
                trusts.append("dscp")
        for kind, ref in sorted(applied.trust.items()):
            trusts.append(_TRUST[kind])
            if kind != "dscp" or table is not None:
                if kind != "dscp" and ref[0] != "default" and (kind, ref[0]) not in st.trust_maps:
                    missing("trust dot1p-map", ref)
                continue
            if ref[0] == "default":
                table, builtin = default_dscp_map(), True
            elif (kind, ref[0]) in st.trust_maps:
                table = st.trust_maps[(kind, ref[0])]
            else:
                missing("trust dscp-map", ref)
        trust: Trust | None = "pcp,dscp" if len(set(trusts)) > 1 else (trusts[0] if trusts else None)
        return table, trust, builtin

    def pfc_of(applied: _Applied) -> frozenset[int] | None:
        ref = applied.nqos or st.system.nqos
        if ref is None:
            return None
        if ref[0] not in st.nqos:
            missing("policy-map type network-qos", ref)
            return None
        return frozenset(st.nqos[ref[0]])

    def queuing_of(applied: _Applied) -> tuple[frozenset[int], dict[int, int], dict[int, EcnProfile] | None] | None:
        ref = applied.queuing or st.system.queuing
        if ref is None:
            return None
        q = st.queuing.get(ref[0])
        if q is None:
            missing("policy-map type queuing", ref)
            return None
        if not q.complete:
            return None
        ecn: dict[int, EcnProfile] | None = {}
        for queue, (profile, number) in q.wred.items():
            found = st.wreds.get(profile)
            if profile not in st.wreds:
                missing("wred profile", (profile, number))
            if found is not None and ecn is not None:
                ecn[queue] = found
            elif profile in st.wreds or not complete:
                ecn = None  # a profile without thresholds, or one outside the excerpt: that queue's ECN is unknown
        return frozenset(q.strict), dict(q.weights), ecn

    system_dscp, system_trust, builtin = dscp_table(st.system)
    tc_ref = st.system.tc_map
    queue_map: dict[int, int] = {}
    if tc_ref is not None:
        if tc_ref[0] in st.tc_maps:
            queue_map = st.tc_maps[tc_ref[0]]
        else:
            missing("qos-map traffic-class", tc_ref)
    system_pfc = pfc_of(st.system) if st.system.nqos is not None else None
    system_q = queuing_of(st.system) if st.system.queuing is not None else None
    ports: list[PortQos] = []
    for p in st.ports:
        if p.mtu is None and not p.qos_lines:
            continue  # access and uplink ports with no QoS line say nothing a rule checks
        dscp, trust, port_builtin = dscp_table(p.applied)
        builtin = builtin or port_builtin
        if p.applied.tc_map is not None:
            if p.applied.tc_map[0] in st.tc_maps:
                queue_map = queue_map or st.tc_maps[p.applied.tc_map[0]]
            else:
                missing("qos-map traffic-class", p.applied.tc_map)
        policy_pfc = pfc_of(p.applied) if p.applied.nqos is not None else system_pfc
        if p.pfc_mode is False:
            pfc: frozenset[int] | None = frozenset()
        elif p.pfc_mode:
            pfc = policy_pfc if policy_pfc is not None else (frozenset() if complete and p.applied.nqos is None
                                                              and st.system.nqos is None else None)
        else:
            # A network-qos policy without 'priority-flow-control mode on' reserves buffers and pauses nothing.
            pfc = frozenset() if complete and p.qos_lines else None
        q = queuing_of(p.applied) if p.applied.queuing is not None else system_q
        for name in p.names:
            ports.append(PortQos(
                name=name, mtu=p.mtu, routed=p.routed, pfc_priorities=pfc, trust=trust, dscp_to_priority=dscp,
                strict_queues=q[0] if q else None, queue_weights=q[1] if q else None,
                ecn=q[2] if q else None, link_pause=p.link_pause,
            ))
    return Deployed(
        device=device or st.hostname or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=system_dscp or {}, priority_to_queue=queue_map, pfc_priorities=system_pfc,
        trust=system_trust, ecn=system_q[2] if system_q else None,
        strict_queues=system_q[0] if system_q else None, queue_weights=system_q[1] if system_q else {},
        ports=tuple(ports), dscp_conflicts={d: frozenset(g) for d, g in st.conflicts.items()},
        default_dscp_map=builtin, complete=complete, defects=tuple(st.defects),
        notes=("WRED thresholds are OS10 KB, kept unconverted",) if st.wreds else (),
    )
