"""Dell Enterprise SONiC management CLI (``show running-configuration``) into a :class:`Deployed`.

Read: ``qos map dscp-tc|dot1p-tc|tc-queue|tc-pg|pfc-priority-queue|pfc-priority-pg NAME`` blocks,
``qos wred-policy`` (``green minimum-threshold KB maximum-threshold KB drop-probability P``, ``ecn green|all``),
``qos scheduler-policy`` (``queue N`` with ``type strict|dwrr|wrr`` and ``weight W``), the global
``priority-flow-control watchdog polling-interval`` and ``interface`` blocks (``mtu``, ``speed`` in Mb/s,
``ip address``, ``cable-length``, ``qos-map ...``, ``scheduler-policy``, ``queue N wred-policy``,
``priority-flow-control priority N``, ``priority-flow-control watchdog on|action|detect-time|restore-time``).
WRED thresholds stay in the CLI's KB (``kbytes``): releases convert them with 1000 or 1024, so they are never
compared with byte counts.

``sonic-cli`` pastes often lose the indentation (``qos wred-policy ROCE`` with its ``green ...`` line under it at
the same column, blocks separated by ``!``): such a paste is re-indented from the statements' own hierarchy before
it is read. A map or policy an interface names but the text does not define leaves that fact unknown (a warning).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tensorfabric import units
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
    parse_priorities,
)
from tensorfabric.fabric.parsers._read import Reading, config_lines, markers, tail_open

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "dell-sonic"
NAME = "Dell Enterprise SONiC CLI"
SUFFIXES = (".dellsonic",)
EXPECTED = ("Dell Enterprise SONiC CLI QoS statements (qos map dscp-tc, qos wred-policy, qos scheduler-policy, "
            "interface Eth1/1 with qos-map and priority-flow-control priority N)")
MARKERS = markers(
    ("qos map dscp-tc|tc-queue|tc-pg|...", r"^\s*qos map (?:dscp-tc|dot1p-tc|tc-queue|tc-pg|pfc-priority-queue|"
                                          r"pfc-priority-pg)\b"),
    ("qos-map (interface)", r"^\s*qos-map (?:dscp-tc|dot1p-tc|tc-queue|tc-pg|pfc-priority-queue|pfc-priority-pg)\b"),
    ("qos wred-policy", r"^\s*(?:qos )?wred-policy\b"),
    ("qos scheduler-policy", r"^\s*(?:qos )?scheduler-policy\b"),
    ("green minimum-threshold", r"^\s*green minimum-threshold\b"),
    ("ecn green|all", r"^\s*ecn (?:green|all)\b"),
    ("type strict|dwrr|wrr", r"^\s*type (?:strict|dwrr|wrr)\s*$"),
    ("queue N wred-policy", r"^\s*queue \d+ wred-policy\b"),
    ("priority-flow-control priority N", r"^\s*priority-flow-control priority \d\s*$"),
    ("priority-flow-control watchdog", r"^\s*priority-flow-control watchdog\b"),
    ("interface Eth1/1", r"^\s*interface Eth\d"),
    ("dscp N traffic-class N", r"^\s*dscp [\d,-]+ traffic-class \d"),
    ("Dell prompt mode", r"\(conf-(?:qos|sched|if-Eth|dscp|tc|wred)"),
)
_MAPS = ("dscp-tc", "dot1p-tc", "tc-queue", "tc-pg", "pfc-priority-queue", "pfc-priority-pg")
# Statements that open a top-level block, for pastes that lost their indentation.
_TOP = frozenset({"interface", "qos", "hostname", "hardware", "line", "router", "vrf", "vlan", "username", "ntp",
                  "logging", "snmp-server", "mgmt", "sflow", "tacacs-server", "aaa", "spanning-tree", "lldp",
                  "clock", "banner", "management", "ztp"})


@dataclass
class _Sched:
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)


@dataclass
class _Port:
    names: list[str]
    line: int
    mtu: int | None = None
    speed: float | None = None
    routed: bool = False
    cable: float | None = None
    maps: dict[str, tuple[str, int]] = field(default_factory=dict)
    sched: tuple[str, int] | None = None
    wred: dict[int, tuple[str, int]] = field(default_factory=dict)
    pfc: set[int] = field(default_factory=set)
    pfc_seen: bool = False
    wd_on: bool | None = None
    wd_action: str | None = None
    wd_detect: float | None = None
    wd_restore: float | None = None
    partial: bool = False


def _reindent(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A paste whose sub-mode lines lost their indentation, re-indented by what each statement opens."""
    if any(t[:1] in (" ", "\t") for _, t in lines if t.strip() and not t.lstrip().startswith("!")):
        return lines
    out: list[tuple[int, str]] = []
    head: str | None = None
    in_queue = False
    for number, text in lines:
        stripped = text.strip()
        if not stripped or stripped.startswith(("!", "#")):
            out.append((number, text))
            continue
        words = stripped.split()
        global_pfc = words[:3] == ["priority-flow-control", "watchdog", "polling-interval"]
        inner_ip = words[0] in ("ip", "ipv6") and head == "interface"
        if (words[0] in _TOP or words[0] in ("ip", "ipv6") or global_pfc) and not inner_ip:
            head, in_queue = " ".join(words[:2]), False
            head = "interface" if words[0] == "interface" else head
            out.append((number, stripped))
        elif head == "qos scheduler-policy" and words[0] == "queue":
            in_queue = True
            out.append((number, " " + stripped))
        elif head is not None:
            out.append((number, ("  " if in_queue else " ") + stripped))
        else:
            out.append((number, stripped))
    return out


def _map_block(block: Block, r: Reading) -> tuple[dict[int, int], dict[int, frozenset[int]]]:
    kind = block.words[2]
    out: dict[int, int] = {}
    seen: dict[int, set[int]] = {}
    for line in block.children:
        w, where = line.words, line.where(r.source)
        with r.statement(line.line):
            if len(w) != 4:
                raise where.error(f"qos map {kind} entries look like 'dscp 26 traffic-class 3'")
            hi = 63 if w[0] == "dscp" else 7
            value = parse_int(w[3], where, what=w[2], lo=0, hi=15)
            for key in parse_priorities(w[1], where, what=w[0], hi=hi):
                out[key] = value
                seen.setdefault(key, set()).add(value)
            r.use(line.line)
    return out, {k: frozenset(v) for k, v in seen.items() if len(v) > 1}


def _wred(block: Block, r: Reading) -> EcnProfile | None:
    kmin = kmax = None
    prob = 100.0
    ecn = False
    for line in block.children:
        w, where = line.words, line.where(r.source)
        with r.statement(line.line):
            if w[0] == "green" and "minimum-threshold" in w and "maximum-threshold" in w:
                kmin = _after(w, "minimum-threshold", where)
                kmax = _after(w, "maximum-threshold", where)
                if "drop-probability" in w:
                    at = w.index("drop-probability") + 1
                    prob = parse_float(w[at] if at < len(w) else "", where, what="drop-probability")
            elif w[0] == "ecn" and len(w) == 2:
                ecn = w[1] in ("green", "all", "green-yellow", "green-red")
            else:
                continue
            r.use(line.line)
    if kmin is None or kmax is None:
        r.warn(block.line, "wred-policy lacks 'green minimum-threshold N maximum-threshold N'; its ECN is unknown")
        return None
    return EcnProfile(kmin, kmax, prob, ecn, unit="kbytes")


def _after(words: list[str], key: str, where: Where) -> int:
    i = words.index(key)
    if i + 1 >= len(words):
        raise where.error(f"{key} needs a value")
    return parse_int(words[i + 1], where, what=key, lo=0)


def _scheduler(block: Block, r: Reading) -> _Sched:
    sched = _Sched()
    for q in block.children:
        w, where = q.words, q.where(r.source)
        if w[0] != "queue" or len(w) < 2:
            continue
        with r.statement(q.line):
            queue = parse_int(w[1], where, what="queue", lo=0, hi=15)
            r.use(q.line)
            lines = [(c.words, c.line) for c in q.children] + ([(w[2:], q.line)] if len(w) > 2 else [])
            for cw, number in lines:
                with r.statement(number):
                    if cw[:2] == ["type", "strict"]:
                        sched.strict.add(queue)
                    elif cw[:2] in (["type", "dwrr"], ["type", "wrr"]):
                        pass
                    elif cw[:1] == ["weight"] and len(cw) == 2:
                        sched.weights[queue] = parse_int(cw[1], where, what="weight", lo=0, hi=100)
                    elif "weight" in cw and cw.index("weight") + 1 < len(cw):
                        sched.weights[queue] = parse_int(cw[cw.index("weight") + 1], where, what="weight", lo=0,
                                                         hi=100)
                    else:
                        continue
                    r.use(number)
    return sched


def _interface(block: Block, r: Reading) -> _Port:
    port = _Port(expand_interfaces(" ".join(block.words[1:]), block.where(r.source)), block.line)
    for line in block.children:
        w, where = line.words, line.where(r.source)
        with r.statement(line.line):
            if w[0] == "mtu" and len(w) == 2:
                port.mtu = parse_int(w[1], where, what="mtu", lo=68, hi=65535)
            elif w[0] == "speed" and len(w) == 2:
                port.speed = parse_int(w[1], where, what="speed (Mb/s)", lo=1) * 1e6
            elif w[:2] in (["ip", "address"], ["ipv6", "address"]) or w[:2] == ["ipv6", "enable"]:
                port.routed = True
            elif w[0] == "cable-length" and len(w) == 2:
                try:
                    port.cable = units.parse_length(w[1], what="cable-length")
                except InputError as exc:
                    raise where.error(str(exc)) from None
            elif w[0] == "qos-map" and len(w) == 3 and w[1] in _MAPS:
                port.maps[w[1]] = (w[2], line.line)
            elif w[0] == "scheduler-policy" and len(w) == 2:
                port.sched = (w[1], line.line)
            elif w[0] == "queue" and len(w) == 4 and w[2] == "wred-policy":
                for q in parse_priorities(w[1], where, what="queue", hi=15):
                    port.wred[q] = (w[3], line.line)
            elif w[:2] == ["priority-flow-control", "priority"] and len(w) == 3:
                port.pfc_seen = True
                port.pfc.update(parse_priorities(w[2], where, what="priority-flow-control priority"))
            elif w[:3] == ["priority-flow-control", "watchdog", "on"]:
                port.wd_on = True
                if "detect-time" in w:
                    port.wd_detect = float(_after(w, "detect-time", where))
            elif w[:3] == ["priority-flow-control", "watchdog", "off"] or w[:3] == ["no", "priority-flow-control",
                                                                                  "watchdog"]:
                port.wd_on = False
            elif w[:3] == ["priority-flow-control", "watchdog", "action"] and len(w) == 4:
                port.wd_action = w[3]
            elif w[:3] == ["priority-flow-control", "watchdog", "detect-time"] and len(w) == 4:
                port.wd_detect = float(_after(w, "detect-time", where))
            elif w[:3] == ["priority-flow-control", "watchdog", "restore-time"] and len(w) == 4:
                port.wd_restore = float(_after(w, "restore-time", where))
            else:
                continue
            r.use(line.line)
    return port


@dataclass
class _Config:
    """What the top-level statements of one config say, as the dispatch reads them."""

    partial: Block | None = None
    """An interface block the text ends inside: what it does not say yet is unknown, not off."""
    hostname: str | None = None
    maps: dict[str, dict[str, dict[int, int]]] = field(default_factory=lambda: {k: {} for k in _MAPS})
    conflicts: dict[int, frozenset[int]] = field(default_factory=dict)
    wreds: dict[str, EcnProfile | None] = field(default_factory=dict)
    scheds: dict[str, _Sched] = field(default_factory=dict)
    poll: float | None = None
    ports: list[_Port] = field(default_factory=list)


def _hostname(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    cfg.hostname = block.words[1]


def _qos_map(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    w = block.words
    table, clash = _map_block(block, r)
    cfg.maps[w[2]][w[3]] = table
    if w[2] == "dscp-tc":
        cfg.conflicts.update(clash)


def _wred_policy(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    cfg.wreds[block.words[2]] = _wred(block, r)


def _scheduler_policy(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    cfg.scheds[block.words[2]] = _scheduler(block, r)


def _polling(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    cfg.poll = parse_float(block.words[3], where, what="polling-interval")


def _interface_block(block: Block, where: Where, cfg: _Config, r: Reading) -> None:
    cfg.ports.append(_interface(block, r))
    cfg.ports[-1].partial = block is cfg.partial


_Statement = tuple[Callable[[list[str]], bool], Callable[[Block, Where, _Config, Reading], None]]
_STATEMENTS: tuple[_Statement, ...] = (
    (lambda w: w[0] == "hostname" and len(w) == 2, _hostname),
    (lambda w: w[:2] == ["qos", "map"] and len(w) == 4 and w[2] in _MAPS, _qos_map),
    (lambda w: w[:2] == ["qos", "wred-policy"] and len(w) == 3, _wred_policy),
    (lambda w: w[:2] == ["qos", "scheduler-policy"] and len(w) == 3, _scheduler_policy),
    (lambda w: w[:3] == ["priority-flow-control", "watchdog", "polling-interval"] and len(w) == 4, _polling),
    (lambda w: w[0] == "interface" and len(w) >= 2, _interface_block),
)
"""Top-level statements, tried in order; the first whose test holds reads the block."""


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    cfg = _Config()
    lines = _reindent(config_lines(r))
    tree = block_tree(lines)
    if tree and tail_open(lines) and tree[-1].children and tree[-1].words[0] == "interface":
        cfg.partial = tree[-1]
    elif tail_open(lines) and tree and tree[-1].children and tree[-1].words[0] == "qos" and (
            len(tree) > 1 or tree[-1].words[:2] == ["qos", "map"]):
        # A cut block may have lost lines; a policy pasted alone is kept, a map never (a DSCP it lost would read
        # as unmapped).
        last = tree.pop()
        r.warn(last.line, f"the text ends inside '{last.text[:60]}' without a closing line; it may be cut short, so "
                          "it is not used")
    for block in tree:
        with r.statement(block.line):
            handler = next((h for test, h in _STATEMENTS if test(block.words)), None)
            if handler is None:
                continue
            handler(block, block.where(source), cfg, r)
            r.use(block.line)
    r.unread_under(tree)
    refs = _References(cfg, r)
    out: list[PortQos] = []
    queue_map: dict[int, int] = {}
    pg_map: dict[int, int] = {}
    for p in cfg.ports:
        dscp = refs.named("dscp-tc", p)
        trust: Trust | None = "dscp" if dscp is not None else ("pcp" if "dot1p-tc" in p.maps else None)
        queue_map = refs.named("tc-queue", p) or queue_map
        pg_map = refs.named("tc-pg", p) or pg_map
        out += _port(p, refs, dscp, trust)
    dscp_tables = list(cfg.maps["dscp-tc"].values())
    return Deployed(
        device=device or cfg.hostname or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=dscp_tables[0] if len(dscp_tables) == 1 else {}, priority_to_queue=queue_map,
        priority_to_pg=pg_map, ports=tuple(out), dscp_conflicts=cfg.conflicts, complete=cfg.hostname is not None,
        defects=tuple(refs.defects.values()),
        notes=("WRED thresholds are the CLI's KB, kept unconverted",) if cfg.wreds else (),
    )


class _References:
    """Maps, scheduler and WRED policies an interface names, resolved against the ones the text defines. A whole
    config (it names its host) shows every definition: a reference to a missing one is a statement the switch
    cannot act on (a defect), not a part of the text that was left out."""

    def __init__(self, cfg: _Config, r: Reading) -> None:
        self.cfg, self.r = cfg, r
        self.defects: dict[tuple[str, str], ConfigDefect] = {}

    def undefined(self, kind: str, name: str, number: int, effect: str, fix: str) -> None:
        if self.cfg.hostname is not None:
            self.defects.setdefault((kind, name), ConfigDefect(
                number, f"{kind} {name!r} is referenced but never defined: {effect}", fix))

    def named(self, kind: str, port: _Port) -> dict[int, int] | None:
        ref = port.maps.get(kind)
        if ref is None:
            return None
        maps = self.cfg.maps
        if ref[0] not in maps[kind]:
            self.r.warn(ref[1], f"qos-map {kind} {ref[0]!r} is not defined in this text; that map is unknown")
            self.undefined(f"qos map {kind}", ref[0], ref[1], "the port keeps the default map",
                           f"qos map {kind} {ref[0]} with its entries, or qos-map {kind} naming an existing map")
            return None
        return maps[kind][ref[0]]

    def ecn(self, p: _Port) -> dict[int, EcnProfile] | None:
        """ECN per queue; one queue naming an unknown WRED policy makes the port's ECN unknown, not off."""
        found: dict[int, EcnProfile] = {}
        for q, (ref, number) in p.wred.items():
            profile = self.cfg.wreds.get(ref)
            if profile is None:
                if ref not in self.cfg.wreds:
                    self.r.warn(number, f"wred-policy {ref!r} is not defined in this text; ECN on queue {q} is "
                                        "unknown")
                    self.undefined("wred-policy", ref, number, f"queue {q} gets no ECN marking",
                                   f"qos wred-policy {ref} / green minimum-threshold N maximum-threshold N "
                                   "drop-probability P / ecn green")
                return None
            found[q] = profile
        return found


def _port(p: _Port, refs: _References, dscp: dict[int, int] | None, trust: Trust | None) -> list[PortQos]:
    sched = refs.cfg.scheds.get(p.sched[0]) if p.sched else None
    if p.sched and sched is None:
        refs.r.warn(p.sched[1], f"scheduler-policy {p.sched[0]!r} is not defined in this text; scheduling unknown")
        refs.undefined("scheduler-policy", p.sched[0], p.sched[1], "the port keeps default scheduling, with no "
                       "strict queue for CNPs", f"qos scheduler-policy {p.sched[0]} with a 'queue N / type strict' "
                       "for CNPs")
    ecn = refs.ecn(p)
    wd = Watchdog(p.wd_on, p.wd_detect, p.wd_restore, p.wd_action, refs.cfg.poll) if p.wd_on is not None else None
    return [PortQos(
        name=name, mtu=p.mtu, speed_bps=p.speed, routed=p.routed, cable_length_m=p.cable, trust=trust,
        dscp_to_priority=dscp,
        pfc_priorities=frozenset(p.pfc) if p.pfc_seen or (p.maps and not p.partial) else None,
        ecn=ecn if p.wred else None, strict_queues=frozenset(sched.strict) if sched else None,
        queue_weights=dict(sched.weights) if sched else None, watchdog=wd,
    ) for name in p.names]
