"""Arista EOS running-config (the QoS/PFC subset) into a :class:`Deployed`.

Understood: ``hostname``; ``qos map dscp D... to traffic-class T [drop-precedence P]`` (the drop precedence picks
a WRED colour within T); ``qos map traffic-class T to tx-queue Q``;
``qos profile NAME`` blocks (``qos trust``, ``priority-flow-control on``/``priority N no-drop``,
``uc-tx-queue``/``tx-queue`` blocks with ``priority strict``, ``bandwidth percent`` and
``random-detect ecn``, ``priority-flow-control pause watchdog [port action A | port timer timeout T
polling-interval P|auto recovery-time R [forced]]``); the global ``priority-flow-control pause watchdog`` lines
(a profile's own port action and timers win over them); and ``interface`` blocks
with ``mtu``, ``speed`` (``400g``, ``400g-8``, ``100gfull``), ``no switchport``/``ip address`` (routed),
``service-profile`` and the same QoS lines as a profile. ECN thresholds in bytes, kbytes (x1000) or mbytes
(x1000000) become byte counts; ``segments`` depend on the platform's cell size, so they are kept as segments
(compared with each other, never with bytes); milliseconds are refused. ``random-detect ecn count`` only turns
on counters.

EOS has one global DSCP -> traffic-class table with built-in defaults (DSCP 0-7 -> TC 1, 8-15 -> TC 0, then
DSCP >> 3, so 26 -> 3 and 48 -> 6); ``qos map dscp ... to traffic-class`` lines change entries of it, so the
record of a whole config (``hostname`` and interfaces) holds the whole table (``default_dscp_map`` when no line
changed it). An excerpt leaves the table unknown: a ``qos map dscp`` line may sit outside it. ``qos map traffic-class N
to dscp M`` rewrites the DSCP of leaving packets: it is recorded as ``priority_to_dscp`` and classifies nothing.
Routed ports trust DSCP by default.

PFC takes effect only where it is applied: a ``qos profile`` reaches a port through ``service-profile``, so in a
whole config a profile that enables PFC but that no interface applies is reported (the operator's intent is not in
force), and the global ``priority-flow-control all off`` turns PFC off on every interface whatever its profile says.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tensorfabric import roce, units
from tensorfabric.errors import InputError
from tensorfabric.fabric.deployed import ConfigDefect, Deployed, EcnProfile, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._common import (
    Block,
    Where,
    block_tree,
    device_from_source,
    expand_interfaces,
    parse_float,
    parse_int,
)
from tensorfabric.fabric.parsers._read import Reading, config_lines, markers, tail_open

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "default_dscp_map", "read"]

FORMAT = "eos"
NAME = "EOS"
SUFFIXES = (".eos",)
EXPECTED = ("Arista EOS QoS statements (qos map dscp ... to traffic-class, qos profile, priority-flow-control "
            "priority N no-drop, uc-tx-queue/tx-queue, interface)")
MARKERS = markers(
    ("qos map dscp ... to traffic-class", r"^\s*qos map dscp [\d ]+to traffic-class\b"),
    ("qos map traffic-class", r"^\s*qos map traffic-class \d"),
    ("qos profile", r"^\s*qos profile \S"),
    ("qos trust", r"^\s*qos trust (?:dscp|cos)\b"),
    ("priority-flow-control priority N no-drop", r"^\s*priority-flow-control priority \d no-drop\b"),
    ("priority-flow-control on", r"^\s*priority-flow-control (?:on|mode on)\s*$"),
    ("priority-flow-control pause watchdog", r"^\s*priority-flow-control pause watchdog\b"),
    ("uc-tx-queue / tx-queue", r"^\s*(?:uc-|mc-)?tx-queue \d"),
    ("service-profile", r"^\s*service-profile \S"),
    ("random-detect ecn", r"^\s*random-detect ecn\b"),
    ("priority strict", r"^\s*priority strict\s*$"),
    ("EOS prompt mode", r"\(config-(?:qos-profile|if-Et)"),
)
_UNITS = {"bytes": 1, "kbytes": 1000, "mbytes": 1_000_000}
_SPEED = re.compile(r"^(?:forced\s+)?(\d{1,4}(?:\.\d{1,3})?[gm])(?:-\d{1,2}|full|half)?$")


def default_dscp_map() -> dict[int, int]:
    """EOS's built-in DSCP -> traffic class table."""
    return {d: (1 if d < 8 else 0 if d < 16 else roce.default_priority(d)) for d in range(64)}


_TRUST: dict[str, Trust] = {"dscp": "dscp", "cos": "pcp"}


@dataclass
class _Qos:
    """QoS lines of one profile or interface; ``None`` where the block says nothing."""

    trust: Trust | None = None
    pfc_on: bool | None = None
    no_drop: set[int] = field(default_factory=set)
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)
    ecn: dict[int, EcnProfile] = field(default_factory=dict)
    watchdog: bool | None = None
    wd_port: dict[str, object] = field(default_factory=dict)
    """Per-profile watchdog overrides (``pause watchdog port action|timer``): action, detection/restoration/poll ms."""
    touched: bool = False
    partial: bool = False
    """The block may be cut short (the paste ends inside it): absent entries are unknown, not absent."""


def _threshold(words: list[str], key: str, where: Where) -> tuple[int, str]:
    i = words.index(key) if key in words else len(words)
    if i + 2 >= len(words):
        raise where.error(f"random-detect needs '{key} N UNIT'")
    unit = words[i + 2]
    if unit == "segments":
        return parse_int(words[i + 1], where, what=key, lo=0), "segments"
    if unit not in _UNITS:
        raise where.error(f"{key} unit {unit!r} cannot be converted to bytes; use bytes, kbytes, mbytes or segments")
    return round(parse_float(words[i + 1], where, what=key) * _UNITS[unit]), "bytes"


_TIMER_KEYS = {"timeout": "detection_ms", "recovery-time": "restoration_ms", "polling-interval": "polling_ms"}


def _port_timer(words: list[str], where: Where) -> dict[str, object]:
    """``timeout 0.05 polling-interval auto recovery-time 1.11 [forced]``, in seconds, into milliseconds."""
    out: dict[str, object] = {}
    auto = False
    i = 0
    while i < len(words):
        key = words[i]
        if key == "forced":
            i += 1
            continue
        if key not in _TIMER_KEYS or i + 1 >= len(words):
            raise where.error(f"watchdog port timer: {key!r} is not timeout, polling-interval or recovery-time N")
        if key == "polling-interval" and words[i + 1] == "auto":
            auto = True
        else:
            out[_TIMER_KEYS[key]] = parse_float(words[i + 1], where, what=f"watchdog {key}") * 1000.0
        i += 2
    timers = [v for k, v in out.items() if k != "polling_ms" and isinstance(v, float)]
    if auto and timers:
        # EOS requires the poll to be at most half the smaller timer; "auto" picks such a poll.
        out["polling_ms"] = min(timers) / 2
    return out


def _tx_queue(block: Block, r: Reading, qos: _Qos, queue: int) -> None:
    for child in block.children:
        cw, cwhere = child.words, child.where(r.source)
        with r.statement(child.line):
            if cw == ["priority", "strict"]:
                qos.strict.add(queue)
            elif cw == ["no", "priority"]:
                qos.strict.discard(queue)
            elif cw[:2] == ["bandwidth", "percent"] and len(cw) == 3:
                qos.weights[queue] = parse_int(cw[2], cwhere, what="bandwidth percent", lo=0, hi=100)
            elif cw == ["random-detect", "ecn", "count"]:
                pass  # ECN mark counters, no marking behaviour
            elif cw[:2] == ["random-detect", "ecn"]:
                pmax = 100.0
                if "max-mark-probability" in cw and cw.index("max-mark-probability") + 1 < len(cw):
                    pmax = parse_float(cw[cw.index("max-mark-probability") + 1], cwhere, what="max-mark-probability")
                (kmin, lo_unit), (kmax, hi_unit) = (_threshold(cw, "minimum-threshold", cwhere),
                                                    _threshold(cw, "maximum-threshold", cwhere))
                if lo_unit != hi_unit:
                    raise cwhere.error("minimum and maximum thresholds mix segments and bytes")
                qos.ecn[queue] = EcnProfile(kmin, kmax, pmax, True, unit="segments" if lo_unit == "segments"
                                            else "bytes")
            else:
                continue
            r.use(child.line)


def _qos_line(block: Block, r: Reading, qos: _Qos) -> bool:
    w, where = block.words, block.where(r.source)
    if w[:2] == ["qos", "trust"] and len(w) == 3:
        if w[2] not in _TRUST:
            raise where.error(f"qos trust {w[2]!r} must be 'dscp' or 'cos'")
        qos.trust = _TRUST[w[2]]
    elif w == ["priority-flow-control", "on"] or w == ["priority-flow-control", "mode", "on"]:
        qos.pfc_on = True
    elif w in (["no", "priority-flow-control"], ["priority-flow-control", "off"]):
        qos.pfc_on = False
    elif w[:2] == ["priority-flow-control", "priority"] and len(w) == 4:
        prio = parse_int(w[2], where, what="priority", lo=0, hi=7)
        (qos.no_drop.add if w[3] == "no-drop" else qos.no_drop.discard)(prio)
    elif w[:3] == ["priority-flow-control", "pause", "watchdog"] and len(w) == 3:
        qos.watchdog = True
    elif w[:4] == ["no", "priority-flow-control", "pause", "watchdog"]:
        qos.watchdog = False
    elif w[:5] == ["priority-flow-control", "pause", "watchdog", "port", "action"] and len(w) == 6:
        qos.wd_port["action"] = w[5]
    elif w[:5] == ["priority-flow-control", "pause", "watchdog", "port", "timer"]:
        qos.wd_port.update(_port_timer(w[5:], where))
    elif w[0] in ("uc-tx-queue", "tx-queue") and len(w) == 2:
        queue = parse_int(w[1], where, what=w[0], lo=0, hi=7)
        _tx_queue(block, r, qos, queue)
    else:
        return False
    qos.touched = True
    r.use(block.line)
    return True


def _read_block(block: Block, r: Reading, qos: _Qos, partial: bool) -> list[Block]:
    """The QoS lines of a profile or interface; the other lines are returned to the caller."""
    children = list(block.children)
    if partial and children and children[-1].children:
        # A queue block at the very end of a cut paste may have lost its lines: leave it out.
        dropped = children.pop()
        r.warn(dropped.line, f"the text ends inside '{dropped.text[:60]}'; it may be cut short, so it is not used")
    qos.partial = partial
    rest: list[Block] = []
    for child in children:
        handled = False
        with r.statement(child.line):
            handled = _qos_line(child, r, qos)
        if not handled:
            rest.append(child)
    return rest


def _dscp_map_tail(w: list[str]) -> bool:
    tail = w[w.index("to") + 1:]
    return (len(tail) == 2 and tail[0] == "traffic-class") or (
        len(tail) == 4 and tail[0] == "traffic-class" and tail[2] == "drop-precedence")


@dataclass
class _Config:
    """What the statements of one config say, as the dispatch reads them."""

    partial_last: Block | None = None
    """An interface block the text ends inside (cut short): read, but not as a whole."""
    hostname: str | None = None
    dscp: dict[int, int] = field(default_factory=dict)
    rewrite: dict[int, int] = field(default_factory=dict)
    queue: dict[int, int] = field(default_factory=dict)
    profiles: dict[str, _Qos] = field(default_factory=dict)
    wd: dict[str, float] = field(default_factory=dict)
    wd_action: str | None = None
    wd_seen: bool = False
    all_off: int | None = None
    ports: list[PortQos] = field(default_factory=list)
    shaped: set[str] = field(default_factory=set)
    applied: set[str] = field(default_factory=set)


def _hostname(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    cfg.hostname = block.words[1]


def _dscp_map(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    # "... to traffic-class N drop-precedence M" (7280R/7500R): the drop precedence picks a WRED colour inside
    # class N, it does not move the DSCP to another class.
    w = block.words
    tc = parse_int(w[w.index("to") + 2], where, what="traffic-class", lo=0, hi=7)
    if len(w) > w.index("to") + 3:
        parse_int(w[-1], where, what="drop-precedence", lo=0, hi=3)
    values = [parse_int(item, where, what="dscp", lo=0, hi=63) for item in w[3:w.index("to")]]
    cfg.dscp.update(dict.fromkeys(values, tc))


def _tc_to_dscp(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    w = block.words
    value = parse_int(w[-1], where, what="dscp", lo=0, hi=63)
    for item in w[3:w.index("to")]:
        cfg.rewrite[parse_int(item, where, what="traffic-class", lo=0, hi=7)] = value


def _tc_to_queue(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    w = block.words
    cfg.queue[parse_int(w[3], where, what="traffic-class", lo=0, hi=7)] = parse_int(w[6], where, what="tx-queue",
                                                                                     lo=0, hi=7)


def _profile(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    _read_block(block, r, cfg.profiles.setdefault(block.words[2], _Qos()), partial=False)


def _watchdog_default(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    w = block.words
    cfg.wd[w[4]] = parse_float(w[5], where, what=f"watchdog {w[4]}") * 1000.0
    cfg.wd_seen = True


def _watchdog_action(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    cfg.wd_seen, cfg.wd_action = True, block.words[4]


def _all_off(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    cfg.all_off = block.line


def _interface_block(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    found, qos_block = _interface(block, r, cfg.profiles, cfg.applied, partial=block is cfg.partial_last)
    cfg.ports.extend(found)
    if qos_block:
        cfg.shaped.update(p.name for p in found)


_Statement = tuple[Callable[[list[str]], bool], Callable[[Block, Where, _Config, Reading], None]]
_STATEMENTS: tuple[_Statement, ...] = (
    (lambda w: w[0] == "hostname" and len(w) == 2, _hostname),
    (lambda w: w[:3] == ["qos", "map", "dscp"] and "to" in w and _dscp_map_tail(w), _dscp_map),
    (lambda w: w[:3] == ["qos", "map", "traffic-class"] and "to" in w and w[-2] == "dscp", _tc_to_dscp),
    (lambda w: w[:3] == ["qos", "map", "traffic-class"] and len(w) == 7 and w[5] in ("tx-queue", "uc-tx-queue"),
     _tc_to_queue),
    (lambda w: w[:2] == ["qos", "profile"] and len(w) == 3, _profile),
    (lambda w: w[:4] == ["priority-flow-control", "pause", "watchdog", "default"] and len(w) == 6,
     _watchdog_default),
    (lambda w: w[:4] == ["priority-flow-control", "pause", "watchdog", "action"] and len(w) == 5, _watchdog_action),
    (lambda w: w == ["priority-flow-control", "all", "off"], _all_off),
    (lambda w: w[0] == "interface" and len(w) >= 2, _interface_block),
)
"""Top-level statements, tried in order; the first whose test holds reads the block."""


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    lines = config_lines(r)
    tree = block_tree(lines)
    cfg = _Config()
    if tree and tail_open(lines) and tree[-1].children:
        if tree[-1].words[0] == "interface":
            cfg.partial_last = tree[-1]
        elif tree[-1].words[:2] == ["qos", "profile"] and len(tree) > 1:
            last = tree.pop()
            r.warn(last.line, f"the text ends inside '{last.text[:60]}' without a closing line; it may be cut "
                              "short, so it is not used")
    for block in tree:
        with r.statement(block.line):
            handler = next((h for test, h in _STATEMENTS if test(block.words)), None)
            if handler is None:
                continue
            handler(block, block.where(source), cfg, r)
            r.use(block.line)
    r.unread_under(tree)
    # A whole config: hostname, interfaces, and an end (EOS closes every block with "!"); a text that stops inside
    # a block is a part of one, whatever it starts with.
    complete = cfg.hostname is not None and bool(cfg.ports) and not tail_open(lines)
    return _deployed(cfg, complete, source, device)


def _deployed(cfg: _Config, complete: bool, source: str, device: str | None) -> Deployed:
    ports = cfg.ports
    defects: list[ConfigDefect] = []
    notes: list[str] = []
    if cfg.all_off is not None:
        # A global switch over every interface's own PFC lines: nothing below it pauses.
        ports = [replace(p, pfc_priorities=frozenset()) for p in ports]
        notes.append("'priority-flow-control all off' disables PFC on every interface, whatever the profiles say")
    if complete:
        for name, prof in sorted(cfg.profiles.items()):
            if name not in cfg.applied and prof.pfc_on and prof.no_drop:
                defects.append(ConfigDefect(None, f"qos profile {name!r} enables PFC on priority "
                                            f"{sorted(prof.no_drop)} but no interface applies it: that PFC is not in "
                                            "force", f"service-profile {name} under each RoCE interface"))
    # Timers are global; the watchdog itself is switched on per interface or profile, so "off" where no line
    # switches it on is a fact only of a whole config.
    wd = cfg.wd
    timers = Watchdog(False, detection_ms=wd.get("timeout"), restoration_ms=wd.get("recovery-time"),
                      action=cfg.wd_action or "drop", polling_ms=wd.get("polling-interval"))
    watchdog = timers if cfg.wd_seen and complete else None
    # A profile's own "pause watchdog port action|timer" lines win over the global defaults.
    ports = [replace(p, watchdog=Watchdog(
        p.watchdog.enabled,
        detection_ms=p.watchdog.detection_ms if p.watchdog.detection_ms is not None else timers.detection_ms,
        restoration_ms=p.watchdog.restoration_ms if p.watchdog.restoration_ms is not None else timers.restoration_ms,
        action=p.watchdog.action or timers.action,
        polling_ms=p.watchdog.polling_ms if p.watchdog.polling_ms is not None else timers.polling_ms))
        if p.watchdog is not None else p for p in ports]
    if complete:
        # A whole config that configures a port's QoS but no queue of it has no ECN and no strict queue there.
        ports = [replace(p, ecn=p.ecn if p.ecn is not None else {},
                         strict_queues=p.strict_queues if p.strict_queues is not None else frozenset(),
                         queue_weights=p.queue_weights if p.queue_weights is not None else {})
                 if p.name in cfg.shaped else p for p in ports]
    # The built-in table holds for every DSCP no "qos map dscp" line moves, and only a whole config shows all of
    # those lines: in an excerpt a moved DSCP may sit outside it, so the table is unknown there.
    table = default_dscp_map() | cfg.dscp if complete else {}
    return Deployed(device=device or cfg.hostname or device_from_source(source), kind="switch", format=FORMAT,
                    source=source, dscp_to_priority=table, priority_to_queue=cfg.queue,
                    watchdog=watchdog, ports=tuple(ports), priority_to_dscp=cfg.rewrite,
                    default_dscp_map=complete and not cfg.dscp, complete=complete, defects=tuple(defects),
                    notes=tuple(notes))


def _interface(block: Block, r: Reading, profiles: dict[str, _Qos], applied: set[str], *,
               partial: bool) -> tuple[list[PortQos], bool]:
    source = r.source
    where = block.where(source)
    names = expand_interfaces(" ".join(block.words[1:]), where)
    own = _Qos()
    mtu: int | None = None
    speed: float | None = None
    routed: bool | None = None
    profile: _Qos | None = None
    for child in _read_block(block, r, own, partial):
        cw, cwhere = child.words, child.where(source)
        with r.statement(child.line):
            if cw[0] == "mtu" and len(cw) == 2:
                mtu = parse_int(cw[1], cwhere, what="mtu", lo=68, hi=65535)
            elif cw == ["no", "switchport"] or cw[:2] in (["ip", "address"], ["ipv6", "address"]):
                routed = True
            elif cw[0] == "speed" and len(cw) >= 2:
                match = _SPEED.match(" ".join(cw[1:]).lower())
                if match is None:
                    raise cwhere.error(f"speed {' '.join(cw[1:])!r} must look like 400g, 400g-8, 200g-4 or 100gfull")
                try:
                    speed = units.parse_rate(match.group(1), what="speed")
                except InputError as exc:
                    raise cwhere.error(str(exc)) from None
            elif cw[0] == "service-profile" and len(cw) == 2:
                if cw[1] not in profiles:
                    raise cwhere.error(f"service-profile {cw[1]!r} is not defined above; the port's QoS from it "
                                       "is unknown")
                profile = profiles[cw[1]]
                applied.add(cw[1])
            else:
                continue
            r.use(child.line)
    merged = _merge(profile, own)
    # A cut-off interface block that turns PFC on before its no-drop lines says nothing about which priorities.
    pfc = None if merged.pfc_on is None or (partial and not merged.no_drop) else (
        frozenset(merged.no_drop) if merged.pfc_on else frozenset())
    trust = merged.trust or ("dscp" if routed else None)  # routed ports trust DSCP unless told otherwise
    # No queue line at all says "no ECN, no strict queue" only of a whole config (see read); here it is unknown.
    return [PortQos(
        name=name, mtu=mtu, speed_bps=speed, trust=trust, pfc_priorities=pfc, routed=routed,
        ecn=dict(merged.ecn) if merged.ecn else None,
        strict_queues=frozenset(merged.strict) if merged.strict else None,
        queue_weights=dict(merged.weights) if merged.weights else None,
        watchdog=None if merged.watchdog is None else Watchdog(
            merged.watchdog, action=str(merged.wd_port["action"]) if "action" in merged.wd_port else None,
            **{k: float(v) for k, v in merged.wd_port.items() if k != "action" and isinstance(v, float)}),
    ) for name in names], merged.touched and not partial


def _merge(profile: _Qos | None, own: _Qos) -> _Qos:
    base = profile or _Qos()
    return _Qos(
        trust=own.trust or base.trust,
        pfc_on=own.pfc_on if own.pfc_on is not None else base.pfc_on,
        no_drop=own.no_drop or base.no_drop,
        strict=own.strict or base.strict,
        weights=own.weights or base.weights,
        ecn={**base.ecn, **own.ecn},
        watchdog=own.watchdog if own.watchdog is not None else base.watchdog,
        wd_port={**base.wd_port, **own.wd_port},
        touched=own.touched or base.touched,
    )
