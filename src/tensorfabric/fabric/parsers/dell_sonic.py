"""Dell Enterprise SONiC management CLI (``show running-configuration``) into a :class:`Deployed`.

Read: ``qos map dscp-tc|dot1p-tc|tc-queue|tc-pg|pfc-priority-queue|pfc-priority-pg NAME`` blocks,
``qos wred-policy`` (``green minimum-threshold KB maximum-threshold KB drop-probability P``, ``ecn green|all``),
``qos scheduler-policy`` (``queue N`` with ``type strict|dwrr|wrr`` and ``weight W``), the global
``priority-flow-control watchdog polling-interval`` and ``interface`` blocks (``mtu``, ``speed`` in Mb/s,
``ip address``, ``cable-length``, ``qos-map ...``, ``scheduler-policy``, ``queue N wred-policy``,
``priority-flow-control priority N``, ``priority-flow-control watchdog on|action|detect-time|restore-time``).
WRED thresholds stay in the CLI's KB (``kbytes``): releases convert them with 1000 or 1024, so they are never
compared with byte counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tensorfabric import units
from tensorfabric.errors import InputError
from tensorfabric.fabric.deployed import Deployed, EcnProfile, PortQos, Trust, Watchdog
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

__all__ = ["FORMAT", "SUFFIXES", "parse", "sniff"]

FORMAT = "dell-sonic"
SUFFIXES = (".dellsonic",)
_MAPS = ("dscp-tc", "dot1p-tc", "tc-queue", "tc-pg", "pfc-priority-queue", "pfc-priority-pg")


def sniff(text: str) -> bool:
    head = text[:200_000]
    return ("qos-map dscp-tc" in head or "qos map dscp-tc" in head or "qos wred-policy" in head
            or "qos scheduler-policy" in head)


@dataclass
class _Sched:
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)


@dataclass
class _Port:
    names: list[str]
    mtu: int | None = None
    speed: float | None = None
    routed: bool = False
    cable: float | None = None
    maps: dict[str, str] = field(default_factory=dict)
    sched: str | None = None
    wred: dict[int, str] = field(default_factory=dict)
    pfc: set[int] = field(default_factory=set)
    pfc_seen: bool = False
    wd_on: bool | None = None
    wd_action: str | None = None
    wd_detect: float | None = None
    wd_restore: float | None = None


def _map_block(block: Block, source: str) -> tuple[dict[int, int], dict[int, frozenset[int]]]:
    kind = block.words[2]
    out: dict[int, int] = {}
    seen: dict[int, set[int]] = {}
    for line in block.children:
        w, where = line.words, line.where(source)
        if len(w) != 4:
            raise where.error(f"qos map {kind} entries look like 'dscp 26 traffic-class 3'")
        hi = 63 if w[0] == "dscp" else 7
        value = parse_int(w[3], where, what=w[2], lo=0, hi=15)
        for key in parse_priorities(w[1], where, what=w[0], hi=hi):
            out[key] = value
            seen.setdefault(key, set()).add(value)
    return out, {k: frozenset(v) for k, v in seen.items() if len(v) > 1}


def _wred(block: Block, source: str) -> EcnProfile:
    kmin = kmax = None
    prob = 100.0
    ecn = False
    for line in block.children:
        w, where = line.words, line.where(source)
        if w[0] == "green" and "minimum-threshold" in w and "maximum-threshold" in w:
            kmin = _after(w, "minimum-threshold", where)
            kmax = _after(w, "maximum-threshold", where)
            if "drop-probability" in w:
                prob = parse_float(w[w.index("drop-probability") + 1] if w.index("drop-probability") + 1 < len(w)
                                   else "", where, what="drop-probability")
        elif w[0] == "ecn" and len(w) == 2:
            ecn = w[1] in ("green", "all", "green-yellow", "green-red")
    if kmin is None or kmax is None:
        raise block.where(source).error("wred-policy lacks 'green minimum-threshold N maximum-threshold N'")
    return EcnProfile(kmin, kmax, prob, ecn, unit="kbytes")


def _after(words: list[str], key: str, where: Where) -> int:
    i = words.index(key)
    if i + 1 >= len(words):
        raise where.error(f"{key} needs a value")
    return parse_int(words[i + 1], where, what=key, lo=0)


def _scheduler(block: Block, source: str) -> _Sched:
    sched = _Sched()
    for q in block.children:
        w, where = q.words, q.where(source)
        if w[0] != "queue" or len(w) < 2:
            continue
        queue = parse_int(w[1], where, what="queue", lo=0, hi=15)
        lines = [c.words for c in q.children] + ([w[2:]] if len(w) > 2 else [])
        for cw in lines:
            if cw[:2] == ["type", "strict"]:
                sched.strict.add(queue)
            elif cw[:1] == ["weight"] and len(cw) == 2:
                sched.weights[queue] = parse_int(cw[1], where, what="weight", lo=0, hi=100)
            elif "weight" in cw and cw.index("weight") + 1 < len(cw):
                sched.weights[queue] = parse_int(cw[cw.index("weight") + 1], where, what="weight", lo=0, hi=100)
    return sched


def _interface(block: Block, source: str) -> _Port:
    port = _Port(expand_interfaces(" ".join(block.words[1:]), block.where(source)))
    for line in block.children:
        w, where = line.words, line.where(source)
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
            port.maps[w[1]] = w[2]
        elif w[0] == "scheduler-policy" and len(w) == 2:
            port.sched = w[1]
        elif w[0] == "queue" and len(w) == 4 and w[2] == "wred-policy":
            for q in parse_priorities(w[1], where, what="queue", hi=15):
                port.wred[q] = w[3]
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
    return port


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    hostname: str | None = None
    maps: dict[str, dict[str, dict[int, int]]] = {k: {} for k in _MAPS}
    conflicts: dict[int, frozenset[int]] = {}
    wreds: dict[str, EcnProfile] = {}
    scheds: dict[str, _Sched] = {}
    poll: float | None = None
    ports: list[_Port] = []
    for block in block_tree(text, source):
        w, where = block.words, block.where(source)
        if w[0] == "hostname" and len(w) == 2:
            hostname = w[1]
        elif w[:2] == ["qos", "map"] and len(w) == 4 and w[2] in _MAPS:
            table, clash = _map_block(block, source)
            maps[w[2]][w[3]] = table
            if w[2] == "dscp-tc":
                conflicts.update(clash)
        elif w[:2] == ["qos", "wred-policy"] and len(w) == 3:
            wreds[w[2]] = _wred(block, source)
        elif w[:2] == ["qos", "scheduler-policy"] and len(w) == 3:
            scheds[w[2]] = _scheduler(block, source)
        elif w[:3] == ["priority-flow-control", "watchdog", "polling-interval"] and len(w) == 4:
            poll = parse_float(w[3], where, what="polling-interval")
        elif w[0] == "interface" and len(w) >= 2:
            ports.append(_interface(block, source))
    if not (any(maps.values()) or wreds or scheds or ports):
        raise Where(source).error("no Dell SONiC QoS maps, policies or interfaces found")

    def named(kind: str, port: _Port, where: Where) -> dict[int, int] | None:
        ref = port.maps.get(kind)
        if ref is None:
            return None
        if ref not in maps[kind]:
            raise where.error(f"qos-map {kind} {ref!r} is not defined")
        return maps[kind][ref]

    out: list[PortQos] = []
    queue_map: dict[int, int] = {}
    pg_map: dict[int, int] = {}
    for p in ports:
        where = Where(source, None, p.names[0])
        dscp = named("dscp-tc", p, where)
        trust: Trust | None = "dscp" if dscp is not None else ("pcp" if "dot1p-tc" in p.maps else None)
        queue_map = named("tc-queue", p, where) or queue_map
        pg_map = named("tc-pg", p, where) or pg_map
        sched = scheds.get(p.sched) if p.sched else None
        if p.sched and sched is None:
            raise where.error(f"scheduler-policy {p.sched!r} is not defined")
        ecn: dict[int, EcnProfile] = {}
        for q, ref in p.wred.items():
            if ref not in wreds:
                raise where.error(f"wred-policy {ref!r} is not defined")
            ecn[q] = wreds[ref]
        wd = None
        if p.wd_on is not None:
            wd = Watchdog(p.wd_on, p.wd_detect, p.wd_restore, p.wd_action, poll)
        for name in p.names:
            out.append(PortQos(
                name=name, mtu=p.mtu, speed_bps=p.speed, routed=p.routed, cable_length_m=p.cable, trust=trust,
                dscp_to_priority=dscp, pfc_priorities=frozenset(p.pfc) if p.pfc_seen or p.maps else None,
                ecn=ecn if p.wred else None, strict_queues=frozenset(sched.strict) if sched else None,
                queue_weights=dict(sched.weights) if sched else None, watchdog=wd,
            ))
    dscp_tables = list(maps["dscp-tc"].values())
    return Deployed(
        device=device or hostname or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=dscp_tables[0] if len(dscp_tables) == 1 else {}, priority_to_queue=queue_map,
        priority_to_pg=pg_map, ports=tuple(out), dscp_conflicts=conflicts, complete=hostname is not None,
        notes=("WRED thresholds are the CLI's KB, kept unconverted",) if wreds else (),
    )
