"""Juniper Junos ``class-of-service`` (QFX / PTX brace configuration) into a :class:`Deployed`.

Junos separates the three things other dialects fuse: a *forwarding class* picks an egress ``queue-num``; a
``no-loss`` class carries its PFC on ``pfc-priority`` (the 802.1p value in the pause frame), which need not
equal the queue number (``class NO-LOSS queue-num 4 no-loss pfc-priority 3`` is the Juniper AI-DC recipe).
So a lossless class is modelled as priority = its PFC priority, served by its queue; a lossy class as priority
= its queue number, or 8 + queue when that number is already a PFC priority (an internal class, not a PCP).

Read: ``forwarding-classes`` (``class FC queue-num Q [no-loss] [pfc-priority P]`` and the older ``queue Q FC``),
``classifiers dscp|ieee-802.1``, ``congestion-notification-profile`` (input DSCP / 802.1p code points with
``pfc``, ``output ... flow-control-queue``, ``pfc-watchdog`` with ``poll-interval`` ms, ``detection`` polls,
``recovery`` ms and ``watchdog-action``, ``cable-length``), ``drop-profiles`` (fill-level
interpolation, in percent of the queue buffer), ``schedulers`` (``priority strict-high``, ``transmit-rate
percent``, ``explicit-congestion-notification``), ``scheduler-maps`` and ``class-of-service interfaces``
(``et-*`` wildcards apply to every port), plus ``interfaces`` (MTU, ``family inet`` = routed) and ``host-name``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric.fabric.deployed import Deployed, EcnProfile, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._braces import Stanza, brace_tree
from tensorfabric.fabric.parsers._common import Where, device_from_source, parse_float, parse_int

__all__ = ["FORMAT", "SUFFIXES", "parse", "sniff"]

FORMAT = "junos"
SUFFIXES = (".junos",)
_BITS6 = re.compile(r"^[01]{6}$")
_BITS3 = re.compile(r"^[01]{3}$")
_AF = re.compile(r"^af([1-4])([1-3])$")
_CS = re.compile(r"^cs([0-7])$")


def sniff(text: str) -> bool:
    head = text[:200_000]
    return "class-of-service" in head and "{" in head and "forwarding-class" in head


def _dscp(word: str, where: Where) -> int:
    """A DSCP code point: six bits (``011010``) or a standard alias (``af31``, ``cs6``, ``ef``, ``be``)."""
    w = word.lower()
    if _BITS6.match(w):
        return int(w, 2)
    if w == "ef":
        return 46
    if w == "be":
        return 0
    if (m := _AF.match(w)) is not None:
        return 8 * int(m.group(1)) + 2 * int(m.group(2))
    if (m := _CS.match(w)) is not None:
        return 8 * int(m.group(1))
    raise where.error(f"DSCP code point {word!r} must be six bits such as 011010 or an alias such as af31, cs6, ef")


def _pcp(word: str, where: Where) -> int:
    if not _BITS3.match(word):
        raise where.error(f"IEEE 802.1p code point {word!r} must be three bits such as 011")
    return int(word, 2)


@dataclass
class _Class:
    queue: int
    no_loss: bool = False
    pfc_priority: int | None = None


@dataclass
class _Cnp:
    dscps: set[int] = field(default_factory=set)
    pcps: set[int] = field(default_factory=set)
    flow_queues: dict[int, set[int]] = field(default_factory=dict)
    watchdog: bool = False
    poll_ms: float | None = None
    detection_polls: int | None = None
    recovery_ms: float | None = None
    action: str | None = None
    cable_m: float | None = None


@dataclass
class _Sched:
    strict: bool = False
    percent: int | None = None
    ecn: bool = False
    drop_profile: str | None = None


def _value(node: Stanza, i: int, where: Where, what: str) -> str:
    if len(node.words) <= i:
        raise where.error(f"{what} needs a value")
    return node.words[i]


def _classes(cos: Stanza, source: str) -> dict[str, _Class]:
    out: dict[str, _Class] = {}
    fcs = cos.child("forwarding-classes")
    for node in fcs.children if fcs else []:
        w, where = node.words, node.where(source)
        if w[0] == "class" and len(w) >= 2:
            cls = out.setdefault(w[1], _Class(queue=0))
            rest = w[2:]
            for i, word in enumerate(rest):
                if word == "queue-num":
                    cls.queue = parse_int(_value(node, i + 3, where, "queue-num"), where, what="queue-num", lo=0, hi=15)
                elif word == "no-loss":
                    cls.no_loss = True
                elif word == "pfc-priority":
                    cls.pfc_priority = parse_int(_value(node, i + 3, where, "pfc-priority"), where,
                                                 what="pfc-priority", lo=0, hi=7)
        elif w[0] == "queue" and len(w) >= 3:  # older form: queue 3 fcoe;
            out[w[2]] = _Class(queue=parse_int(w[1], where, what="queue", lo=0, hi=15), no_loss="no-loss" in w)
    return out


def _classifiers(cos: Stanza, source: str) -> dict[str, tuple[str, dict[int, set[str]]]]:
    """name -> (kind, code point -> forwarding classes naming it)."""
    out: dict[str, tuple[str, dict[int, set[str]]]] = {}
    node = cos.child("classifiers")
    for table in node.children if node else []:
        if len(table.words) < 2 or table.words[0] not in ("dscp", "dscp-ipv6", "ieee-802.1"):
            continue
        kind = "pcp" if table.words[0] == "ieee-802.1" else "dscp"
        points: dict[int, set[str]] = {}
        for fc in table.all("forwarding-class"):
            if len(fc.words) < 2:
                raise fc.where(source).error("forwarding-class needs a name")
            for lp in fc.children:
                where = lp.where(source)
                if "code-points" not in lp.words:
                    continue
                for word in lp.words[lp.words.index("code-points") + 1:]:
                    point = _dscp(word, where) if kind == "dscp" else _pcp(word, where)
                    points.setdefault(point, set()).add(fc.words[1])
        out[table.words[1]] = (kind, points)
    return out


def _cnps(cos: Stanza, source: str) -> dict[str, _Cnp]:
    out: dict[str, _Cnp] = {}
    for prof in cos.all("congestion-notification-profile"):
        for node in prof.children if len(prof.words) == 1 else [prof]:
            name = node.words[1] if len(prof.words) > 1 else node.words[0]
            body = node.children
            cnp = out.setdefault(name, _Cnp())
            for part in body:
                where = part.where(source)
                if part.words[0] == "pfc-watchdog":
                    cnp.watchdog = True
                    _watchdog_knobs(part, source, cnp)
                elif part.words[0] == "input":
                    cnp.cable_m = _cable(part, where, cnp.cable_m)
                    for table in part.children:
                        for cp in table.all("code-point"):
                            if not any(c.words[:1] == ["pfc"] for c in cp.children) and "pfc" not in cp.words:
                                continue
                            point = _value(cp, 1, cp.where(source), "code-point")
                            if table.words[0] == "dscp":
                                cnp.dscps.add(_dscp(point, cp.where(source)))
                            elif table.words[0] == "ieee-802.1":
                                cnp.pcps.add(_pcp(point, cp.where(source)))
                elif part.words[0] == "output":
                    for table in part.children:
                        for cp in table.all("code-point"):
                            prio = _pcp(_value(cp, 1, cp.where(source), "code-point"), cp.where(source))
                            for fq in cp.all("flow-control-queue"):
                                cnp.flow_queues.setdefault(prio, set()).update(
                                    parse_int(q, fq.where(source), what="flow-control-queue", lo=0, hi=15)
                                    for q in fq.words[1:])
                elif part.words[0] == "cable-length":
                    cnp.cable_m = parse_float(_value(part, 1, where, "cable-length"), where, what="cable-length")
    return out


def _watchdog_knobs(node: Stanza, source: str, cnp: _Cnp) -> None:
    """``poll-interval`` (ms), ``detection`` (poll intervals), ``recovery`` (ms), ``watchdog-action``."""
    for knob in node.children:
        where = knob.where(source)
        value = _value(knob, 1, where, knob.words[0])
        if knob.words[0] == "poll-interval":
            cnp.poll_ms = parse_float(value, where, what="poll-interval")
        elif knob.words[0] == "detection":
            cnp.detection_polls = parse_int(value, where, what="detection", lo=1, hi=1000)
        elif knob.words[0] == "recovery":
            cnp.recovery_ms = parse_float(value, where, what="recovery")
        elif knob.words[0] == "watchdog-action":
            cnp.action = value


def _cable(node: Stanza, where: Where, current: float | None) -> float | None:
    found = node.child("cable-length")
    if found is None:
        return current
    return parse_float(_value(found, 1, where, "cable-length"), found.where(where.source), what="cable-length")


def _schedulers(cos: Stanza, source: str) -> tuple[dict[str, _Sched], dict[str, dict[str, str]]]:
    scheds: dict[str, _Sched] = {}
    node = cos.child("schedulers")
    for s in node.children if node else []:
        sched = scheds.setdefault(s.words[0], _Sched())
        for line in s.children:
            w, where = line.words, line.where(source)
            if w[:2] == ["priority", "strict-high"]:
                sched.strict = True
            elif w[:2] == ["transmit-rate", "percent"]:
                sched.percent = parse_int(_value(line, 2, where, "transmit-rate percent"), where,
                                          what="transmit-rate percent", lo=0, hi=100)
            elif w[0] == "explicit-congestion-notification":
                sched.ecn = True
            elif w[0] == "drop-profile-map" and "drop-profile" in w[1:]:
                sched.drop_profile = _value(line, w.index("drop-profile", 1) + 1, where, "drop-profile")
    maps: dict[str, dict[str, str]] = {}
    node = cos.child("scheduler-maps")
    for m in node.children if node else []:
        entry = maps.setdefault(m.words[0], {})
        for line in m.all("forwarding-class"):
            w = line.words
            if len(w) == 4 and w[2] == "scheduler":
                entry[w[1]] = w[3]
    return scheds, maps


def _drop_profiles(cos: Stanza, source: str) -> dict[str, tuple[float, float, float]]:
    out: dict[str, tuple[float, float, float]] = {}
    node = cos.child("drop-profiles")
    for dp in node.children if node else []:
        interp = dp.child("interpolate")
        if interp is None:
            continue
        fill = interp.child("fill-level")
        prob = interp.child("drop-probability")
        if fill is None or prob is None or len(fill.words) < 3 or len(prob.words) < 3:
            raise dp.where(source).error("interpolate needs 'fill-level [ LOW HIGH ]' and 'drop-probability [ 0 P ]'")
        where = fill.where(source)
        out[dp.words[0]] = (parse_float(fill.words[1], where, what="fill-level"),
                            parse_float(fill.words[-1], where, what="fill-level"),
                            parse_float(prob.words[-1], prob.where(source), what="drop-probability"))
    return out


def _interfaces(root: list[Stanza], source: str) -> dict[str, tuple[int | None, bool]]:
    """Top-level ``interfaces``: name -> (mtu, routed)."""
    out: dict[str, tuple[int | None, bool]] = {}
    for top in root:
        if top.words != ["interfaces"]:
            continue
        for ifd in top.children:
            mtu_node = ifd.child("mtu")
            mtu = parse_int(_value(mtu_node, 1, mtu_node.where(source), "mtu"), mtu_node.where(source), what="mtu",
                            lo=68, hi=65535) if mtu_node else None
            routed = any(u.child("family", "inet") or u.child("family", "inet6") for u in ifd.all("unit"))
            out[ifd.words[0]] = (mtu, routed)
    return out


def _hostname(root: list[Stanza]) -> str | None:
    for top in root:
        if top.words == ["system"]:
            found = top.child("host-name")
            if found is not None and len(found.words) == 2:
                return found.words[1]
    return None


def _watchdog(cnp: _Cnp | None) -> Watchdog | None:
    if cnp is None:
        return None
    if not cnp.watchdog:
        return Watchdog(False)
    if cnp.detection_polls is None and cnp.recovery_ms is None and cnp.poll_ms is None:
        return Watchdog(True)  # Junos defaults (100 ms polls, 2 polls, 200 ms recovery): not in the config
    poll = cnp.poll_ms if cnp.poll_ms is not None else 100.0
    detection = poll * (cnp.detection_polls if cnp.detection_polls is not None else 2)
    return Watchdog(True, detection, cnp.recovery_ms if cnp.recovery_ms is not None else 200.0,
                    cnp.action, poll)


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    root = brace_tree(text, source)
    cos = next((n for n in root if n.words == ["class-of-service"]), None)
    if cos is None:
        raise Where(source).error("no 'class-of-service { ... }' hierarchy found")
    classes = _classes(cos, source)
    classifiers = _classifiers(cos, source)
    cnps = _cnps(cos, source)
    scheds, smaps = _schedulers(cos, source)
    drops = _drop_profiles(cos, source)
    lossless = {c.pfc_priority if c.pfc_priority is not None else c.queue for c in classes.values() if c.no_loss}

    def priority(fc: str, where: Where) -> int:
        cls = classes.get(fc)
        if cls is None:
            raise where.error(f"forwarding class {fc!r} is not defined under forwarding-classes")
        if cls.no_loss:
            return cls.pfc_priority if cls.pfc_priority is not None else cls.queue
        return cls.queue if cls.queue not in lossless else 8 + cls.queue

    to_queue = {priority(name, Where(source)): c.queue for name, c in classes.items()}
    tables: dict[str, tuple[Trust, dict[int, int], dict[int, frozenset[int]]]] = {}
    for name, (kind, points) in classifiers.items():
        mapping: dict[int, int] = {}
        conflicts: dict[int, frozenset[int]] = {}
        for point, fcs in points.items():
            prios = frozenset(priority(fc, Where(source, None, name)) for fc in fcs)
            mapping[point] = min(prios)
            if len(prios) > 1:
                conflicts[point] = prios
        tables[name] = ("dscp" if kind == "dscp" else "pcp", mapping, conflicts)

    def pfc_of(cnp: _Cnp) -> frozenset[int]:
        prios = set(cnp.pcps) | set(cnp.flow_queues)
        if cnp.dscps:
            prios |= lossless  # DSCP-based PFC pauses on the no-loss class's pfc-priority
        return frozenset(prios)

    def queues_of(smap: str | None, where: Where) -> tuple[frozenset[int], dict[int, int], dict[int, EcnProfile]]:
        strict: set[int] = set()
        weights: dict[int, int] = {}
        ecn: dict[int, EcnProfile] = {}
        if smap is None:
            return frozenset(), weights, ecn
        if smap not in smaps:
            raise where.error(f"scheduler-map {smap!r} is not defined")
        for fc, sname in smaps[smap].items():
            queue = classes[fc].queue if fc in classes else None
            sched = scheds.get(sname)
            if queue is None or sched is None:
                raise where.error(f"scheduler-map {smap!r} names an undefined class or scheduler ({fc}, {sname})")
            if sched.strict:
                strict.add(queue)
            if sched.percent is not None:
                weights[queue] = sched.percent
            if sched.drop_profile is not None and sched.drop_profile in drops:
                lo, hi, prob = drops[sched.drop_profile]
                ecn[queue] = EcnProfile(round(lo), round(hi), prob, sched.ecn, unit="percent")
        return frozenset(strict), weights, ecn

    ifaces = _interfaces(root, source)
    ports: list[PortQos] = []
    default: PortQos | None = None
    seen_names: set[str] = set()
    cos_ifaces = cos.child("interfaces")
    for node in cos_ifaces.children if cos_ifaces else []:
        where = node.where(source)
        name = node.words[0]
        cnp_ref = node.child("congestion-notification-profile")
        smap_ref = node.child("scheduler-map")
        cnp = None
        if cnp_ref is not None:
            cnp = cnps.get(_value(cnp_ref, 1, where, "congestion-notification-profile"))
            if cnp is None:
                raise where.error(f"congestion-notification-profile {cnp_ref.words[1]!r} is not defined")
        strict, weights, ecn = queues_of(_value(smap_ref, 1, where, "scheduler-map") if smap_ref else None, where)
        table = None
        for unit in node.all("unit"):
            cl = unit.child("classifiers")
            for ref in cl.children if cl else []:
                if len(ref.words) == 2 and ref.words[1] in tables:
                    table = tables[ref.words[1]]
                elif len(ref.words) == 2 and ref.words[1] != "default":
                    raise ref.where(source).error(f"classifier {ref.words[1]!r} is not defined")
        mtu, routed = ifaces.get(name, (None, None))
        port = PortQos(
            name=name, pfc_priorities=pfc_of(cnp) if cnp else (frozenset() if cnp_ref is None else None),
            trust=table[0] if table else None, dscp_to_priority=table[1] if table and table[0] == "dscp" else None,
            strict_queues=strict if smap_ref else None, queue_weights=weights if smap_ref else None,
            ecn=ecn if smap_ref else None, mtu=mtu, routed=routed,
            cable_length_m=cnp.cable_m if cnp else None,
            watchdog=_watchdog(cnp),
        )
        if "*" in name:
            default = port
        else:
            ports.append(port)
            seen_names.add(name)
    for name, (mtu, routed) in ifaces.items():
        if name not in seen_names and (name.startswith(("et-", "xe-", "ge-")) and (mtu or routed)):
            ports.append(PortQos(name=name, mtu=mtu, routed=routed))
    conflicts = {d: p for t in tables.values() for d, p in t[2].items()}
    d = default or PortQos(name="*")
    dscp_tables = [t[1] for t in tables.values() if t[0] == "dscp"]
    return Deployed(
        device=device or _hostname(root) or device_from_source(source), kind="switch", format=FORMAT,
        source=source, dscp_to_priority=d.dscp_to_priority or (dscp_tables[0] if len(dscp_tables) == 1 else {}),
        priority_to_queue=to_queue, pfc_priorities=d.pfc_priorities if default else None,
        trust=d.trust, ecn=dict(d.ecn) if d.ecn is not None else None, strict_queues=d.strict_queues,
        queue_weights=dict(d.queue_weights or {}),
        watchdog=d.watchdog, cable_length_m=d.cable_length_m, ports=tuple(ports), dscp_conflicts=conflicts,
        complete=_hostname(root) is not None,
        notes=("ECN thresholds are Junos fill levels in percent of the queue buffer",) if drops else (),
    )
