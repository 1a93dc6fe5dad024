"""SONiC ``config_db.json`` (or a fragment of it) into a :class:`Deployed`.

Reads the tables the lossless recipe touches: DSCP_TO_TC_MAP, TC_TO_PRIORITY_GROUP_MAP, TC_TO_QUEUE_MAP,
PORT_QOS_MAP, WRED_PROFILE, SCHEDULER, QUEUE, BUFFER_PROFILE, BUFFER_PG, BUFFER_QUEUE, CABLE_LENGTH, PORT,
INTERFACE and PFC_WD. Keys follow SONiC's ``PORT|queue`` convention, where ports may be a comma list and queues
a range (``3-4``).

Multi-ASIC and chassis configs are read three ways: a file of namespaces (``{"localhost": {...}, "asic0":
{...}}``, as ``show runningconfiguration all`` prints it), ``config_db0.json``, ``config_db1.json`` ... pasted one
after another after their ``cat`` prompts (or ``==> f <==`` headings), and keys that carry the ASIC
(``Asic0|Ethernet0``, ``host|Asic1|Ethernet8|3``); the port is named ``asic0/Ethernet0``, all on one device. A VOQ
linecard's own keys (its DEVICE_METADATA ``hostname`` and ``asic_name``) name its local ports; the queue is always
the key's last field. ``SYSTEM_PORT`` is listed, not read.

Redis dumps (``sonic-db-dump -n CONFIG_DB -y``, ``redis-dump -d 4 -y``) hold flat ``"TABLE|key"`` entries, each
``{"type": "hash", "value": {...}}`` or a plain field object; they are put back into tables. A dump that is not
one JSON object (cut) is a partial view, as are ``hgetall`` replies (:mod:`.sonic_redis`): there a QUEUE or PFC_WD
entry that is not in the text is unknown, not absent.

A fragment is read for what it says: a port with no QUEUE entry naming a WRED profile has *unknown* ECN, not
ECN off; a port with no scheduler has unknown scheduling. ``pfcwd_sw_enable`` without a PFC_WD table means
the watchdog is started with SONiC's defaults (``pfcwd start_default``) when DEVICE_METADATA says
``default_pfcwd_status: enable``, and is unknown otherwise. JSON objects that repeat a key (a hand-edited DSCP
map listing one DSCP twice) are reported as DSCP conflicts rather than silently keeping the last value.

Pastes are read table by table when the whole is not one JSON object: a table pasted without the outer braces
(``"WRED_PROFILE": {...},``), a file after a ``$ cat`` prompt, or an excerpt cut at both ends. A table the excerpt
cuts off is not used (its missing entries would read as absent). A reference (PORT_QOS_MAP to a map, QUEUE to a
WRED profile or scheduler, BUFFER_PG to a buffer profile) that the referenced table does not define is a defect of
the config (``config.undefined-reference``: the device applies nothing for it) when that table is in the text whole
and the text is not a partial view; otherwise the entry may lie outside the excerpt, so that fact is unknown, with a
warning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import ConfigDefect, Deployed, EcnProfile, Headroom, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._common import (
    Where,
    device_from_source,
    parse_bytes,
    parse_float,
    parse_int,
    parse_priorities,
)
from tensorfabric.fabric.parsers._json_tables import Dups, TableDoc
from tensorfabric.fabric.parsers._read import Reading, bare

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "sonic"
NAME = "SONiC config_db"
SUFFIXES = (".json",)
EXPECTED = ("SONiC config_db JSON tables (DSCP_TO_TC_MAP, PORT_QOS_MAP, WRED_PROFILE, QUEUE, BUFFER_PG, PFC_WD, "
            "PORT, ...)")
_TABLES = ("DSCP_TO_TC_MAP", "PORT_QOS_MAP", "WRED_PROFILE", "BUFFER_PG", "PFC_WD", "PORT", "SCHEDULER", "QUEUE",
           "BUFFER_PROFILE", "CABLE_LENGTH", "TC_TO_QUEUE_MAP", "TC_TO_PRIORITY_GROUP_MAP", "DOT1P_TO_TC_MAP",
           "BUFFER_QUEUE")
_READ = frozenset((*_TABLES, "DEVICE_METADATA", "INTERFACE"))
MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # A table, or a flat Redis-dump key of it ("PORT_QOS_MAP|Ethernet0").
    *((f'"{t}"', re.compile(rf'"{t}(?:\|[^"\n]{{1,256}})?"\s*:')) for t in _TABLES),
    ('"pfc_enable"', re.compile(r'"pfc_enable"\s*:')),
    ('"wred_profile"', re.compile(r'"wred_profile"\s*:')),
    ('"Ethernet0|3" key', re.compile(r'"(?:Ethernet|Asic)[\w|,-]{0,64}\|\d[\d-]*"\s*:')),
)
_LISTED = {"SYSTEM_PORT": "VOQ chassis system ports"}
"""Tables a RoCE config carries that no rule reads: named in the read report and the notes, never guessed from."""
_DUMP_KEYS = frozenset({"type", "value", "ttl", "expireat"})
_FILE = re.compile(r"config_db(\d{0,3})\.json\b")
_ASIC = re.compile(r"^[Aa]sic(\d{1,3})$")
_NAMESPACE = re.compile(r"^(localhost|asic\d{1,3})$")
_T = TypeVar("_T")


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


def _number(value: Any, where: Where, what: str, lo: int, hi: int | None) -> int:
    return parse_int(_str(value, where, what), where, what=what, lo=lo, hi=hi)


def _priorities(value: Any, where: Where, port: str) -> frozenset[int]:
    return parse_priorities(_str(value, where, port), where, what=f"{port} pfc_enable")


def _profile_name(value: str) -> str:
    # Old images write "[BUFFER_PROFILE|name]", newer ones the bare name.
    return value.strip("[]").split("|")[-1]


def _table_of(name: str) -> str:
    return name.split("|", 1)[0]


def _wanted(name: str) -> bool:
    """A table (or flat ``TABLE|key`` entry, or namespace) this reader uses."""
    return _table_of(name) in _READ or bool(_NAMESPACE.match(name))


def _known(name: str) -> bool:
    return _wanted(name) or _table_of(name) in _LISTED


def _files(r: Reading) -> list[tuple[str, range | None]]:
    """One ``(namespace, lines)`` per config_db file when the paste holds files after ``cat`` prompts or ``==> f <==``
    headings naming them (``config_db0.json``: namespace ``asic0``); ``[("", None)]`` for one file."""
    found: list[tuple[str, int]] = []
    for line in r.text.lines:
        if line.kind in ("command", "heading"):
            match = _FILE.search(line.text[:512])
            if match is not None:
                found.append((f"asic{match.group(1)}" if match.group(1) else "localhost", line.number))
    if not found or (len(found) == 1 and found[0][0] == "localhost"):
        return [("", None)]
    ends = [number for _, number in found[1:]] + [r.text.total + 1]
    return [(ns, range(start + 1, end)) for (ns, start), end in zip(found, ends, strict=True)]


def _unwrap(entry: Any) -> Any:
    """A Redis dump entry: ``{"type": "hash", "value": {...}}`` (sonic-db-dump, redis-dump -y; ``ttl`` and
    ``expireat`` beside it) or ``{"value": {...}}`` as design documents print it; a plain field object as is."""
    if isinstance(entry, dict) and isinstance(entry.get("value"), dict) and set(entry) <= _DUMP_KEYS:
        return entry["value"] if str(entry.get("type", "hash")) == "hash" else None
    return entry


def _unflatten(db: dict[str, Any], r: Reading, lines: dict[str, int]) -> dict[str, Any]:
    """Flat ``"TABLE|key"`` entries of a Redis dump into config_db tables; nested tables are kept as they are."""
    out: dict[str, Any] = {}
    for key, value in db.items():
        table, sep, rest = key.partition("|")
        if not sep:
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key].update(value)
            else:
                out[key] = value
            continue
        fields = _unwrap(value)
        if not isinstance(fields, dict):
            continue  # a list, set or string key of the dump: no config_db table is one
        if table in out and not isinstance(out[table], dict):
            continue
        out.setdefault(table, {})[rest] = fields
        if key in lines:
            lines.setdefault(table, lines[key])
    return out


def _collect(r: Reading, dups: Dups, lines: dict[str, int], within: range | None) -> tuple[dict[str, Any], bool]:
    """The tables of one file as a config_db object, whole when it parses as one, else table by table; and
    whether it is a partial view (a flat dump read entry by entry: an entry missing from it is unknown)."""
    doc = TableDoc(r, known=_known, within=within)
    spans = doc.tables()
    db: Any = None
    try:
        db = json.loads(doc.text, object_pairs_hook=dups)
    except (json.JSONDecodeError, RecursionError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        if any(_wanted(name) for name, _, _ in spans):
            r.warn(line, f"the text is not one JSON object ({str(exc)[:80]}); read table by table")
        db = None
    whole = isinstance(db, dict)
    if not isinstance(db, dict):
        db = {}
        for name, start, end in spans:
            line = doc.line_of(start)
            if end < 0:
                if _wanted(name):
                    r.warn(line, f"table {name} is cut off (its closing brace is not in the text); it is not used")
                continue
            if not _known(name):
                continue
            try:
                value = json.loads("{" + doc.text[start:end] + "}", object_pairs_hook=dups)
            except (json.JSONDecodeError, RecursionError, ValueError) as exc:
                r.warn(line, f"table {name} is not valid JSON ({str(exc)[:80]}); it is not used")
                continue
            if name in db:
                r.warn(line, f"table {name} appears twice; the first is used")
                continue
            db[name] = value[name]
    for name, start, end in spans:
        if name in db or any(name in v for v in db.values() if isinstance(v, dict)):
            lines.setdefault(name, doc.line_of(start))
            if end > 0 and _wanted(name):
                for number in range(doc.line_of(start), doc.line_of(end - 1) + 1):
                    r.use(number)
            elif end > 0 and _table_of(name) in _LISTED:
                r.unknown(doc.line_of(start))
    flat = any("|" in key for key in db)
    return (_unflatten(db, r, lines) if flat else db), flat and not whole


def read(r: Reading, *, device: str | None = None) -> Deployed:
    dups = Dups()
    lines: dict[str, int] = {}
    files = _files(r)
    if files[0][1] is None:
        db, piecewise = _collect(r, dups, lines, None)
    else:
        # config_db.json, config_db0.json, ... pasted one after another: one namespace each, as on the switch.
        collected = {ns: _collect(r, dups, lines, within) for ns, within in files}
        db, piecewise = {ns: part for ns, (part, _) in collected.items()}, any(p for _, p in collected.values())
    return deployed_from_db(db, dups, r, lines, device, piecewise=piecewise)


def deployed_from_db(db: dict[str, Any], dups: Dups, r: Reading, lines: Mapping[str, int], device: str | None,
                     fmt: str = FORMAT, *, piecewise: bool = False) -> Deployed:
    """The record of a config_db object, or of one object per namespace (multi-ASIC: ports ``asicN/EthernetX`` of
    one device, front-end and back-end ASICs alike). ``piecewise``: entries were read one by one (a cut flat dump,
    ``hgetall`` replies), so a QUEUE or PFC_WD entry missing from it is unknown, not absent."""
    listed = sorted({t for part in (db, *(v for k, v in db.items() if _NAMESPACE.match(k) and isinstance(v, dict)))
                     for t in part if t in _LISTED})
    notes = tuple(f"{t} ({_LISTED[t]}) is not read" for t in listed)
    if db and all(_NAMESPACE.match(k) for k in db) and all(isinstance(v, dict) for v in db.values()):
        parts = [_parse_db(v, dups, r, lines, device, "" if k == "localhost" else f"{k}/", fmt, piecewise)
                 for k, v in sorted(db.items()) if any(t in v for t in _TABLES)]
        if not parts:
            return Deployed(device=device or device_from_source(r.source), kind="switch", format=fmt,
                            source=r.source, notes=notes)
        base = parts[0]
        return replace(base, ports=tuple(p for part in parts for p in part.ports),
                       complete=all(part.complete for part in parts), notes=base.notes + notes)
    record = _parse_db(db, dups, r, lines, device, "", fmt, piecewise)
    return replace(record, notes=record.notes + notes) if notes else record


def _parse_db(db: dict[str, Any], dups: Dups, r: Reading, lines: Mapping[str, int], device: str | None,
              prefix: str, fmt: str = FORMAT, piecewise: bool = False) -> Deployed:
    source = r.source

    def at(table: str) -> Where:
        return Where(source, lines.get(table))

    def guarded(table: str, fn: Callable[[], _T], default: _T, what: str = "") -> _T:
        try:
            return fn()
        except ParseError as exc:
            r.warn(exc.line or lines.get(table), bare(exc) + (f"; {what}" if what else ""))
            return default

    def table(name: str) -> dict[str, dict[str, Any]]:
        return guarded(name, lambda: _table(db, name, at(name)), {}, f"{name} is not used")

    defects: dict[tuple[str, str], ConfigDefect] = {}

    def undefined(where: str, target: str, ref: str, what: str, unknown: str) -> None:
        """A reference to an entry its table lacks: a defect when the table is in the text whole (the device
        applies nothing for it); otherwise the entry may lie outside the excerpt, so only a warning."""
        if target in db and not piecewise:
            defects.setdefault((target, ref), ConfigDefect(lines.get(where), f"{where} names {target} {ref!r}, "
                               f"which the {target} table does not define: {what} is not applied",
                               f"define {target}|{ref} or point {where} at an entry {target} defines"))
        else:
            r.warn(lines.get(where), unknown)

    meta_table = table("DEVICE_METADATA")
    meta = meta_table.get("localhost", {})
    name = device or str(meta.get("hostname") or device_from_source(source))
    db = _local_voq_keys(db, meta)

    def keyed(table_name: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for k, v in table(table_name).items():
            if k in ("global", "GLOBAL", "AZURE"):
                out[k] = v
                continue
            port = guarded(table_name, partial(_port_name, k, at(table_name), prefix), None,
                           f"entry {k!r} is not used")
            if port is not None:
                out[port] = v
        return out

    def maps(table_name: str, hi: int) -> dict[str, dict[int, int]]:
        out: dict[str, dict[int, int]] = {}
        for k, v in table(table_name).items():
            found = guarded(table_name, partial(_int_map, v, at(table_name), f"{table_name}|{k}", hi), None,
                            f"map {k!r} is not used")
            if found is not None:
                out[k] = found
        return out

    dscp_maps = maps("DSCP_TO_TC_MAP", 63)
    conflicts: dict[int, frozenset[int]] = {}
    for k, v in table("DSCP_TO_TC_MAP").items():
        for dscp_key, values in dups.repeated.get(id(v), {}).items():
            def clash(values: list[Any] = values, dscp_key: str = dscp_key, k: str = k) -> None:
                where = at("DSCP_TO_TC_MAP")
                tcs = frozenset(parse_int(_str(x, where, k), where, what=f"DSCP_TO_TC_MAP|{k}", lo=0, hi=15)
                                for x in values)
                if len(tcs) > 1:
                    conflicts[parse_int(dscp_key, where, what="dscp", lo=0, hi=63)] = tcs
            guarded("DSCP_TO_TC_MAP", clash, None)
    pg_maps = maps("TC_TO_PRIORITY_GROUP_MAP", 15)
    queue_maps = maps("TC_TO_QUEUE_MAP", 15)
    port_qos = keyed("PORT_QOS_MAP")

    def bound(entry: Mapping[str, Any], field: str, known: Mapping[str, dict[int, int]]) -> dict[int, int] | None:
        ref = entry.get(field)
        if ref is None or isinstance(ref, bool) or not isinstance(ref, str | int | float):
            return None
        ref_name = _profile_name(str(ref))
        if ref_name not in known:
            undefined("PORT_QOS_MAP", _MAP_TABLES.get(field, field.upper()), ref_name, f"the {field}",
                      f"PORT_QOS_MAP {field} names {ref_name!r}, which this text does not define; that map is unknown")
            return None
        return known[ref_name]

    glob = port_qos.get("global", {})
    default_dscp = bound(glob, "dscp_to_tc_map", dscp_maps)
    if default_dscp is None and len(dscp_maps) == 1:
        default_dscp = next(iter(dscp_maps.values()))

    wred = table("WRED_PROFILE")
    schedulers = table("SCHEDULER")
    profiles = table("BUFFER_PROFILE")
    port_table = keyed("PORT")
    routed: set[str] = set()
    for k in table("INTERFACE"):
        port = guarded("INTERFACE", partial(_port_name, k.split("|")[0], at("INTERFACE"), prefix), None)
        if port is not None:
            routed.add(port)
    cables: dict[str, float] = {}
    for mapping in table("CABLE_LENGTH").values():
        for port, length in mapping.items():
            def cable(port: str = port, length: Any = length) -> None:
                where = at("CABLE_LENGTH")
                cables[_port_name(port, where, prefix)] = parse_float(
                    _str(length, where, "CABLE_LENGTH").removesuffix("m"), where, what=f"CABLE_LENGTH {port}")
            guarded("CABLE_LENGTH", cable, None)
    pfcwd = keyed("PFC_WD")
    poll = pfcwd.get("GLOBAL", {}).get("POLL_INTERVAL")
    poll_ms = guarded("PFC_WD", lambda: parse_float(_str(poll, at("PFC_WD"), "POLL_INTERVAL"), at("PFC_WD"),
                                                     what="PFC_WD POLL_INTERVAL"), None) if poll else None
    wd_default = str(meta.get("default_pfcwd_status", "")).lower()

    ecn: dict[str, dict[int, EcnProfile]] = {}
    ecn_unknown: set[str] = set()
    strict: dict[str, set[int]] = {}
    weights: dict[str, dict[int, int]] = {}
    sched_unknown: set[str] = set()
    seen_queues: dict[str, set[int]] = {}
    for key, entry in table("QUEUE").items():
        split = guarded("QUEUE", partial(_split_key, key, at("QUEUE"), prefix), None, f"QUEUE|{key} is not used")
        if split is None:
            continue
        ports, queues = split
        for port in ports:
            seen_queues.setdefault(port, set()).update(queues)
        if "wred_profile" in entry:
            prof_name = _profile_name(str(entry["wred_profile"]))
            profile = guarded("WRED_PROFILE", partial(_wred, wred[prof_name], at("WRED_PROFILE"), prof_name), None,
                              "ECN on the queues naming it is unknown") if prof_name in wred else None
            if prof_name not in wred:
                undefined("QUEUE", "WRED_PROFILE", prof_name, f"ECN on QUEUE|{key}",
                          f"QUEUE|{key} names WRED_PROFILE {prof_name!r}, which this text does not define; ECN "
                          "there is unknown")
            for port in ports:
                if profile is None:
                    ecn_unknown.add(port)
                else:
                    ecn.setdefault(port, {}).update(dict.fromkeys(queues, profile))
        if "scheduler" in entry:
            sched_name = _profile_name(str(entry["scheduler"]))
            sched = schedulers.get(sched_name)
            if sched is None:
                undefined("QUEUE", "SCHEDULER", sched_name, f"scheduling of QUEUE|{key}",
                          f"QUEUE|{key} names SCHEDULER {sched_name!r}, which this text does not define; scheduling "
                          "there is unknown")
                sched_unknown.update(ports)
                continue
            kind = str(sched.get("type", "")).upper()
            weight = guarded("SCHEDULER", partial(_number, sched["weight"], at("SCHEDULER"), f"{sched_name} weight",
                                                  0, 100), None) if "weight" in sched and kind != "STRICT" else None
            for port in ports:
                strict.setdefault(port, set())
                weights.setdefault(port, {})
                if kind == "STRICT":
                    strict[port].update(queues)
                elif weight is not None:
                    weights[port].update(dict.fromkeys(queues, weight))
    # A port with WRED on some queue but not on another has ECN off there; without any, it is unknown.
    all_weights: dict[int, int] = {}
    for per_port in weights.values():
        all_weights.update(per_port)

    headroom: dict[str, dict[int, Headroom]] = {}
    lossy_pgs: dict[str, set[int]] = {}
    for key, entry in table("BUFFER_PG").items():
        split = guarded("BUFFER_PG", partial(_split_key, key, at("BUFFER_PG"), prefix), None,
                        f"BUFFER_PG|{key} is not used")
        if split is None:
            continue
        ports, pgs = split
        prof_ref = _profile_name(str(entry.get("profile", "NULL")))
        if prof_ref != "NULL" and prof_ref not in profiles:
            undefined("BUFFER_PG", "BUFFER_PROFILE", prof_ref, f"the buffer of BUFFER_PG|{key}",
                      f"BUFFER_PG|{key} names BUFFER_PROFILE {prof_ref!r}, which this text does not define; its "
                      "headroom is unknown")
        if prof_ref == "NULL" or prof_ref not in profiles:
            continue  # dynamic mode ("NULL") or a profile defined elsewhere: nothing to check here
        prof = profiles[prof_ref]
        if "xoff" not in prof:
            for port in ports:
                lossy_pgs.setdefault(port, set()).update(pgs)
            continue

        def room(prof: Mapping[str, Any] = prof, ref: str = prof_ref) -> Headroom:
            where = at("BUFFER_PROFILE")
            return Headroom(
                xoff_bytes=parse_bytes(_str(prof["xoff"], where, ref), where, what=f"{ref} xoff"),
                xon_bytes=parse_bytes(_str(prof.get("xon", "0"), where, ref), where, what=f"{ref} xon"),
                size_bytes=parse_bytes(_str(prof.get("size", "0"), where, ref), where, what=f"{ref} size"))
        found = guarded("BUFFER_PROFILE", room, None, f"profile {prof_ref!r} is not used")
        if found is not None:
            for port in ports:
                headroom.setdefault(port, {}).update(dict.fromkeys(pgs, found))
    lossy_queues: dict[str, set[int]] = {}
    for key, entry in table("BUFFER_QUEUE").items():
        split = guarded("BUFFER_QUEUE", partial(_split_key, key, at("BUFFER_QUEUE"), prefix), None,
                        f"BUFFER_QUEUE|{key} is not used")
        if split is None:
            continue
        ports, queues = split
        prof_ref = _profile_name(str(entry.get("profile", "NULL")))
        pool = str(profiles.get(prof_ref, {}).get("pool", ""))
        if "lossy" in prof_ref or "lossy" in _profile_name(pool):
            for port in ports:
                lossy_queues.setdefault(port, set()).update(queues)

    names = sorted(
        {*port_qos, *port_table, *ecn, *ecn_unknown, *headroom, *cables, *(k for k in pfcwd if k != "GLOBAL"),
         *routed} - {"global", "GLOBAL", "AZURE"},
        key=_natural,
    )
    ports_out: list[PortQos] = []
    for port in names:
        qos = port_qos.get(port, {})
        attrs = port_table.get(port, {})
        dscp = bound(qos, "dscp_to_tc_map", dscp_maps)
        trust: Trust | None = "dscp" if dscp is not None else ("pcp" if "dot1p_to_tc_map" in qos else None)
        pfc = guarded("PORT_QOS_MAP", partial(_priorities, qos["pfc_enable"], at("PORT_QOS_MAP"), port), None) \
            if "pfc_enable" in qos else (frozenset() if qos else None)
        mtu = guarded("PORT", partial(_number, attrs["mtu"], at("PORT"), f"PORT|{port} mtu", 68, 65535), None) \
            if "mtu" in attrs else None
        speed_mbps = guarded("PORT", partial(_number, attrs["speed"], at("PORT"), f"PORT|{port} speed", 1, None),
                             None) if "speed" in attrs else None
        watchdog = guarded("PFC_WD", partial(_watchdog, pfcwd.get(port), qos, poll_ms, bool(pfcwd), wd_default,
                                             at("PFC_WD"), port), None)
        port_ecn = None if port in ecn_unknown else ecn.get(port)
        port_strict = frozenset(strict[port]) if port in strict and port not in sched_unknown else None
        port_weights = weights.get(port) if port not in sched_unknown else None
        if piecewise:
            # Entries read one by one: a queue or watchdog entry not in the text is unknown. ECN stands only when
            # every lossless queue of the port was read; which queues are strict never does (one may be missing).
            ref = _profile_name(str(qos.get("tc_to_queue_map", "")))
            to_queue = queue_maps.get(ref, {})
            lossless = {to_queue.get(p, p) for p in pfc or ()}
            port_ecn = port_ecn if lossless and lossless <= seen_queues.get(port, set()) else None
            port_strict, port_weights = None, None
            watchdog = watchdog if port in pfcwd else None
        ports_out.append(PortQos(
            name=port,
            pfc_priorities=pfc,
            trust=trust,
            mtu=mtu,
            speed_bps=speed_mbps * 1e6 if speed_mbps is not None else None,
            cable_length_m=cables.get(port),
            headroom=headroom.get(port),
            ecn=port_ecn,
            strict_queues=port_strict,
            queue_weights=port_weights,
            watchdog=watchdog,
            dscp_to_priority=dscp,
            routed=True if port in routed else None,
            lossy_pgs=frozenset(lossy_pgs[port]) if port in lossy_pgs else None,
            lossy_queues=frozenset(lossy_queues[port]) if port in lossy_queues else None,
        ))

    first_port = next(iter(port_qos.values()), {})
    return Deployed(
        device=name,
        kind="switch",
        format=fmt,
        source=source,
        dscp_to_priority=default_dscp or {},
        priority_to_queue=bound(glob, "tc_to_queue_map", queue_maps) or bound(first_port, "tc_to_queue_map",
                                                                             queue_maps) or {},
        priority_to_pg=bound(glob, "tc_to_pg_map", pg_maps) or bound(first_port, "tc_to_pg_map", pg_maps) or {},
        trust="dscp" if default_dscp is not None else None,
        queue_weights=all_weights,
        watchdog=Watchdog(enabled=False, polling_ms=poll_ms) if pfcwd and not piecewise else None,
        ports=tuple(ports_out),
        dscp_conflicts=conflicts,
        complete="DEVICE_METADATA" in db and "PORT" in db,
        defects=tuple(defects.values()),
    )


_MAP_TABLES = {"tc_to_pg_map": "TC_TO_PRIORITY_GROUP_MAP"}
"""PORT_QOS_MAP fields whose table is not the field's name in capitals."""


def _local_voq_keys(db: dict[str, Any], meta: Mapping[str, Any]) -> dict[str, Any]:
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
    for table in _TABLES:
        entries = db.get(table)
        if isinstance(entries, dict) and any("|" in k for k in entries):
            out[table] = {local(k): v for k, v in entries.items()}
    return out


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
