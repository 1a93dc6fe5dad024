"""SONiC ``config_db.json`` (or a fragment of it) into a :class:`Deployed`.

Reads the tables the lossless recipe touches: DSCP_TO_TC_MAP, TC_TO_PRIORITY_GROUP_MAP, TC_TO_QUEUE_MAP,
PORT_QOS_MAP, WRED_PROFILE, SCHEDULER, QUEUE, BUFFER_PROFILE, BUFFER_PG, CABLE_LENGTH, PORT and PFC_WD.
Keys follow SONiC's ``PORT|queue`` convention, where ports may be a comma list and queues a range (``3-4``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tensorfabric.fabric.deployed import Deployed, EcnProfile, Headroom, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._common import (
    Where,
    device_from_source,
    parse_bytes,
    parse_float,
    parse_int,
    parse_priorities,
)

__all__ = ["FORMAT", "SUFFIXES", "parse", "sniff"]

FORMAT = "sonic"
SUFFIXES = (".json",)
_TABLES = ("DSCP_TO_TC_MAP", "PORT_QOS_MAP", "WRED_PROFILE", "BUFFER_PG", "PFC_WD", "PORT", "SCHEDULER", "QUEUE",
           "BUFFER_PROFILE", "CABLE_LENGTH", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP", "DOT1P_TO_TC_MAP")


def sniff(text: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith("{") and any(f'"{table}"' in text for table in _TABLES)


def _table(db: Mapping[str, Any], name: str, where: Where) -> dict[str, dict[str, Any]]:
    table = db.get(name, {})
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise where.error(f"{name} must be an object of objects, as config_db.json writes tables")
    return table


def _str(value: Any, where: Where, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise where.error(f"{what}: {value!r} must be a string")
    return str(value)


def _int_map(table: Mapping[str, Any], where: Where, what: str, hi: int) -> dict[int, int]:
    return {
        parse_int(str(k), where, what=f"{what} key", lo=0, hi=hi): parse_int(_str(v, where, what), where, what=what,
                                                                               lo=0, hi=15)
        for k, v in table.items()
    }


def _split_key(key: str, where: Where) -> tuple[list[str], frozenset[int]]:
    ports, sep, queues = key.partition("|")
    if not sep or not ports:
        raise where.error(f"key {key!r} must be 'PORT|QUEUE' such as 'Ethernet0|3' or 'Ethernet0,Ethernet4|3-4'")
    return [p for p in ports.split(",") if p], parse_priorities(queues, where, what=f"queues in {key!r}")


def _profile_name(value: str) -> str:
    # Old images write "[BUFFER_PROFILE|name]", newer ones the bare name.
    return value.strip("[]").split("|")[-1]


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    where = Where(source)
    try:
        db = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        raise Where(source, line).error(f"not valid JSON: {exc}") from None
    if not isinstance(db, dict) or not any(t in db for t in _TABLES):
        raise where.error(f"not a SONiC config_db: expected an object with one of {', '.join(_TABLES)}")
    meta = _table(db, "DEVICE_METADATA", where).get("localhost", {})
    name = device or str(meta.get("hostname") or device_from_source(source))

    dscp_maps = {k: _int_map(v, where, f"DSCP_TO_TC_MAP|{k}", 63)
                 for k, v in _table(db, "DSCP_TO_TC_MAP", where).items()}
    pg_maps = {k: _int_map(v, where, f"TC_TO_PRIORITY_GROUP_MAP|{k}", 15)
               for k, v in _table(db, "TC_TO_PRIORITY_GROUP_MAP", where).items()}
    queue_maps = {k: _int_map(v, where, f"TC_TO_QUEUE_MAP|{k}", 15)
                  for k, v in _table(db, "TC_TO_QUEUE_MAP", where).items()}
    port_qos = _table(db, "PORT_QOS_MAP", where)

    def bound(entry: Mapping[str, Any], field: str, maps: Mapping[str, dict[int, int]]) -> dict[int, int] | None:
        ref = entry.get(field)
        if ref is None:
            return None
        ref_name = _profile_name(_str(ref, where, f"PORT_QOS_MAP {field}"))
        if ref_name not in maps:
            raise where.error(f"PORT_QOS_MAP {field} names {ref_name!r}, which no map defines")
        return maps[ref_name]

    glob = port_qos.get("global", {})
    default_dscp = bound(glob, "dscp_to_tc_map", dscp_maps)
    if default_dscp is None and len(dscp_maps) == 1:
        default_dscp = next(iter(dscp_maps.values()))

    wred = _table(db, "WRED_PROFILE", where)
    schedulers = _table(db, "SCHEDULER", where)
    profiles = _table(db, "BUFFER_PROFILE", where)
    port_table = _table(db, "PORT", where)
    cables: dict[str, float] = {}
    for mapping in _table(db, "CABLE_LENGTH", where).values():
        for port, length in mapping.items():
            cables[port] = parse_float(_str(length, where, "CABLE_LENGTH").removesuffix("m"), where,
                                       what=f"CABLE_LENGTH {port}")
    pfcwd = _table(db, "PFC_WD", where)
    poll = pfcwd.get("GLOBAL", {}).get("POLL_INTERVAL")
    poll_ms = parse_float(_str(poll, where, "POLL_INTERVAL"), where, what="PFC_WD POLL_INTERVAL") if poll else None

    ecn: dict[str, dict[int, EcnProfile]] = {}
    strict: dict[str, set[int]] = {}
    weights: dict[int, int] = {}
    for key, entry in _table(db, "QUEUE", where).items():
        ports, queues = _split_key(key, where)
        for port in ports:
            strict.setdefault(port, set())
            ecn.setdefault(port, {})
        if "wred_profile" in entry:
            prof_name = _profile_name(_str(entry["wred_profile"], where, key))
            if prof_name not in wred:
                raise where.error(f"QUEUE|{key} names WRED_PROFILE {prof_name!r}, which is not defined")
            profile = _wred(wred[prof_name], where, prof_name)
            for port in ports:
                ecn[port].update(dict.fromkeys(queues, profile))
        if "scheduler" in entry:
            sched_name = _profile_name(_str(entry["scheduler"], where, key))
            sched = schedulers.get(sched_name)
            if sched is None:
                raise where.error(f"QUEUE|{key} names SCHEDULER {sched_name!r}, which is not defined")
            if str(sched.get("type", "")).upper() == "STRICT":
                for port in ports:
                    strict[port].update(queues)
            elif "weight" in sched:
                weight = parse_int(_str(sched["weight"], where, sched_name), where, what=f"{sched_name} weight",
                                   lo=0, hi=100)
                weights.update(dict.fromkeys(queues, weight))

    headroom: dict[str, dict[int, Headroom]] = {}
    for key, entry in _table(db, "BUFFER_PG", where).items():
        ports, pgs = _split_key(key, where)
        prof_ref = _profile_name(_str(entry.get("profile", "NULL"), where, key))
        if prof_ref == "NULL" or prof_ref not in profiles:
            continue  # dynamic mode ("NULL") or a lossy profile defined elsewhere: nothing to check here
        prof = profiles[prof_ref]
        if "xoff" not in prof:
            continue  # lossy profile
        room = Headroom(
            xoff_bytes=parse_bytes(_str(prof["xoff"], where, prof_ref), where, what=f"{prof_ref} xoff"),
            xon_bytes=parse_bytes(_str(prof.get("xon", "0"), where, prof_ref), where, what=f"{prof_ref} xon"),
            size_bytes=parse_bytes(_str(prof.get("size", "0"), where, prof_ref), where, what=f"{prof_ref} size"),
        )
        for port in ports:
            headroom.setdefault(port, {}).update(dict.fromkeys(pgs, room))

    names = sorted(
        {*port_qos, *port_table, *ecn, *headroom, *cables, *(k for k in pfcwd if k != "GLOBAL")} - {"global"},
        key=_natural,
    )
    ports_out: list[PortQos] = []
    for port in names:
        qos = port_qos.get(port, {})
        attrs = port_table.get(port, {})
        wd_entry = pfcwd.get(port)
        dscp = bound(qos, "dscp_to_tc_map", dscp_maps)
        trust: Trust | None = "dscp" if dscp is not None else ("pcp" if "dot1p_to_tc_map" in qos else None)
        ports_out.append(PortQos(
            name=port,
            pfc_priorities=parse_priorities(_str(qos["pfc_enable"], where, port), where, what=f"{port} pfc_enable")
            if "pfc_enable" in qos else (frozenset() if qos else None),
            trust=trust,
            mtu=parse_int(_str(attrs["mtu"], where, port), where, what=f"PORT|{port} mtu", lo=68, hi=65535)
            if "mtu" in attrs else None,
            speed_bps=parse_int(_str(attrs["speed"], where, port), where, what=f"PORT|{port} speed", lo=1) * 1e6
            if "speed" in attrs else None,
            cable_length_m=cables.get(port),
            headroom=headroom.get(port),
            ecn=ecn.get(port),
            strict_queues=frozenset(strict[port]) if port in strict else None,
            watchdog=_watchdog(wd_entry, qos, poll_ms, where, port) if wd_entry is not None or pfcwd else None,
            dscp_to_priority=dscp,
        ))

    first_port = next(iter(port_qos.values()), {})
    return Deployed(
        device=name,
        kind="switch",
        format=FORMAT,
        source=source,
        dscp_to_priority=default_dscp or {},
        priority_to_queue=bound(glob, "tc_to_queue_map", queue_maps) or bound(first_port, "tc_to_queue_map",
                                                                             queue_maps) or {},
        priority_to_pg=bound(glob, "tc_to_pg_map", pg_maps) or bound(first_port, "tc_to_pg_map", pg_maps) or {},
        trust="dscp" if default_dscp is not None else None,
        queue_weights=weights,
        watchdog=Watchdog(enabled=False, polling_ms=poll_ms) if pfcwd else None,
        ports=tuple(ports_out),
    )


def _wred(entry: Mapping[str, Any], where: Where, name: str) -> EcnProfile:
    for field in ("green_min_threshold", "green_max_threshold"):
        if field not in entry:
            raise where.error(f"WRED_PROFILE|{name} lacks {field}")
    mode = str(entry.get("ecn", "ecn_none"))
    return EcnProfile(
        kmin_bytes=parse_bytes(_str(entry["green_min_threshold"], where, name), where, what=f"{name} min"),
        kmax_bytes=parse_bytes(_str(entry["green_max_threshold"], where, name), where, what=f"{name} max"),
        pmax_percent=parse_float(_str(entry.get("green_drop_probability", "100"), where, name), where,
                                 what=f"{name} green_drop_probability"),
        ecn=mode not in ("ecn_none", ""),
    )


def _watchdog(entry: Mapping[str, Any] | None, qos: Mapping[str, Any], poll_ms: float | None, where: Where,
              port: str) -> Watchdog:
    if entry is None or not str(qos.get("pfcwd_sw_enable", "x")).strip():
        return Watchdog(enabled=False, polling_ms=poll_ms)

    def ms(field: str) -> float | None:
        value = entry.get(field)
        return None if value is None else parse_float(_str(value, where, port), where, what=f"PFC_WD|{port} {field}")

    return Watchdog(enabled=True, detection_ms=ms("detection_time"), restoration_ms=ms("restoration_time"),
                    action=str(entry.get("action", "drop")), polling_ms=poll_ms)


def _natural(name: str) -> tuple[str, int]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits[-9:]) if digits else -1)
