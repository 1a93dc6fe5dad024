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
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.parsers._common import device_from_source
from tensorfabric.fabric.parsers._json_tables import Dups, TableDoc
from tensorfabric.fabric.parsers._read import Reading
from tensorfabric.fabric.parsers._sonic_db import parse_db
from tensorfabric.fabric.parsers._sonic_values import TABLES as _TABLES
from tensorfabric.jsonload import load_json

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "sonic"
NAME = "SONiC config_db"
SUFFIXES = (".json",)
EXPECTED = ("SONiC config_db JSON tables (DSCP_TO_TC_MAP, PORT_QOS_MAP, WRED_PROFILE, QUEUE, BUFFER_PG, PFC_WD, "
            "PORT, ...)")
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
_NAMESPACE = re.compile(r"^(localhost|asic\d{1,3})$")


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
        db = load_json(doc.text, what="a CONFIG_DB object", source="CONFIG_DB", object_pairs_hook=dups)
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
                value = load_json("{" + doc.text[start:end] + "}", what=f"table {name}", source="CONFIG_DB",
                                  object_pairs_hook=dups)
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
        parts = [parse_db(v, dups, r, lines, device, "" if k == "localhost" else f"{k}/", fmt, piecewise)
                 for k, v in sorted(db.items()) if any(t in v for t in _TABLES)]
        if not parts:
            return Deployed(device=device or device_from_source(r.source), kind="switch", format=fmt,
                            source=r.source, notes=notes)
        base = parts[0]
        return replace(base, ports=tuple(p for part in parts for p in part.ports),
                       complete=all(part.complete for part in parts), notes=base.notes + notes)
    record = parse_db(db, dups, r, lines, device, "", fmt, piecewise)
    return replace(record, notes=record.notes + notes) if notes else record
