"""Juniper Junos ``class-of-service`` (QFX / PTX, brace or ``set`` form) into a :class:`Deployed`.

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

The ``set`` form (``show configuration | display set``, or commands typed at ``user@qfx#``, after an optional
``[edit class-of-service]`` banner that prefixes them) is placed into the same tree the brace form gives, so both
are read by one model: ``set class-of-service classifiers dscp C forwarding-class FC loss-priority low code-points
011010`` is ``classifiers { dscp C { forwarding-class FC { loss-priority low code-points 011010; } } }``. Lines
that split one brace statement (``class NO-LOSS queue-num 3`` and ``class NO-LOSS no-loss``; ``interpolate
fill-level 30 drop-probability 0`` and ``fill-level 100 drop-probability 100``) are joined.

Operators often paste the children of ``[edit class-of-service]`` without the wrapper (``forwarding-classes { }``
at the top): they are read as that hierarchy. A name that is referenced but not defined in the text (a classifier's
forwarding class, a scheduler map, a profile) leaves what depends on it unknown, with a warning: the definition may
simply be outside the excerpt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import Deployed, EcnProfile, PortQos, Trust
from tensorfabric.fabric.parsers import _junos_cos as cos_sections
from tensorfabric.fabric.parsers._braces import Stanza, brace_tree
from tensorfabric.fabric.parsers._common import Where, device_from_source
from tensorfabric.fabric.parsers._read import Reading, bare, config_lines, markers

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "junos"
NAME = "Junos"
SUFFIXES = (".junos",)
EXPECTED = ("a Junos class-of-service hierarchy (forwarding-classes, classifiers, congestion-notification-profile, "
            "schedulers, interfaces) in brace or 'set class-of-service ...' form")
MARKERS = markers(
    ("class-of-service", r"^\s*(?:set )?class-of-service\b"),
    ("forwarding-classes", r"^\s*forwarding-classes\s*\{"),
    ("forwarding-class ... queue-num", r"\bqueue-num \d"),
    ("no-loss / pfc-priority", r"\b(?:no-loss|pfc-priority \d)"),
    ("congestion-notification-profile", r"\bcongestion-notification-profile\b"),
    ("code-points", r"\bcode-points? [01]{3,6}\b"),
    ("classifiers", r"^\s*classifiers\s*\{"),
    ("scheduler-map(s)", r"\bscheduler-maps?\b"),
    ("drop-profile(s)", r"\bdrop-profiles?\b"),
    ("priority strict-high", r"\bpriority strict-high\b"),
    ("explicit-congestion-notification", r"\bexplicit-congestion-notification\b"),
    ("brace line", r"^\s*[\w.*/-]+(?: [\w.*/-]+)* \{\s*$"),
    ("set class-of-service / [edit class-of-service]", r"^\s*(?:\{\S+\})?\[edit class-of-service\b"),
)
_COS_CHILDREN = frozenset({"forwarding-classes", "classifiers", "congestion-notification-profile", "schedulers",
                           "scheduler-maps", "drop-profiles", "shared-buffer", "rewrite-rules"})
# Statement words of the class-of-service grammar this reader models: a stanza headed by one is "used".
_MODELLED = frozenset({"class-of-service", "classifiers", "dscp", "dscp-ipv6", "ieee-802.1", "forwarding-class",
                       "loss-priority", "forwarding-classes", "class", "queue", "congestion-notification-profile",
                       "input", "output", "code-point", "pfc", "flow-control-queue", "pfc-watchdog", "poll-interval",
                       "detection", "recovery", "watchdog-action", "cable-length", "drop-profiles", "interpolate",
                       "fill-level", "drop-probability", "schedulers", "priority", "transmit-rate",
                       "explicit-congestion-notification", "drop-profile-map", "scheduler-maps", "interfaces",
                       "scheduler-map", "unit", "system", "host-name", "mtu", "family"})
_NAMED = frozenset({"drop-profiles", "schedulers", "scheduler-maps", "interfaces", "classifiers"})
_T = TypeVar("_T")
def _wrapped(roots: list[Stanza]) -> Stanza | None:
    """The ``class-of-service`` stanza, or one made up of its children pasted without the wrapper."""
    cos = next((n for n in roots if n.words == ["class-of-service"]), None)
    if cos is not None:
        return cos
    children = [n for n in roots if n.words[:1] and n.words[0] in _COS_CHILDREN]
    if not children:
        return None
    # A top-level "interfaces" holding congestion-notification or scheduler-map lines is class-of-service's.
    children += [n for n in roots if n.words == ["interfaces"] and any(
        c.child("congestion-notification-profile") or c.child("scheduler-map") or c.all("unit")
        and any(u.child("classifiers") for u in c.all("unit")) for c in n.children)]
    return Stanza(["class-of-service"], children[0].line, children)


def _mark(r: Reading, node: Stanza, parent: str = "") -> None:
    todo = [(node, parent)]
    while todo:
        current, above = todo.pop()
        if current.words and (current.words[0] in _MODELLED or above in _NAMED
                              or above == "congestion-notification-profile"):
            r.use(current.line)
            todo.extend((c, current.words[0]) for c in current.children)


def _section(r: Reading, cos: Stanza, name: str, fn: Callable[[Stanza, str], _T]) -> _T | None:
    node = cos.child(name)
    try:
        return fn(cos, r.source)
    except ParseError as exc:
        r.warn(exc.line or (node.line if node else cos.line), bare(exc) + f"; {name} is left unknown")
        return None


def _tree(r: Reading) -> list[Stanza]:
    """The stanzas of the text, brace and ``set`` lines alike, with what a cut paste lost left out (warned)."""
    lines = config_lines(r, dedent=False)
    # Commands typed at a Junos prompt ('user@qfx# set ...') are configuration too; config_lines keeps only those
    # typed at a NX-OS/EOS-style configuration prompt.
    typed = [(line.number, line.text) for line in r.content() if line.kind == "command"]
    statements, set_numbers = cos_sections.set_lines(sorted(lines + typed))
    tree = brace_tree([(n, t) for n, t in lines if n not in set_numbers], r.source)
    if statements:
        cos_sections.merge(tree.roots, cos_sections.set_tree(statements))
        for number in set_numbers:
            r.use(number)
    for number, message in tree.problems:
        r.warn(number, message)
    if len(tree.open_at_end) > 1:
        # The paste stops inside these blocks; the innermost ones may have lost lines that matter (a code point,
        # a no-loss class), so the block the cut runs through is left out.
        outer, cut = tree.open_at_end[0], tree.open_at_end[1]
        outer.children.remove(cut)
        r.warn(cut.line, f"the text ends inside '{' '.join(cut.words)[:60]}' without its closing brace; it may be "
                         "cut short, so it is not used")
    elif tree.open_at_end:
        only = tree.open_at_end[0]
        r.warn(only.line, f"the text ends inside '{' '.join(only.words)[:60]}' without its closing brace; read as far "
                          "as it goes")
    return tree.roots


_Table = tuple[Trust, dict[int, int], dict[int, frozenset[int]]]


@dataclass
class _Cos:
    """The sections of one class-of-service hierarchy, and what they resolve to per interface."""

    r: Reading
    cos: Stanza
    classes: dict[str, cos_sections.Class] = field(init=False)
    cnps: dict[str, cos_sections.Cnp] = field(init=False)
    scheds: dict[str, cos_sections.Sched] = field(init=False)
    smaps: dict[str, dict[str, str]] = field(init=False)
    drops: dict[str, tuple[float, float, float]] = field(init=False)
    lossless: set[int] = field(init=False)
    tables: dict[str, _Table] = field(init=False)

    def __post_init__(self) -> None:
        r, cos = self.r, self.cos
        self.classes = cos_sections.classes(cos, r)
        classifiers = cos_sections.classifiers(cos, r)
        self.cnps = _section(r, cos, "congestion-notification-profile", cos_sections.cnps) or {}
        self.scheds, self.smaps = _section(r, cos, "schedulers", cos_sections.schedulers) or ({}, {})
        self.drops = _section(r, cos, "drop-profiles", cos_sections.drop_profiles) or {}
        self.lossless = {c.pfc_priority if c.pfc_priority is not None else c.queue for c in self.classes.values()
                         if c.no_loss}
        self.tables = {}
        for name, (kind, points) in classifiers.items():
            mapping: dict[int, int] = {}
            conflicts: dict[int, frozenset[int]] = {}
            try:
                for point, fcs in points.items():
                    prios = frozenset(self.priority(fc, Where(r.source, None, name)) for fc in fcs)
                    mapping[point] = min(prios)
                    if len(prios) > 1:
                        conflicts[point] = prios
            except ParseError as exc:
                # A class defined outside the excerpt: which priority its code points get is unknown.
                r.warn(cos.line, bare(exc) + f"; classifier {name!r} is not used")
                continue
            self.tables[name] = ("dscp" if kind == "dscp" else "pcp", mapping, conflicts)

    def priority(self, fc: str, where: Where) -> int:
        cls = self.classes.get(fc)
        if cls is None:
            raise where.error(f"forwarding class {fc!r} is not defined under forwarding-classes")
        if cls.no_loss:
            return cls.pfc_priority if cls.pfc_priority is not None else cls.queue
        return cls.queue if cls.queue not in self.lossless else 8 + cls.queue

    def pfc_of(self, cnp: cos_sections.Cnp) -> frozenset[int]:
        prios = set(cnp.pcps) | set(cnp.flow_queues)
        if cnp.dscps:
            prios |= self.lossless  # DSCP-based PFC pauses on the no-loss class's pfc-priority
        return frozenset(prios)

    def queues_of(self, smap: str, where: Where) -> tuple[frozenset[int], dict[int, int], dict[int, EcnProfile]] | None:
        r = self.r
        strict: set[int] = set()
        weights: dict[int, int] = {}
        ecn: dict[int, EcnProfile] = {}
        if smap not in self.smaps:
            r.warn(where.line, f"scheduler-map {smap!r} is not defined in this text; scheduling and ECN unknown")
            return None
        for fc, sname in self.smaps[smap].items():
            queue = self.classes[fc].queue if fc in self.classes else None
            sched = self.scheds.get(sname)
            if queue is None or sched is None:
                r.warn(where.line, f"scheduler-map {smap!r} names a class or scheduler this text does not define "
                                   f"({fc}, {sname}); scheduling and ECN unknown")
                return None
            if sched.strict:
                strict.add(queue)
            if sched.percent is not None:
                weights[queue] = sched.percent
            if sched.drop_profile is not None and sched.drop_profile not in self.drops:
                r.warn(where.line, f"scheduler {sname!r} names drop-profile {sched.drop_profile!r}, which this text "
                                   "does not define; ECN unknown")
                return None
            if sched.drop_profile is not None:
                lo, hi, prob = self.drops[sched.drop_profile]
                ecn[queue] = EcnProfile(round(lo), round(hi), prob, sched.ecn, unit="percent")
        return frozenset(strict), weights, ecn

    def port(self, node: Stanza, ifaces: dict[str, tuple[int | None, bool]]) -> PortQos:
        """One ``class-of-service interfaces`` entry (``et-*`` included) as a port."""
        r, name = self.r, node.words[0]
        cnp_ref = node.child("congestion-notification-profile")
        smap_ref = node.child("scheduler-map")
        cnp = None
        cnp_known = True
        if cnp_ref is not None and len(cnp_ref.words) > 1:
            cnp = self.cnps.get(cnp_ref.words[1])
            if cnp is None:
                cnp_known = False
                r.warn(cnp_ref.line, f"congestion-notification-profile {cnp_ref.words[1]!r} is not defined in this "
                                     "text; PFC on this port is unknown")
        queued = self.queues_of(smap_ref.words[1], smap_ref.where(r.source)) if smap_ref and len(smap_ref.words) > 1 \
            else None
        table = None
        table_known = True
        for unit in node.all("unit"):
            cl = unit.child("classifiers")
            for ref in cl.children if cl else []:
                if len(ref.words) == 2 and ref.words[1] in self.tables:
                    table = self.tables[ref.words[1]]
                elif len(ref.words) == 2 and ref.words[1] != "default":
                    table_known = False
                    r.warn(ref.line, f"classifier {ref.words[1]!r} is not defined (or not read) in this text; "
                                     "classification unknown")
        mtu, routed = ifaces.get(name, (None, None))
        return PortQos(
            name=name,
            pfc_priorities=self.pfc_of(cnp) if cnp else (frozenset() if cnp_ref is None else None),
            trust=table[0] if table else None,
            dscp_to_priority=table[1] if table and table[0] == "dscp" and table_known else None,
            strict_queues=queued[0] if queued else None, queue_weights=queued[1] if queued else None,
            ecn=queued[2] if queued else None, mtu=mtu, routed=routed,
            cable_length_m=cnp.cable_m if cnp else None,
            watchdog=cos_sections.watchdog(cnp) if cnp_known else None,
        )


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    root = _tree(r)
    cos = _wrapped(root)
    if cos is None:
        return Deployed(device=device or device_from_source(source), kind="switch", format=FORMAT, source=source)
    _mark(r, cos)
    for top in root:
        if top.words == ["system"]:
            for child in top.all("host-name"):
                r.use(child.line)
    sections = _Cos(r, cos)
    to_queue = {sections.priority(name, Where(source)): c.queue for name, c in sections.classes.items()}
    ifaces: dict[str, tuple[int | None, bool]] = {}
    try:
        ifaces = cos_sections.interfaces(root, source)
    except ParseError as exc:
        r.warn(exc.line, bare(exc) + "; interface MTUs are left unknown")
    ports: list[PortQos] = []
    default: PortQos | None = None
    cos_ifaces = cos.child("interfaces")
    for node in cos_ifaces.children if cos_ifaces else []:
        port = sections.port(node, ifaces)
        if "*" in port.name:
            default = port
        else:
            ports.append(port)
    seen_names = {p.name for p in ports}
    for name, (mtu, routed) in ifaces.items():
        if name not in seen_names and (name.startswith(("et-", "xe-", "ge-")) and (mtu or routed)):
            ports.append(PortQos(name=name, mtu=mtu, routed=routed))
    tables = sections.tables
    conflicts = {d: p for t in tables.values() for d, p in t[2].items()}
    d = default or PortQos(name="*")
    dscp_tables = [t[1] for t in tables.values() if t[0] == "dscp"]
    hostname = cos_sections.hostname(root)
    return Deployed(
        device=device or hostname or device_from_source(source), kind="switch", format=FORMAT,
        source=source, dscp_to_priority=d.dscp_to_priority or (dscp_tables[0] if len(dscp_tables) == 1 else {}),
        priority_to_queue=to_queue, pfc_priorities=d.pfc_priorities if default else None,
        trust=d.trust, ecn=dict(d.ecn) if d.ecn is not None else None, strict_queues=d.strict_queues,
        queue_weights=dict(d.queue_weights or {}),
        watchdog=d.watchdog, cable_length_m=d.cable_length_m, ports=tuple(ports), dscp_conflicts=conflicts,
        complete=hostname is not None,
        notes=("ECN thresholds are Junos fill levels in percent of the queue buffer",) if sections.drops else (),
    )
