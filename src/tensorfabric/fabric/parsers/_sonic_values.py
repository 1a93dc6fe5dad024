"""The values of SONiC CONFIG_DB tables: table shapes, port and ``PORT|queue`` keys (multi-ASIC and VOQ forms),
numbers, profile references, WRED profiles and the PFC watchdog of one port."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tensorfabric.fabric.deployed import EcnProfile, Watchdog
from tensorfabric.fabric.parsers._common import Where, parse_bytes, parse_float, parse_int, parse_priorities

__all__ = ["MAP_TABLES", "TABLES", "int_map", "local_voq_keys", "natural", "number", "port_name", "priorities",
           "profile_name", "split_key", "string", "table", "watchdog", "wred"]

TABLES = ("DSCP_TO_TC_MAP", "PORT_QOS_MAP", "WRED_PROFILE", "BUFFER_PG", "PFC_WD", "PORT", "SCHEDULER", "QUEUE",
          "BUFFER_PROFILE", "CABLE_LENGTH", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP", "DOT1P_TO_TC_MAP",
          "BUFFER_QUEUE")
"""The CONFIG_DB tables the lossless recipe touches (DEVICE_METADATA and INTERFACE are read too)."""
_ASIC = re.compile(r"^[Aa]sic(\d{1,3})$")


def table(db: Mapping[str, Any], name: str, where: Where) -> dict[str, dict[str, Any]]:
    table = db.get(name, {})
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise where.error(f"{name} must be an object of objects, as config_db.json writes tables")
    return table


def string(value: Any, where: Where, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise where.error(f"{what}: {value!r} must be a string")
    return str(value)


def int_map(table: Mapping[str, Any], where: Where, what: str, hi: int) -> dict[int, int]:
    return {
        parse_int(str(k), where, what=f"{what} key", lo=0, hi=hi): parse_int(string(v, where, what), where, what=what,
                                                                               lo=0, hi=15)
        for k, v in table.items()
    }


def port_name(raw: str, where: Where, prefix: str = "") -> str:
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


def split_key(key: str, where: Where, prefix: str = "") -> tuple[list[str], frozenset[int]]:
    ports, sep, queues = key.rpartition("|")
    if not sep or not ports:
        raise where.error(f"key {key!r} must be 'PORT|QUEUE' such as 'Ethernet0|3' or 'Ethernet0,Ethernet4|3-4'")
    names = [port_name(p, where, prefix) for p in ports.split(",") if p]
    return names, parse_priorities(queues, where, what=f"queues in {key!r}")


def number(value: Any, where: Where, what: str, lo: int, hi: int | None) -> int:
    return parse_int(string(value, where, what), where, what=what, lo=lo, hi=hi)


def priorities(value: Any, where: Where, port: str) -> frozenset[int]:
    return parse_priorities(string(value, where, port), where, what=f"{port} pfc_enable")


def profile_name(value: str) -> str:
    # Old images write "[BUFFER_PROFILE|name]", newer ones the bare name.
    return value.strip("[]").split("|")[-1]


MAP_TABLES = {"tc_to_pg_map": "TC_TO_PRIORITY_GROUP_MAP"}
"""PORT_QOS_MAP fields whose table is not the field's name in capitals."""


def local_voq_keys(db: dict[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
    """On a VOQ linecard, QUEUE and BUFFER_* keys name ports system-wide (``lc1|asic0|Ethernet0|3``) while PORT and
    PORT_QOS_MAP name them locally (``Ethernet0``): keys of this linecard's own ASIC (DEVICE_METADATA ``hostname``
    and ``asic_name``) are read as the local port, so one port is one record. Other linecards' keys keep
    ``asicN/EthernetX``; the trailing queue is never split off as part of the port."""
    host, asic = str(meta.get("hostname", "")), str(meta.get("asic_name", "")).lower()
    if not host or not _ASIC.match(asic):
        return db
    own = f"{host}|".lower()

    def local(key: str) -> str:
        parts = key.split("|")
        if len(parts) >= 3 and key.lower().startswith(own) and parts[1].lower() == asic:
            return "|".join(parts[2:])
        return key

    out = dict(db)
    for table in TABLES:
        entries = db.get(table)
        if isinstance(entries, dict) and any("|" in k for k in entries):
            out[table] = {local(k): v for k, v in entries.items()}
    return out


def wred(entry: Mapping[str, Any], where: Where, name: str) -> EcnProfile:
    for field in ("green_min_threshold", "green_max_threshold"):
        if field not in entry:
            raise where.error(f"WRED_PROFILE|{name} lacks {field}")
    mode = str(entry.get("ecn", "ecn_none"))
    return EcnProfile(
        kmin_bytes=parse_bytes(string(entry["green_min_threshold"], where, name), where, what=f"{name} min"),
        kmax_bytes=parse_bytes(string(entry["green_max_threshold"], where, name), where, what=f"{name} max"),
        pmax_percent=parse_float(string(entry.get("green_drop_probability", "100"), where, name), where,
                                 what=f"{name} green_drop_probability"),
        ecn=mode not in ("ecn_none", ""),
    )


def watchdog(entry: Mapping[str, Any] | None, qos: Mapping[str, Any], poll_ms: float | None, table: bool,
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
        return None if value is None else parse_float(string(value, where, port), where, what=f"PFC_WD|{port} {field}")

    return Watchdog(enabled=True, detection_ms=ms("detection_time"), restoration_ms=ms("restoration_time"),
                    action=str(entry.get("action", "drop")), polling_ms=poll_ms)


def natural(name: str) -> tuple[str, int]:
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits[-9:]) if digits else -1)
