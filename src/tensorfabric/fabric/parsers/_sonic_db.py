"""One SONiC CONFIG_DB object into a :class:`Deployed`, table by table (the reader of :mod:`.sonic` and
:mod:`.sonic_redis` gives it the tables; this module knows what each table means).

:func:`parse_db` reads the tables in a fixed order -- DEVICE_METADATA, the DSCP/TC maps, PORT_QOS_MAP, the
profiles (WRED, SCHEDULER, BUFFER_PROFILE), PORT, INTERFACE, CABLE_LENGTH, PFC_WD, QUEUE, BUFFER_PG, BUFFER_QUEUE --
one function per table, then puts each port together. The order is the order of the warnings in the read report.
A value a table gets wrong is a warning naming the table's line (:meth:`_Db.guarded`); a reference to an entry
the referenced table lacks is a :class:`ConfigDefect` when that table is in the text whole, else a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import ConfigDefect, Deployed, EcnProfile, Headroom, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers import _sonic_values as sv
from tensorfabric.fabric.parsers._common import Where, device_from_source, parse_bytes, parse_float, parse_int
from tensorfabric.fabric.parsers._json_tables import Dups
from tensorfabric.fabric.parsers._read import Reading, bare

__all__ = ["parse_db"]

_NOT_PORTS = ("global", "GLOBAL", "AZURE")
_T = TypeVar("_T")


class _Db:
    """One CONFIG_DB object being read: its tables, the lines they start on, and the defects found so far."""

    def __init__(self, db: dict[str, Any], dups: Dups, r: Reading, lines: Mapping[str, int], prefix: str,
                 piecewise: bool) -> None:
        self.db, self.dups, self.r, self.lines, self.prefix, self.piecewise = db, dups, r, lines, prefix, piecewise
        self.defects: dict[tuple[str, str], ConfigDefect] = {}

    def at(self, table: str) -> Where:
        return Where(self.r.source, self.lines.get(table))

    def guarded(self, table: str, fn: Callable[[], _T], default: _T, what: str = "") -> _T:
        try:
            return fn()
        except ParseError as exc:
            self.r.warn(exc.line or self.lines.get(table), bare(exc) + (f"; {what}" if what else ""))
            return default

    def table(self, name: str) -> dict[str, dict[str, Any]]:
        return self.guarded(name, lambda: sv.table(self.db, name, self.at(name)), {}, f"{name} is not used")

    def undefined(self, where: str, target: str, ref: str, what: str, unknown: str) -> None:
        """A reference to an entry its table lacks: a defect when the table is in the text whole (the device
        applies nothing for it); otherwise the entry may lie outside the excerpt, so only a warning."""
        if target in self.db and not self.piecewise:
            self.defects.setdefault((target, ref), ConfigDefect(
                self.lines.get(where), f"{where} names {target} {ref!r}, which the {target} table does not define: "
                f"{what} is not applied", f"define {target}|{ref} or point {where} at an entry {target} defines"))
        else:
            self.r.warn(self.lines.get(where), unknown)

    def keyed(self, table_name: str) -> dict[str, dict[str, Any]]:
        """A table keyed by port (``global``/``GLOBAL``/``AZURE`` kept as they are)."""
        out: dict[str, dict[str, Any]] = {}
        for k, v in self.table(table_name).items():
            if k in _NOT_PORTS:
                out[k] = v
                continue
            port = self.guarded(table_name, partial(sv.port_name, k, self.at(table_name), self.prefix), None,
                                f"entry {k!r} is not used")
            if port is not None:
                out[port] = v
        return out

    def maps(self, table_name: str, hi: int) -> dict[str, dict[int, int]]:
        out: dict[str, dict[int, int]] = {}
        for k, v in self.table(table_name).items():
            found = self.guarded(table_name, partial(sv.int_map, v, self.at(table_name), f"{table_name}|{k}", hi),
                                 None, f"map {k!r} is not used")
            if found is not None:
                out[k] = found
        return out

    def bound(self, entry: Mapping[str, Any], field: str, known: Mapping[str, dict[int, int]]) -> dict[int, int] | None:
        """The map a PORT_QOS_MAP entry names in ``field``, or None (unset, or not defined: a defect or unknown)."""
        ref = entry.get(field)
        if ref is None or isinstance(ref, bool) or not isinstance(ref, str | int | float):
            return None
        ref_name = sv.profile_name(str(ref))
        if ref_name not in known:
            self.undefined("PORT_QOS_MAP", sv.MAP_TABLES.get(field, field.upper()), ref_name, f"the {field}",
                           f"PORT_QOS_MAP {field} names {ref_name!r}, which this text does not define; that map is "
                           "unknown")
            return None
        return known[ref_name]

    def split(self, table: str, key: str) -> tuple[list[str], frozenset[int]] | None:
        return self.guarded(table, partial(sv.split_key, key, self.at(table), self.prefix), None,
                            f"{table}|{key} is not used")


@dataclass
class _Queues:
    """What QUEUE says per port: ECN profiles, scheduling, and the queues it names at all."""

    ecn: dict[str, dict[int, EcnProfile]] = field(default_factory=dict)
    ecn_unknown: set[str] = field(default_factory=set)
    strict: dict[str, set[int]] = field(default_factory=dict)
    weights: dict[str, dict[int, int]] = field(default_factory=dict)
    sched_unknown: set[str] = field(default_factory=set)
    seen: dict[str, set[int]] = field(default_factory=dict)


@dataclass
class _Tables:
    """Every table read, per port, before the ports are put together."""

    port_qos: dict[str, dict[str, Any]]
    port_table: dict[str, dict[str, Any]]
    dscp_maps: dict[str, dict[int, int]]
    queue_maps: dict[str, dict[int, int]]
    routed: set[str]
    cables: dict[str, float]
    pfcwd: dict[str, dict[str, Any]]
    poll_ms: float | None
    wd_default: str
    queues: _Queues
    headroom: dict[str, dict[int, Headroom]]
    lossy_pgs: dict[str, set[int]]
    lossy_queues: dict[str, set[int]]


def parse_db(db: dict[str, Any], dups: Dups, r: Reading, lines: Mapping[str, int], device: str | None,
             prefix: str, fmt: str, piecewise: bool = False) -> Deployed:
    """The record of one CONFIG_DB object; ``prefix`` (``asic0/``) names its ports on a multi-ASIC device,
    ``piecewise``: entries were read one by one, so a QUEUE or PFC_WD entry missing from them is unknown."""
    c = _Db(db, dups, r, lines, prefix, piecewise)
    meta = c.table("DEVICE_METADATA").get("localhost", {})
    name = device or str(meta.get("hostname") or device_from_source(r.source))
    c.db = sv.local_voq_keys(db, meta)
    dscp_maps = c.maps("DSCP_TO_TC_MAP", 63)
    conflicts = _dscp_conflicts(c)
    pg_maps = c.maps("TC_TO_PRIORITY_GROUP_MAP", 15)
    queue_maps = c.maps("TC_TO_QUEUE_MAP", 15)
    port_qos = c.keyed("PORT_QOS_MAP")
    glob = port_qos.get("global", {})
    default_dscp = c.bound(glob, "dscp_to_tc_map", dscp_maps)
    if default_dscp is None and len(dscp_maps) == 1:
        default_dscp = next(iter(dscp_maps.values()))
    wred, schedulers, profiles = c.table("WRED_PROFILE"), c.table("SCHEDULER"), c.table("BUFFER_PROFILE")
    port_table = c.keyed("PORT")
    routed, cables, pfcwd = _routed(c), _cables(c), c.keyed("PFC_WD")
    poll_ms = _poll_ms(c, pfcwd)
    queues = _queues(c, wred, schedulers)
    # A port with WRED on some queue but not on another has ECN off there; without any, it is unknown.
    all_weights: dict[int, int] = {}
    for per_port in queues.weights.values():
        all_weights.update(per_port)
    headroom, lossy_pgs = _buffer_pgs(c, profiles)
    tables = _Tables(port_qos, port_table, dscp_maps, queue_maps, routed, cables, pfcwd, poll_ms,
                     str(meta.get("default_pfcwd_status", "")).lower(), queues, headroom, lossy_pgs,
                     _buffer_queues(c, profiles))
    names = sorted({*port_qos, *port_table, *queues.ecn, *queues.ecn_unknown, *headroom, *cables,
                    *(k for k in pfcwd if k != "GLOBAL"), *routed} - set(_NOT_PORTS), key=sv.natural)
    ports = tuple(_port(c, tables, port) for port in names)
    first_port = next(iter(port_qos.values()), {})
    return Deployed(
        device=name,
        kind="switch",
        format=fmt,
        source=r.source,
        dscp_to_priority=default_dscp or {},
        priority_to_queue=c.bound(glob, "tc_to_queue_map", queue_maps) or c.bound(first_port, "tc_to_queue_map",
                                                                                 queue_maps) or {},
        priority_to_pg=c.bound(glob, "tc_to_pg_map", pg_maps) or c.bound(first_port, "tc_to_pg_map", pg_maps) or {},
        trust="dscp" if default_dscp is not None else None,
        queue_weights=all_weights,
        watchdog=Watchdog(enabled=False, polling_ms=poll_ms) if pfcwd and not piecewise else None,
        ports=ports,
        dscp_conflicts=conflicts,
        complete="DEVICE_METADATA" in c.db and "PORT" in c.db,
        defects=tuple(c.defects.values()),
    )


def _dscp_conflicts(c: _Db) -> dict[int, frozenset[int]]:
    """DSCPs a hand-edited DSCP_TO_TC_MAP lists twice with different TCs (JSON keeps only the last)."""
    conflicts: dict[int, frozenset[int]] = {}
    for k, v in c.table("DSCP_TO_TC_MAP").items():
        for dscp_key, values in c.dups.repeated.get(id(v), {}).items():
            def clash(values: list[Any] = values, dscp_key: str = dscp_key, k: str = k) -> None:
                where = c.at("DSCP_TO_TC_MAP")
                tcs = frozenset(parse_int(sv.string(x, where, k), where, what=f"DSCP_TO_TC_MAP|{k}", lo=0, hi=15)
                                for x in values)
                if len(tcs) > 1:
                    conflicts[parse_int(dscp_key, where, what="dscp", lo=0, hi=63)] = tcs
            c.guarded("DSCP_TO_TC_MAP", clash, None)
    return conflicts


def _routed(c: _Db) -> set[str]:
    routed: set[str] = set()
    for k in c.table("INTERFACE"):
        port = c.guarded("INTERFACE", partial(sv.port_name, k.split("|")[0], c.at("INTERFACE"), c.prefix), None)
        if port is not None:
            routed.add(port)
    return routed


def _cables(c: _Db) -> dict[str, float]:
    cables: dict[str, float] = {}
    for mapping in c.table("CABLE_LENGTH").values():
        for port, length in mapping.items():
            def cable(port: str = port, length: Any = length) -> None:
                where = c.at("CABLE_LENGTH")
                cables[sv.port_name(port, where, c.prefix)] = parse_float(
                    sv.string(length, where, "CABLE_LENGTH").removesuffix("m"), where, what=f"CABLE_LENGTH {port}")
            c.guarded("CABLE_LENGTH", cable, None)
    return cables


def _poll_ms(c: _Db, pfcwd: Mapping[str, Mapping[str, Any]]) -> float | None:
    poll = pfcwd.get("GLOBAL", {}).get("POLL_INTERVAL")
    if not poll:
        return None
    return c.guarded("PFC_WD", lambda: parse_float(sv.string(poll, c.at("PFC_WD"), "POLL_INTERVAL"), c.at("PFC_WD"),
                                                   what="PFC_WD POLL_INTERVAL"), None)


def _queues(c: _Db, wred: Mapping[str, Mapping[str, Any]], schedulers: Mapping[str, Mapping[str, Any]]) -> _Queues:
    out = _Queues()
    for key, entry in c.table("QUEUE").items():
        split = c.split("QUEUE", key)
        if split is None:
            continue
        ports, queues = split
        for port in ports:
            out.seen.setdefault(port, set()).update(queues)
        if "wred_profile" in entry:
            _queue_wred(c, out, key, entry, wred, ports, queues)
        if "scheduler" in entry:
            _queue_scheduler(c, out, key, entry, schedulers, ports, queues)
    return out


def _queue_wred(c: _Db, out: _Queues, key: str, entry: Mapping[str, Any], wred: Mapping[str, Mapping[str, Any]],
                ports: list[str], queues: frozenset[int]) -> None:
    prof_name = sv.profile_name(str(entry["wred_profile"]))
    profile = c.guarded("WRED_PROFILE", partial(sv.wred, wred[prof_name], c.at("WRED_PROFILE"), prof_name), None,
                        "ECN on the queues naming it is unknown") if prof_name in wred else None
    if prof_name not in wred:
        c.undefined("QUEUE", "WRED_PROFILE", prof_name, f"ECN on QUEUE|{key}",
                    f"QUEUE|{key} names WRED_PROFILE {prof_name!r}, which this text does not define; ECN "
                    "there is unknown")
    for port in ports:
        if profile is None:
            out.ecn_unknown.add(port)
        else:
            out.ecn.setdefault(port, {}).update(dict.fromkeys(queues, profile))


def _queue_scheduler(c: _Db, out: _Queues, key: str, entry: Mapping[str, Any],
                     schedulers: Mapping[str, Mapping[str, Any]], ports: list[str], queues: frozenset[int]) -> None:
    sched_name = sv.profile_name(str(entry["scheduler"]))
    sched = schedulers.get(sched_name)
    if sched is None:
        c.undefined("QUEUE", "SCHEDULER", sched_name, f"scheduling of QUEUE|{key}",
                    f"QUEUE|{key} names SCHEDULER {sched_name!r}, which this text does not define; scheduling "
                    "there is unknown")
        out.sched_unknown.update(ports)
        return
    kind = str(sched.get("type", "")).upper()
    weight = c.guarded("SCHEDULER", partial(sv.number, sched["weight"], c.at("SCHEDULER"), f"{sched_name} weight",
                                            0, 100), None) if "weight" in sched and kind != "STRICT" else None
    for port in ports:
        out.strict.setdefault(port, set())
        out.weights.setdefault(port, {})
        if kind == "STRICT":
            out.strict[port].update(queues)
        elif weight is not None:
            out.weights[port].update(dict.fromkeys(queues, weight))


def _buffer_pgs(c: _Db, profiles: Mapping[str, Mapping[str, Any]]) -> tuple[
        dict[str, dict[int, Headroom]], dict[str, set[int]]]:
    headroom: dict[str, dict[int, Headroom]] = {}
    lossy_pgs: dict[str, set[int]] = {}
    for key, entry in c.table("BUFFER_PG").items():
        split = c.split("BUFFER_PG", key)
        if split is None:
            continue
        ports, pgs = split
        prof_ref = sv.profile_name(str(entry.get("profile", "NULL")))
        if prof_ref != "NULL" and prof_ref not in profiles:
            c.undefined("BUFFER_PG", "BUFFER_PROFILE", prof_ref, f"the buffer of BUFFER_PG|{key}",
                        f"BUFFER_PG|{key} names BUFFER_PROFILE {prof_ref!r}, which this text does not define; its "
                        "headroom is unknown")
        if prof_ref == "NULL" or prof_ref not in profiles:
            continue  # dynamic mode ("NULL") or a profile defined elsewhere: nothing to check here
        prof = profiles[prof_ref]
        if "xoff" not in prof:
            for port in ports:
                lossy_pgs.setdefault(port, set()).update(pgs)
            continue
        found = c.guarded("BUFFER_PROFILE", partial(_headroom, prof, prof_ref, c.at("BUFFER_PROFILE")), None,
                          f"profile {prof_ref!r} is not used")
        if found is not None:
            for port in ports:
                headroom.setdefault(port, {}).update(dict.fromkeys(pgs, found))
    return headroom, lossy_pgs


def _headroom(prof: Mapping[str, Any], ref: str, where: Where) -> Headroom:
    return Headroom(
        xoff_bytes=parse_bytes(sv.string(prof["xoff"], where, ref), where, what=f"{ref} xoff"),
        xon_bytes=parse_bytes(sv.string(prof.get("xon", "0"), where, ref), where, what=f"{ref} xon"),
        size_bytes=parse_bytes(sv.string(prof.get("size", "0"), where, ref), where, what=f"{ref} size"))


def _buffer_queues(c: _Db, profiles: Mapping[str, Mapping[str, Any]]) -> dict[str, set[int]]:
    lossy_queues: dict[str, set[int]] = {}
    for key, entry in c.table("BUFFER_QUEUE").items():
        split = c.split("BUFFER_QUEUE", key)
        if split is None:
            continue
        ports, queues = split
        prof_ref = sv.profile_name(str(entry.get("profile", "NULL")))
        pool = str(profiles.get(prof_ref, {}).get("pool", ""))
        if "lossy" in prof_ref or "lossy" in sv.profile_name(pool):
            for port in ports:
                lossy_queues.setdefault(port, set()).update(queues)
    return lossy_queues


def _port(c: _Db, t: _Tables, port: str) -> PortQos:
    qos = t.port_qos.get(port, {})
    attrs = t.port_table.get(port, {})
    dscp = c.bound(qos, "dscp_to_tc_map", t.dscp_maps)
    trust: Trust | None = "dscp" if dscp is not None else ("pcp" if "dot1p_to_tc_map" in qos else None)
    pfc = c.guarded("PORT_QOS_MAP", partial(sv.priorities, qos["pfc_enable"], c.at("PORT_QOS_MAP"), port), None) \
        if "pfc_enable" in qos else (frozenset() if qos else None)
    mtu = c.guarded("PORT", partial(sv.number, attrs["mtu"], c.at("PORT"), f"PORT|{port} mtu", 68, 65535), None) \
        if "mtu" in attrs else None
    speed_mbps = c.guarded("PORT", partial(sv.number, attrs["speed"], c.at("PORT"), f"PORT|{port} speed", 1, None),
                           None) if "speed" in attrs else None
    watchdog = c.guarded("PFC_WD", partial(sv.watchdog, t.pfcwd.get(port), qos, t.poll_ms, bool(t.pfcwd),
                                           t.wd_default, c.at("PFC_WD"), port), None)
    q = t.queues
    port_ecn = None if port in q.ecn_unknown else q.ecn.get(port)
    port_strict = frozenset(q.strict[port]) if port in q.strict and port not in q.sched_unknown else None
    port_weights = q.weights.get(port) if port not in q.sched_unknown else None
    if c.piecewise:
        # Entries read one by one: a queue or watchdog entry not in the text is unknown. ECN stands only when
        # every lossless queue of the port was read; which queues are strict never does (one may be missing).
        ref = sv.profile_name(str(qos.get("tc_to_queue_map", "")))
        to_queue = t.queue_maps.get(ref, {})
        lossless = {to_queue.get(p, p) for p in pfc or ()}
        port_ecn = port_ecn if lossless and lossless <= q.seen.get(port, set()) else None
        port_strict, port_weights = None, None
        watchdog = watchdog if port in t.pfcwd else None
    return PortQos(
        name=port,
        pfc_priorities=pfc,
        trust=trust,
        mtu=mtu,
        speed_bps=speed_mbps * 1e6 if speed_mbps is not None else None,
        cable_length_m=t.cables.get(port),
        headroom=t.headroom.get(port),
        ecn=port_ecn,
        strict_queues=port_strict,
        queue_weights=port_weights,
        watchdog=watchdog,
        dscp_to_priority=dscp,
        routed=True if port in t.routed else None,
        lossy_pgs=frozenset(t.lossy_pgs[port]) if port in t.lossy_pgs else None,
        lossy_queues=frozenset(t.lossy_queues[port]) if port in t.lossy_queues else None,
    )


