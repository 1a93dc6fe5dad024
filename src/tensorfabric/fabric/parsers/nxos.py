"""Cisco NX-OS running-config (Nexus 9000 QoS/PFC subset) into a :class:`Deployed`.

Classification comes from ``class-map type qos`` (``match dscp``/``match cos``) and the ``policy-map type
qos`` that sets ``qos-group`` per class, applied under ``system qos`` or an interface. On Nexus 9000 in 8-queue
mode qos-group N is served by queue N (``c-out-8q-qN``; ``q-default`` is 0), so priorities equal queues
unless ``qos map cos-to-queue`` says otherwise. PFC comes from ``pause pfc-cos`` in the network-qos policy and
``priority-flow-control mode`` per interface; headroom from ``pause buffer-size B pause-threshold P
resume-threshold R`` (read as size B, xoff B-P, xon P and a hysteresis of P-R). ECN/WRED from
``random-detect`` in the queuing policy; the watchdog from ``priority-flow-control watch-dog-interval on``
with its interval and multipliers.

Nexus 3000 style configs name their own classes: ``class-map type queuing NAME`` / ``class-map type
network-qos NAME`` with ``match qos-group N`` (served by queue N; ``class-default`` is qos-group 0),
``pause no-drop`` instead of ``pause pfc-cos``, ``priority`` without a level and ``bandwidth percent``. PFC is
modelled on the qos-group (the priority) that the no-drop class matches. Classes of a ``policy-map type qos``
match in order, so a DSCP listed in two classes gets the first class's group and is reported as a conflict.
``hardware profile pfc mmu buffer-reservation`` is read as a note: it sizes the PFC pool, not a per-port value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import Deployed, EcnProfile, Headroom, Watchdog
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
from tensorfabric.fabric.parsers._nxos_ports import Policies, QosPolicy, Queuing, interface_ports
from tensorfabric.fabric.parsers._read import Reading, bare, config_lines, markers, tail_open

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "nxos"
NAME = "NX-OS"
SUFFIXES = (".nxos",)
EXPECTED = "NX-OS QoS statements (class-map type qos, policy-map type network-qos/queuing, system qos, interface)"
MARKERS = markers(
    ("class-map type qos|queuing|network-qos", r"^\s*class-map type (?:qos|queuing|network-qos)\b"),
    ("policy-map type network-qos", r"^\s*policy-map type network-qos\b"),
    ("policy-map type queuing", r"^\s*policy-map type queuing\b"),
    ("policy-map type qos", r"^\s*policy-map type qos\b"),
    ("class type queuing|network-qos", r"^\s*class type (?:queuing|network-qos)\b"),
    ("pause pfc-cos / no-drop", r"^\s*pause (?:pfc-cos|no-drop|buffer-size)\b"),
    ("set qos-group", r"^\s*set qos-group\b"),
    ("match qos-group", r"^\s*match qos-group\b"),
    ("system qos", r"^\s*system qos\b"),
    ("service-policy type", r"^\s*service-policy type (?:qos|queuing|network-qos)\b"),
    ("priority-flow-control mode", r"^\s*priority-flow-control mode\b"),
    ("priority-flow-control watch-dog", r"^\s*priority-flow-control (?:watch-dog|auto-restore)"),
    ("priority level", r"^\s*priority level \d"),
    ("random-detect minimum-threshold", r"^\s*random-detect minimum-threshold\b"),
    ("qos map cos-to-queue", r"^\s*qos map cos-to-queue\b"),
    ("hardware profile pfc", r"^\s*hardware profile pfc\b"),
    ("NX-OS prompt mode", r"\(config-(?:pmap|cmap|sys-qos)"),
)
_UNITS = {"bytes": 1, "kbytes": 1000, "mbytes": 1_000_000}
_QUEUE_CLASS = re.compile(r"^c-out-(?:8q-)?q([0-7]|-default)$")
_NQ_CLASS = re.compile(r"^c-(?:8q-)?nq([0-7]|-default)$")


@dataclass
class _State:
    r: Reading
    hostname: str | None = None
    classes: dict[str, tuple[set[int], set[int]]] = field(default_factory=dict)  # name -> (dscps, coses)
    qos_policies: dict[str, QosPolicy] = field(default_factory=dict)
    queuing: dict[str, Queuing] = field(default_factory=dict)
    pfc_cos: set[int] = field(default_factory=set)
    nq_mtu: int | None = None
    headroom: Headroom | None = None
    cos_to_queue: dict[int, int] = field(default_factory=dict)
    system_qos: tuple[str, int] | None = None
    system_queuing: tuple[str, int] | None = None
    wd_on: bool | None = None
    wd_interval: float | None = None
    wd_shutdown: float | None = None
    wd_restore: float | None = None
    class_mtu: dict[int, int] = field(default_factory=dict)
    queue_classes: dict[str, int] = field(default_factory=dict)
    nq_classes: dict[str, int] = field(default_factory=dict)
    conflicts: dict[int, set[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _threshold(words: list[str], key: str, where: Where) -> int:
    i = words.index(key) if key in words else len(words)
    if i + 2 >= len(words) or words[i + 2] not in _UNITS:
        raise where.error(f"random-detect needs '{key} N bytes|kbytes|mbytes'")
    return round(parse_float(words[i + 1], where, what=key) * _UNITS[words[i + 2]])


def _queue(name: str, where: Where, st: _State) -> int:
    if name == "class-default":
        return 0
    if name in st.queue_classes:
        return st.queue_classes[name]
    match = _QUEUE_CLASS.match(name)
    if match is None:
        raise where.error(f"queuing class {name!r} is neither c-out-8q-q0..7, class-default nor a class-map type "
                          "queuing defined above")
    return 0 if match.group(1) == "-default" else int(match.group(1))


def _nq_group(name: str, st: _State) -> int | None:
    if name == "class-default":
        return 0
    if name in st.nq_classes:
        return st.nq_classes[name]
    match = _NQ_CLASS.match(name)
    if match is None:
        return None
    return 0 if match.group(1) == "-default" else int(match.group(1))


def _qos_policy(block: Block, source: str, st: _State) -> QosPolicy:
    r = st.r
    dscp: dict[int, int] = {}
    policy = QosPolicy(dscp, False, False, True)
    for cls in block.children:
        if cls.words[0] != "class" or len(cls.words) < 2:
            continue
        r.use(cls.line)
        if cls.words[-1] == "class-default":
            for action in cls.children:
                r.use(action.line)
            continue  # everything no class above matched: the default group, not a DSCP list
        members = st.classes.get(cls.words[-1])
        if members is None:
            policy.complete = False
            r.warn(cls.line, f"class {cls.words[-1]!r} is not defined by a class-map type qos in this text; the "
                             "policy's DSCP map is left unknown")
            continue
        for action in cls.children:
            if action.words[:2] == ["set", "qos-group"] and len(action.words) == 3:
                with r.statement(action.line):
                    group = parse_int(action.words[2], action.where(source), what="qos-group", lo=0, hi=7)
                    r.use(action.line)
                    for d in members[0]:
                        if d in dscp and dscp[d] != group:
                            st.conflicts.setdefault(d, {dscp[d]}).add(group)
                        dscp.setdefault(d, group)  # classes match in order: the first one wins
                    policy.uses_dscp |= bool(members[0])
                    policy.uses_cos |= bool(members[1])
    return policy


def _network_qos(block: Block, source: str, st: _State) -> None:
    r = st.r
    for cls in block.children:
        nq = _nq_group(cls.words[-1], st) if cls.words[:1] == ["class"] else None
        if nq is None:
            continue
        r.use(cls.line)
        for line in cls.children:
            lw, lwhere = line.words, line.where(source)
            with r.statement(line.line):
                if lw[0] == "mtu" and len(lw) == 2:
                    st.class_mtu[nq] = parse_int(lw[1], lwhere, what="mtu", lo=68, hi=65535)
                elif lw[:2] == ["pause", "no-drop"]:
                    st.pfc_cos.add(nq)
                elif lw[:2] == ["pause", "pfc-cos"] and len(lw) >= 3:
                    # NX-OS lists several classes of service separated by spaces: `pause pfc-cos 3 4`
                    st.pfc_cos.update(parse_priorities(",".join(lw[2:]), lwhere, what="pfc-cos"))
                elif lw[:2] == ["pause", "buffer-size"] and len(lw) == 7:
                    size = parse_int(lw[2], lwhere, what="buffer-size", lo=0)
                    pause = parse_int(lw[4], lwhere, what="pause-threshold", lo=0, hi=size)
                    resume = parse_int(lw[6], lwhere, what="resume-threshold", lo=0)
                    if resume > pause:
                        raise lwhere.error(f"resume-threshold {resume} lies above pause-threshold {pause}")
                    st.headroom = Headroom(size - pause, pause, size, hysteresis_bytes=pause - resume)
                else:
                    continue
                r.use(line.line)


def _queuing(block: Block, source: str, st: _State, q: Queuing) -> None:
    r = st.r
    for cls in block.children:
        if cls.words[:3] != ["class", "type", "queuing"] or len(cls.words) != 4:
            continue
        try:
            queue = _queue(cls.words[3], cls.where(source), st)
        except ParseError as exc:
            r.warn(cls.line, bare(exc) + "; the policy's scheduling and ECN are left unknown")
            q.complete = False
            continue
        r.use(cls.line)
        for line in cls.children:
            lw, lwhere = line.words, line.where(source)
            with r.statement(line.line):
                if lw[:2] == ["priority", "level"] or lw == ["priority"]:
                    q.strict.add(queue)
                elif lw[:3] == ["bandwidth", "remaining", "percent"] and len(lw) == 4:
                    q.weights[queue] = parse_int(lw[3], lwhere, what="bandwidth remaining percent", lo=0, hi=100)
                elif lw[:2] == ["bandwidth", "percent"] and len(lw) == 3:
                    q.weights[queue] = parse_int(lw[2], lwhere, what="bandwidth percent", lo=0, hi=100)
                elif lw[0] == "random-detect" and "minimum-threshold" in lw:
                    prob = 100.0
                    if "drop-probability" in lw and lw.index("drop-probability") + 1 < len(lw):
                        prob = parse_float(lw[lw.index("drop-probability") + 1], lwhere, what="drop-probability")
                    q.ecn[queue] = EcnProfile(_threshold(lw, "minimum-threshold", lwhere),
                                              _threshold(lw, "maximum-threshold", lwhere), prob, "ecn" in lw)
                else:
                    continue
                r.use(line.line)


def _class_map(block: Block, source: str, st: _State) -> None:
    r, w = st.r, block.words
    if w[2] == "qos":
        dscps: set[int] = set()
        coses: set[int] = set()
        for line in block.children:
            lw, lwhere = line.words, line.where(source)
            with r.statement(line.line):
                if lw[:2] == ["match", "dscp"] and len(lw) >= 3:
                    # "match dscp 26" or "match dscp 24,26" or "match dscp 24 26" (IOS-XE spelling)
                    dscps |= parse_priorities(",".join(lw[2:]), lwhere, what="dscp", hi=63)
                elif lw[:2] == ["match", "cos"] and len(lw) >= 3:
                    coses |= parse_priorities(",".join(lw[2:]), lwhere, what="cos")
                else:
                    continue
                r.use(line.line)
        st.classes[w[-1]] = (dscps, coses)
        r.use(block.line)
    elif w[2] in ("queuing", "network-qos"):
        for line in block.children:
            lw = line.words
            if lw[:2] == ["match", "qos-group"] and len(lw) == 3:
                with r.statement(line.line):
                    group = parse_int(lw[2], line.where(source), what="qos-group", lo=0, hi=7)
                    (st.queue_classes if w[2] == "queuing" else st.nq_classes)[w[-1]] = group
                    r.use(line.line)
                    r.use(block.line)


def _top(block: Block, source: str, st: _State, ports: list[tuple[Block, list[str]]]) -> None:
    r = st.r
    w, where = block.words, block.where(source)
    if w[0] == "hostname" and len(w) == 2:
        st.hostname = w[1]
        r.use(block.line)
    elif w[:2] == ["class-map", "type"] and len(w) >= 4:
        _class_map(block, source, st)
    elif w[:4] == ["hardware", "profile", "pfc", "mmu"]:
        st.notes.append(f"'{block.text}' sizes the shared PFC buffer; it is not checked per port")
        r.use(block.line)
    elif w[:2] == ["policy-map", "type"] and len(w) == 4:
        kind, name = w[2], w[3]
        if kind == "qos":
            st.qos_policies[name] = _qos_policy(block, source, st)
        elif kind == "network-qos":
            _network_qos(block, source, st)
        elif kind == "queuing":
            _queuing(block, source, st, st.queuing.setdefault(name, Queuing()))
        else:
            return  # control-plane and other policy types carry no lossless setting
        r.use(block.line)
    elif w[:2] == ["system", "qos"]:
        for line in block.children:
            lw = line.words
            if lw[:3] == ["service-policy", "type", "qos"]:
                st.system_qos = (lw[-1], line.line)
            elif lw[:3] == ["service-policy", "type", "queuing"] and "output" in lw:
                st.system_queuing = (lw[-1], line.line)
            elif lw[:3] != ["service-policy", "type", "network-qos"]:
                continue
            r.use(line.line)
        r.use(block.line)
    elif w[:3] == ["qos", "map", "cos-to-queue"] and len(w) == 6 and w[4] == "to":
        st.cos_to_queue[parse_int(w[3], where, what="cos", lo=0, hi=7)] = parse_int(w[5], where, what="queue", lo=0,
                                                                                    hi=7)
    elif w[:2] == ["priority-flow-control", "watch-dog-interval"] and len(w) == 3:
        st.wd_on = w[2] == "on"
    elif w[:3] == ["priority-flow-control", "watch-dog", "interval"] and len(w) == 4:
        st.wd_interval = parse_float(w[3], where, what="watch-dog interval")
    elif w[:3] == ["priority-flow-control", "watch-dog", "shutdown-multiplier"] and len(w) == 4:
        st.wd_shutdown = parse_float(w[3], where, what="shutdown-multiplier")
    elif w[:3] == ["priority-flow-control", "auto-restore", "multiplier"] and len(w) == 4:
        st.wd_restore = parse_float(w[3], where, what="auto-restore multiplier")
    elif w[0] == "interface" and len(w) >= 2:
        ports.append((block, expand_interfaces(" ".join(w[1:]), where)))
    else:
        return
    if w[0] in ("qos", "priority-flow-control", "interface"):
        r.use(block.line)


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    st = _State(r)
    iface_blocks: list[tuple[Block, list[str]]] = []
    lines = config_lines(r)
    roots = block_tree(lines)
    if len(roots) > 1 and tail_open(lines) and roots[-1].children and roots[-1].words[0] in ("class-map", "policy-map"):
        # The paste stops inside this block: what it lists may be cut short, and a short DSCP or PFC list
        # would read as a deviation the device does not have. Interface and system lines stand on their own, and
        # a paste of one block alone is what its author meant to show.
        last = roots.pop()
        r.warn(last.line, f"the text ends inside '{last.text[:60]}' without a closing line; it may be cut short, so "
                          "it is not used")
    for block in roots:
        with r.statement(block.line):
            _top(block, source, st, iface_blocks)
    r.unread_under(roots)

    # A whole config (hostname and interfaces) shows every policy it has: a service-policy naming a missing one is
    # ignored by the switch, which is a defect of the config, not a part of it left out of the paste.
    policies = Policies(r, st.qos_policies, st.queuing, whole=st.hostname is not None and bool(iface_blocks))
    # The MTU that matters is the lossless system class's; without one, the default class's.
    lossless_mtus = [m for g, m in st.class_mtu.items() if g in st.pfc_cos]
    st.nq_mtu = min(lossless_mtus) if lossless_mtus else st.class_mtu.get(0, next(iter(st.class_mtu.values()), None))
    interval = st.wd_interval or 100.0
    timers = Watchdog(bool(st.wd_on), detection_ms=interval * (st.wd_shutdown or 1.0),
                      restoration_ms=interval * (st.wd_restore or 1.0), action="drop", polling_ms=interval)
    pfc = frozenset(st.pfc_cos) if st.pfc_cos else None
    system_dscp, system_trust = policies.classify(st.system_qos)
    system_q = policies.queuing(st.system_queuing)
    ports = [port for block, names in iface_blocks for port in interface_ports(block, names, policies, pfc, timers)]
    return Deployed(
        device=device or st.hostname or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=system_dscp or {}, priority_to_queue=dict(st.cos_to_queue), pfc_priorities=pfc,
        trust=system_trust, mtu=st.nq_mtu,
        ecn=dict(system_q.ecn) if system_q else None,
        strict_queues=frozenset(system_q.strict) if system_q else None,
        queue_weights=dict(system_q.weights) if system_q else {},
        watchdog=timers if st.wd_on is not None else None,
        headroom=dict.fromkeys(st.pfc_cos, st.headroom) if st.headroom else {},
        ports=tuple(ports),
        dscp_conflicts={d: frozenset(g) for d, g in st.conflicts.items()},
        complete=st.hostname is not None and bool(iface_blocks),
        notes=tuple(st.notes),
        defects=tuple(policies.defects.values()),
    )
