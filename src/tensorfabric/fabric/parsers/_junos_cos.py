"""The sections of a Junos ``class-of-service`` hierarchy, each read into plain records (for :mod:`.junos`).

Forwarding classes, classifiers, congestion-notification profiles (PFC and the watchdog), schedulers and their maps,
drop profiles, and the physical ``interfaces`` (MTU, ``family inet``). A malformed value raises ParseError with its
line; the caller turns that into a warning and leaves the section unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import Watchdog
from tensorfabric.fabric.parsers._braces import Stanza
from tensorfabric.fabric.parsers._common import Where, parse_float, parse_int
from tensorfabric.fabric.parsers._read import Reading, bare

__all__ = ["Class", "Cnp", "Sched", "classes", "classifiers", "cnps", "drop_profiles", "hostname", "interfaces",
           "merge", "schedulers", "set_lines", "set_tree", "value", "watchdog"]

_BITS6 = re.compile(r"^[01]{6}$")
_BITS3 = re.compile(r"^[01]{3}$")
_AF = re.compile(r"^af([1-4])([1-3])$")
_CS = re.compile(r"^cs([0-7])$")


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
class Class:
    queue: int
    no_loss: bool = False
    pfc_priority: int | None = None


@dataclass
class Cnp:
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
class Sched:
    strict: bool = False
    percent: int | None = None
    ecn: bool = False
    drop_profile: str | None = None


def value(node: Stanza, i: int, where: Where, what: str) -> str:
    if len(node.words) <= i:
        raise where.error(f"{what} needs a value")
    return node.words[i]


def classes(cos: Stanza, r: Reading) -> dict[str, Class]:
    out: dict[str, Class] = {}
    fcs = cos.child("forwarding-classes")
    for node in fcs.children if fcs else []:
        with r.statement(node.line):
            _class(node, r.source, out)
    return out


def _class(node: Stanza, source: str, out: dict[str, Class]) -> None:
    w, where = node.words, node.where(source)
    if w[0] == "class" and len(w) >= 2:
        cls = Class(queue=0)
        rest = w[2:]
        for i, word in enumerate(rest):
            if word == "queue-num":
                cls.queue = parse_int(value(node, i + 3, where, "queue-num"), where, what="queue-num", lo=0, hi=15)
            elif word == "no-loss":
                cls.no_loss = True
            elif word == "pfc-priority":
                cls.pfc_priority = parse_int(value(node, i + 3, where, "pfc-priority"), where,
                                             what="pfc-priority", lo=0, hi=7)
        out[w[1]] = cls
    elif w[0] == "queue" and len(w) >= 3:  # older form: queue 3 fcoe;
        out[w[2]] = Class(queue=parse_int(w[1], where, what="queue", lo=0, hi=15), no_loss="no-loss" in w)


def classifiers(cos: Stanza, r: Reading) -> dict[str, tuple[str, dict[int, set[str]]]]:
    """name -> (kind, code point -> forwarding classes naming it); a table with a malformed entry is left out (a
    table missing one code point would classify it by default)."""
    out: dict[str, tuple[str, dict[int, set[str]]]] = {}
    node = cos.child("classifiers")
    for table in node.children if node else []:
        if len(table.words) < 2 or table.words[0] not in ("dscp", "dscp-ipv6", "ieee-802.1"):
            continue
        try:
            out.update(_classifier(table, r.source))
        except ParseError as exc:
            r.warn(exc.line or table.line, bare(exc) + f"; classifier {table.words[1]!r} is not used")
    return out


def _classifier(table: Stanza, source: str) -> dict[str, tuple[str, dict[int, set[str]]]]:
    out: dict[str, tuple[str, dict[int, set[str]]]] = {}
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


def cnps(cos: Stanza, source: str) -> dict[str, Cnp]:
    out: dict[str, Cnp] = {}
    for prof in cos.all("congestion-notification-profile"):
        for node in prof.children if len(prof.words) == 1 else [prof]:
            name = node.words[1] if len(prof.words) > 1 else node.words[0]
            body = node.children
            cnp = out.setdefault(name, Cnp())
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
                            point = value(cp, 1, cp.where(source), "code-point")
                            if table.words[0] == "dscp":
                                cnp.dscps.add(_dscp(point, cp.where(source)))
                            elif table.words[0] == "ieee-802.1":
                                cnp.pcps.add(_pcp(point, cp.where(source)))
                elif part.words[0] == "output":
                    for table in part.children:
                        for cp in table.all("code-point"):
                            prio = _pcp(value(cp, 1, cp.where(source), "code-point"), cp.where(source))
                            for fq in cp.all("flow-control-queue"):
                                cnp.flow_queues.setdefault(prio, set()).update(
                                    parse_int(q, fq.where(source), what="flow-control-queue", lo=0, hi=15)
                                    for q in fq.words[1:])
                elif part.words[0] == "cable-length":
                    cnp.cable_m = parse_float(value(part, 1, where, "cable-length"), where, what="cable-length")
    return out


def _watchdog_knobs(node: Stanza, source: str, cnp: Cnp) -> None:
    """``poll-interval`` (ms), ``detection`` (poll intervals), ``recovery`` (ms), ``watchdog-action``."""
    for knob in node.children:
        where = knob.where(source)
        given = value(knob, 1, where, knob.words[0])
        if knob.words[0] == "poll-interval":
            cnp.poll_ms = parse_float(given, where, what="poll-interval")
        elif knob.words[0] == "detection":
            cnp.detection_polls = parse_int(given, where, what="detection", lo=1, hi=1000)
        elif knob.words[0] == "recovery":
            cnp.recovery_ms = parse_float(given, where, what="recovery")
        elif knob.words[0] == "watchdog-action":
            cnp.action = given


def _cable(node: Stanza, where: Where, current: float | None) -> float | None:
    found = node.child("cable-length")
    if found is None:
        return current
    return parse_float(value(found, 1, where, "cable-length"), found.where(where.source), what="cable-length")


def schedulers(cos: Stanza, source: str) -> tuple[dict[str, Sched], dict[str, dict[str, str]]]:
    scheds: dict[str, Sched] = {}
    node = cos.child("schedulers")
    for s in node.children if node else []:
        sched = scheds.setdefault(s.words[0], Sched())
        for line in s.children:
            w, where = line.words, line.where(source)
            if w[:2] == ["priority", "strict-high"]:
                sched.strict = True
            elif w[:2] == ["transmit-rate", "percent"]:
                sched.percent = parse_int(value(line, 2, where, "transmit-rate percent"), where,
                                          what="transmit-rate percent", lo=0, hi=100)
            elif w[0] == "explicit-congestion-notification":
                sched.ecn = True
            elif w[0] == "drop-profile-map" and "drop-profile" in w[1:]:
                sched.drop_profile = value(line, w.index("drop-profile", 1) + 1, where, "drop-profile")
    maps: dict[str, dict[str, str]] = {}
    node = cos.child("scheduler-maps")
    for m in node.children if node else []:
        entry = maps.setdefault(m.words[0], {})
        for line in m.all("forwarding-class"):
            w = line.words
            if len(w) == 4 and w[2] == "scheduler":
                entry[w[1]] = w[3]
    return scheds, maps


def drop_profiles(cos: Stanza, source: str) -> dict[str, tuple[float, float, float]]:
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


def interfaces(root: list[Stanza], source: str) -> dict[str, tuple[int | None, bool]]:
    """Top-level ``interfaces``: name -> (mtu, routed)."""
    out: dict[str, tuple[int | None, bool]] = {}
    for top in root:
        if top.words != ["interfaces"]:
            continue
        for ifd in top.children:
            mtu_node = ifd.child("mtu")
            mtu = parse_int(value(mtu_node, 1, mtu_node.where(source), "mtu"), mtu_node.where(source), what="mtu",
                            lo=68, hi=65535) if mtu_node else None
            routed = any(u.child("family", "inet") or u.child("family", "inet6") for u in ifd.all("unit"))
            out[ifd.words[0]] = (mtu, routed)
    return out


def hostname(root: list[Stanza]) -> str | None:
    for top in root:
        if top.words == ["system"]:
            found = top.child("host-name")
            if found is not None and len(found.words) == 2:
                return found.words[1]
    return None


def watchdog(cnp: Cnp | None) -> Watchdog | None:
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


# The ``set`` form (``show configuration | display set``): one line per leaf, its path spelled out. Each line is
# placed in the same tree the brace form gives, so one reader reads both. A grammar entry is (how many words after
# the keyword name the node, the grammar of its children); "named:" children are nodes named by their first word.
_GRAMMAR: dict[str, dict[str, tuple[int, str]]] = {
    "top": {"class-of-service": (0, "cos"), "interfaces": (0, "named:iface"), "system": (0, "leaf")},
    "cos": {"classifiers": (0, "classifiers"), "forwarding-classes": (0, "fcs"),
            "congestion-notification-profile": (1, "cnp"), "drop-profiles": (0, "named:dp"),
            "schedulers": (0, "named:leaf"), "scheduler-maps": (0, "named:leaf"), "interfaces": (0, "named:cosif"),
            "rewrite-rules": (0, "leaf"), "shared-buffer": (0, "leaf")},
    "classifiers": {"dscp": (1, "classifier"), "dscp-ipv6": (1, "classifier"), "ieee-802.1": (1, "classifier")},
    "classifier": {"forwarding-class": (1, "leaf")},
    "fcs": {},
    "cnp": {"input": (0, "cnp-in"), "output": (0, "cnp-out"), "pfc-watchdog": (0, "leaf")},
    "cnp-in": {"dscp": (0, "code-points"), "ieee-802.1": (0, "code-points")},
    "cnp-out": {"ieee-802.1": (0, "code-points")},
    "code-points": {"code-point": (1, "leaf")},
    "dp": {"interpolate": (0, "interpolate")},
    "interpolate": {},
    "cosif": {"unit": (1, "cos-unit")},
    "cos-unit": {"classifiers": (0, "leaf")},
    "iface": {"unit": (1, "unit")},
    "unit": {"family": (1, "leaf")},
    "leaf": {},
}
_EDIT = re.compile(r"^(?:\{[^}\n]{0,64}\})?\[edit(?: ([^\]\n]{1,400}))?\]\s*$")
_SET_WORD = re.compile(r'"[^"\n]*"|[^\s\[\]"]+')


def set_lines(lines: list[tuple[int, str]]) -> tuple[list[tuple[int, list[str]]], set[int]]:
    """The ``set`` statements among ``lines`` as full paths (a ``[edit class-of-service]`` banner prefixes the lines
    after it), and the numbers of every line this form used, banners included."""
    out: list[tuple[int, list[str]]] = []
    used: set[int] = set()
    prefix: list[str] = []
    for number, text in lines:
        stripped = text.strip()
        banner = _EDIT.match(stripped)
        if banner is not None:
            prefix = (banner[1] or "").split()
            used.add(number)
            continue
        if not stripped.startswith("set "):
            continue
        words = [w.strip('"') for w in _SET_WORD.findall(stripped[4:4 + 4096])]
        if words:
            out.append((number, prefix + words))
            used.add(number)
    return out, used


def set_tree(statements: list[tuple[int, list[str]]]) -> list[Stanza]:
    """``set`` paths as the stanza forest the brace form of the same configuration gives."""
    roots: list[Stanza] = []
    # Children by (parent list, words): every lookup is a dict hit, so 100,000 set lines stay linear.
    index: dict[tuple[int, tuple[str, ...]], Stanza] = {}
    for number, words in statements:
        siblings, grammar = roots, "top"
        rest = words
        while rest:
            if grammar.startswith("named:"):
                node = _child(index, siblings, rest[:1], number)
                siblings, grammar, rest = node.children, grammar[6:], rest[1:]
                continue
            entry = _GRAMMAR[grammar].get(rest[0])
            if entry is None or len(rest) < 1 + entry[0]:
                _leaf(index, siblings, rest, number, grammar)
                break
            node = _child(index, siblings, rest[:1 + entry[0]], number)
            siblings, grammar, rest = node.children, entry[1], rest[1 + entry[0]:]
    return roots


def _child(index: dict[tuple[int, tuple[str, ...]], Stanza], siblings: list[Stanza], words: list[str],
           number: int) -> Stanza:
    key = (id(siblings), tuple(words))
    node = index.get(key)
    if node is None:
        node = index[key] = Stanza(list(words), number)
        siblings.append(node)
    return node


def _leaf(index: dict[tuple[int, tuple[str, ...]], Stanza], siblings: list[Stanza], words: list[str], number: int,
          grammar: str) -> None:
    if grammar == "fcs" and words[0] == "class" and len(words) >= 2:
        # 'class NO-LOSS queue-num 3' and 'class NO-LOSS no-loss' on two lines are one brace statement.
        class_key: tuple[int, tuple[str, ...]] = (id(siblings), ("class", words[1], "\0"))
        node = index.get(class_key)
        if node is None:
            index[class_key] = Stanza(list(words), number)
            siblings.append(index[class_key])
        elif f" {' '.join(words[2:])} " not in f" {' '.join(node.words[2:])} ":
            node.words.extend(words[2:])
        return
    if grammar == "interpolate":
        # 'fill-level 30 drop-probability 0' per line, or 'fill-level [ 30 100 ]': one list per keyword.
        key_word = None
        for word in words:
            if word in ("fill-level", "drop-probability"):
                key_word = word
            elif key_word is not None:
                _child(index, siblings, [key_word], number).words.append(word)
        return
    key = (id(siblings), ("\0", *words))
    if key not in index:
        index[key] = Stanza(list(words), number)
        siblings.append(index[key])


def merge(into: list[Stanza], more: list[Stanza]) -> None:
    """Graft ``more`` onto ``into``: a stanza with the same words gains the other's children."""
    todo = [(into, more)]
    while todo:
        target, extra = todo.pop()
        by_words = {tuple(n.words): n for n in target if n.children}
        for node in extra:
            twin = by_words.get(tuple(node.words)) if node.children else None
            if twin is None:
                target.append(node)
            else:
                todo.append((twin.children, node.children))
