"""The statements of a Dell OS10 running-config, each read into plain records (for :mod:`.dell_os10`).

Class maps, trust maps (``trust dscp-map``/``dot1p-map``), ``qos-map traffic-class``, ``wred`` profiles, the three
policy-map types, ``system qos`` and interfaces (breakout names included). What a map or policy applies is kept by
name; :mod:`.dell_os10` resolves the names. A malformed value raises ParseError inside ``Reading.statement``, which
turns it into a warning on its line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric.fabric.deployed import ConfigDefect, EcnProfile, Trust
from tensorfabric.fabric.parsers._common import (
    Block,
    Where,
    expand_interfaces,
    parse_float,
    parse_int,
    parse_priorities,
)
from tensorfabric.fabric.parsers._read import Reading

__all__ = ["TRUST", "Applied", "Port", "Queuing", "State", "top"]

TRUST: dict[str, Trust] = {"dscp": "dscp", "dot1p": "pcp"}


@dataclass
class Queuing:
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)
    wred: dict[int, tuple[str, int]] = field(default_factory=dict)
    complete: bool = True


@dataclass
class Applied:
    """What ``system qos`` or one interface applies, by name; ``None`` where it applies nothing."""

    trust: dict[str, tuple[str, int]] = field(default_factory=dict)
    tc_map: tuple[str, int] | None = None
    nqos: tuple[str, int] | None = None
    queuing: tuple[str, int] | None = None
    qos: tuple[str, int] | None = None


@dataclass
class Port:
    names: list[str]
    applied: Applied
    mtu: int | None = None
    routed: bool | None = None
    pfc_mode: bool | None = None
    link_pause: bool | None = None
    qos_lines: bool = False


@dataclass
class State:
    r: Reading
    hostname: str | None = None
    queue_classes: dict[str, int] = field(default_factory=dict)
    nq_classes: dict[str, int] = field(default_factory=dict)
    qos_classes: dict[str, set[int]] = field(default_factory=dict)
    trust_maps: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    conflicts: dict[int, set[int]] = field(default_factory=dict)
    tc_maps: dict[str, dict[int, int]] = field(default_factory=dict)
    wreds: dict[str, EcnProfile | None] = field(default_factory=dict)
    queuing: dict[str, Queuing] = field(default_factory=dict)
    nqos: dict[str, set[int]] = field(default_factory=dict)
    qos_policies: dict[str, dict[int, int] | None] = field(default_factory=dict)
    system: Applied = field(default_factory=Applied)
    ports: list[Port] = field(default_factory=list)
    defects: list[ConfigDefect] = field(default_factory=list)


def _trust_map(block: Block, st: State, kind: str) -> None:
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


def _tc_map(block: Block, st: State) -> None:
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


def _wred(block: Block, st: State) -> None:
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


def _class_map(block: Block, st: State) -> None:
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


def _policy(block: Block, st: State, kind: str) -> None:
    r = st.r
    name = block.words[-1]
    queuing = Queuing() if kind == "queuing" else None
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


def _apply(line: Block, applied: Applied) -> bool:
    """A line of ``system qos`` or an interface that applies a map or policy by name."""
    w = line.words
    ref = (w[-1], line.line)
    if w[0] == "trust-map" and len(w) == 3 and w[1] in TRUST:
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


def _interface(block: Block, st: State) -> None:
    r = st.r
    names = _names(" ".join(w for w in block.words[1:] if w != "range"), block.where(r.source))
    port = Port(names, Applied())
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


def top(block: Block, st: State) -> None:
    """Read one top-level statement of the config into ``st``."""
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
