"""SONiC ``config_db.json`` (or a fragment of it) into a :class:`Deployed`.

Reads the tables the lossless recipe touches: DSCP_TO_TC_MAP, TC_TO_PRIORITY_GROUP_MAP, TC_TO_QUEUE_MAP,
PORT_QOS_MAP, WRED_PROFILE, SCHEDULER, QUEUE, BUFFER_PROFILE, BUFFER_PG, BUFFER_QUEUE, CABLE_LENGTH, PORT,
INTERFACE and PFC_WD. Keys follow SONiC's ``PORT|queue`` convention, where ports may be a comma list and queues
a range (``3-4``).

Multi-ASIC and chassis configs are read two ways: a file of namespaces (``{"localhost": {...}, "asic0":
{...}}``, as ``show runningconfiguration all`` prints it) and keys that carry the ASIC (``Asic0|Ethernet0``,
``host|Asic1|Ethernet8|3``); either way the port is named ``asic0/Ethernet0``.

A fragment is read for what it says: a port with no QUEUE entry naming a WRED profile has *unknown* ECN, not
ECN off; a port with no scheduler has unknown scheduling. ``pfcwd_sw_enable`` without a PFC_WD table means
the watchdog is started with SONiC's defaults (``pfcwd start_default``) when DEVICE_METADATA says
``default_pfcwd_status: enable``, and is unknown otherwise. JSON objects that repeat a key (a hand-edited DSCP
map listing one DSCP twice) are reported as DSCP conflicts rather than silently keeping the last value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
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
           "BUFFER_PROFILE", "CABLE_LENGTH", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP", "DOT1P_TO_TC_MAP",
           "BUFFER_QUEUE")
_ASIC = re.compile(r"^[Aa]sic(\d{1,3})$")
_NAMESPACE = re.compile(r"^(localhost|asic\d{1,3})$")


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


def _port_name(raw: str, where: Where, prefix: str = "") -> str:
    """``Ethernet0``, ``Asic0|Ethernet0`` or ``host|Asic0|Ethernet0`` into ``[asicN/]Ethernet0``."""
    parts = raw.split("|")
    for i, part in enumerate(parts[:-1]):
        match = _ASIC.match(part)
        if match is not None:
            if i + 2 != len(parts):
                break
            return f"asic{match.group(1)}/{parts[-1]}"
    if len(parts) > 1 or not raw:
        raise where.error(f"port {raw!r} must be 'Ethernet0', 'Asic0|Ethernet0' or 'HOST|Asic0|Ethernet0'")
    return prefix + raw


def _split_key(key: str, where: Where, prefix: str = "") -> tuple[list[str], frozenset[int]]:
    ports, sep, queues = key.rpartition("|")
    if not sep or not ports:
        raise where.error(f"key {key!r} must be 'PORT|QUEUE' such as 'Ethernet0|3' or 'Ethernet0,Ethernet4|3-4'")
    names = [_port_name(p, where, prefix) for p in ports.split(",") if p]
    return names, parse_priorities(queues, where, what=f"queues in {key!r}")


def _profile_name(value: str) -> str:
    # Old images write "[BUFFER_PROFILE|name]", newer ones the bare name.
    return value.strip("[]").split("|")[-1]


class _Dups:
    """``object_pairs_hook`` that keeps every value of a repeated key, by the identity of the object."""

    def __init__(self) -> None:
        self.repeated: dict[int, dict[str, list[Any]]] = {}

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        again: dict[str, list[Any]] = {}
        for key, value in pairs:
            if key in out:
                again.setdefault(key, [out[key]]).append(value)
            out[key] = value
        if again:
            self.repeated[id(out)] = again
        return out


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    where = Where(source)
    dups = _Dups()
    try:
        db = json.loads(text, object_pairs_hook=dups)
    except (json.JSONDecodeError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        raise Where(source, line).error(f"not valid JSON: {exc}") from None
    except ValueError as exc:  # an integer literal past Python's digit limit
        raise where.error(f"not usable JSON: {str(exc)[:80]}") from None
    if not isinstance(db, dict):
        raise where.error("not a SONiC config_db: expected a JSON object of tables")
    if db and all(_NAMESPACE.match(k) for k in db) and all(isinstance(v, dict) for v in db.values()):
        parts = [_parse_db(v, dups, source, device, "" if k == "localhost" else f"{k}/")
                 for k, v in sorted(db.items()) if any(t in v for t in _TABLES)]
        if not parts:
            raise where.error(f"no namespace holds one of {', '.join(_TABLES)}")
        base = parts[0]
        return replace(base, ports=tuple(p for part in parts for p in part.ports),
                       complete=all(part.complete for part in parts))
    return _parse_db(db, dups, source, device, "")


def _parse_db(db: dict[str, Any], dups: _Dups, source: str, device: str | None, prefix: str) -> Deployed:
    where = Where(source)
    if not any(t in db for t in _TABLES):
        raise where.error(f"not a SONiC config_db: expected an object with one of {', '.join(_TABLES)}")
    meta = _table(db, "DEVICE_METADATA", where).get("localhost", {})
    name = device or str(meta.get("hostname") or device_from_source(source))

    def keyed(table_name: str) -> dict[str, dict[str, Any]]:
        return {_port_name(k, where, prefix) if k not in ("global", "GLOBAL", "AZURE") else k: v
                for k, v in _table(db, table_name, where).items()}

    dscp_maps = {k: _int_map(v, where, f"DSCP_TO_TC_MAP|{k}", 63)
                 for k, v in _table(db, "DSCP_TO_TC_MAP", where).items()}
    conflicts: dict[int, frozenset[int]] = {}
    for k, v in _table(db, "DSCP_TO_TC_MAP", where).items():
        for dscp_key, values in dups.repeated.get(id(v), {}).items():
            tcs = frozenset(parse_int(_str(x, where, k), where, what=f"DSCP_TO_TC_MAP|{k}", lo=0, hi=15)
                            for x in values)
            if len(tcs) > 1:
                conflicts[parse_int(dscp_key, where, what="dscp", lo=0, hi=63)] = tcs
    pg_maps = {k: _int_map(v, where, f"TC_TO_PRIORITY_GROUP_MAP|{k}", 15)
               for k, v in _table(db, "TC_TO_PRIORITY_GROUP_MAP", where).items()}
    queue_maps = {k: _int_map(v, where, f"TC_TO_QUEUE_MAP|{k}", 15)
                  for k, v in _table(db, "TC_TO_QUEUE_MAP", where).items()}
    port_qos = keyed("PORT_QOS_MAP")

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
    port_table = keyed("PORT")
    routed = {_port_name(k.split("|")[0], where, prefix) for k in _table(db, "INTERFACE", where)}
    cables: dict[str, float] = {}
    for mapping in _table(db, "CABLE_LENGTH", where).values():
        for port, length in mapping.items():
            cables[_port_name(port, where, prefix)] = parse_float(
                _str(length, where, "CABLE_LENGTH").removesuffix("m"), where, what=f"CABLE_LENGTH {port}")
    pfcwd = keyed("PFC_WD")
    poll = pfcwd.get("GLOBAL", {}).get("POLL_INTERVAL")
    poll_ms = parse_float(_str(poll, where, "POLL_INTERVAL"), where, what="PFC_WD POLL_INTERVAL") if poll else None
    wd_default = str(meta.get("default_pfcwd_status", "")).lower()

    ecn: dict[str, dict[int, EcnProfile]] = {}
    strict: dict[str, set[int]] = {}
    weights: dict[str, dict[int, int]] = {}
    for key, entry in _table(db, "QUEUE", where).items():
        ports, queues = _split_key(key, where, prefix)
        if "wred_profile" in entry:
            prof_name = _profile_name(_str(entry["wred_profile"], where, key))
            if prof_name not in wred:
                raise where.error(f"QUEUE|{key} names WRED_PROFILE {prof_name!r}, which is not defined")
            profile = _wred(wred[prof_name], where, prof_name)
            for port in ports:
                ecn.setdefault(port, {}).update(dict.fromkeys(queues, profile))
        if "scheduler" in entry:
            sched_name = _profile_name(_str(entry["scheduler"], where, key))
            sched = schedulers.get(sched_name)
            if sched is None:
                raise where.error(f"QUEUE|{key} names SCHEDULER {sched_name!r}, which is not defined")
            kind = str(sched.get("type", "")).upper()
            for port in ports:
                strict.setdefault(port, set())
                weights.setdefault(port, {})
                if kind == "STRICT":
                    strict[port].update(queues)
                elif "weight" in sched:
                    weights[port].update(dict.fromkeys(queues, parse_int(
                        _str(sched["weight"], where, sched_name), where, what=f"{sched_name} weight", lo=0,
                        hi=100)))
    # A port with WRED on some queue but not on another has ECN off there; without any, it is unknown.
    all_weights: dict[int, int] = {}
    for table in weights.values():
        all_weights.update(table)

    headroom: dict[str, dict[int, Headroom]] = {}
    lossy_pgs: dict[str, set[int]] = {}
    for key, entry in _table(db, "BUFFER_PG", where).items():
        ports, pgs = _split_key(key, where, prefix)
        prof_ref = _profile_name(_str(entry.get("profile", "NULL"), where, key))
        if prof_ref == "NULL" or prof_ref not in profiles:
            continue  # dynamic mode ("NULL") or a profile defined elsewhere: nothing to check here
        prof = profiles[prof_ref]
        if "xoff" not in prof:
            for port in ports:
                lossy_pgs.setdefault(port, set()).update(pgs)
            continue
        room = Headroom(
            xoff_bytes=parse_bytes(_str(prof["xoff"], where, prof_ref), where, what=f"{prof_ref} xoff"),
            xon_bytes=parse_bytes(_str(prof.get("xon", "0"), where, prof_ref), where, what=f"{prof_ref} xon"),
            size_bytes=parse_bytes(_str(prof.get("size", "0"), where, prof_ref), where, what=f"{prof_ref} size"),
        )
        for port in ports:
            headroom.setdefault(port, {}).update(dict.fromkeys(pgs, room))
    lossy_queues: dict[str, set[int]] = {}
    for key, entry in _table(db, "BUFFER_QUEUE", where).items():
        ports, queues = _split_key(key, where, prefix)
        prof_ref = _profile_name(_str(entry.get("profile", "NULL"), where, key))
        pool = str(profiles.get(prof_ref, {}).get("pool", ""))
        if "lossy" in prof_ref or "lossy" in _profile_name(pool):
            for port in ports:
                lossy_queues.setdefault(port, set()).update(queues)

    names = sorted(
        {*port_qos, *port_table, *ecn, *headroom, *cables, *(k for k in pfcwd if k != "GLOBAL"), *routed}
        - {"global", "GLOBAL", "AZURE"},
        key=_natural,
    )
    ports_out: list[PortQos] = []
    for port in names:
        qos = port_qos.get(port, {})
        attrs = port_table.get(port, {})
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
            queue_weights=weights.get(port),
            watchdog=_watchdog(pfcwd.get(port), qos, poll_ms, bool(pfcwd), wd_default, where, port),
            dscp_to_priority=dscp,
            routed=True if port in routed else None,
            lossy_pgs=frozenset(lossy_pgs[port]) if port in lossy_pgs else None,
            lossy_queues=frozenset(lossy_queues[port]) if port in lossy_queues else None,
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
        queue_weights=all_weights,
        watchdog=Watchdog(enabled=False, polling_ms=poll_ms) if pfcwd else None,
        ports=tuple(ports_out),
        dscp_conflicts=conflicts,
        complete="DEVICE_METADATA" in db and "PORT" in db,
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


def _watchdog(entry: Mapping[str, Any] | None, qos: Mapping[str, Any], poll_ms: float | None, table: bool,
              default_status: str, where: Where, port: str) -> Watchdog | None:
    sw_enable = qos.get("pfcwd_sw_enable")
    if not table:
        # No PFC_WD table: `pfcwd start_default` runs at boot when DEVICE_METADATA asks for it, with its defaults.
        if sw_enable is not None and str(sw_enable).strip() and default_status == "enable":
            return Watchdog(enabled=True, action="drop")
        if sw_enable is not None and default_status == "disable":
            return Watchdog(enabled=False)
        return None
    if entry is None or (sw_enable is not None and not str(sw_enable).strip()):
        return Watchdog(enabled=False, polling_ms=poll_ms)

    def ms(field: str) -> float | None:
        value = entry.get(field)
        return None if value is None else parse_float(_str(value, where, port), where, what=f"PFC_WD|{port} {field}")

    return Watchdog(enabled=True, detection_ms=ms("detection_time"), restoration_ms=ms("restoration_time"),
                    action=str(entry.get("action", "drop")), polling_ms=poll_ms)


def _natural(name: str) -> tuple[str, int]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits[-9:]) if digits else -1)
