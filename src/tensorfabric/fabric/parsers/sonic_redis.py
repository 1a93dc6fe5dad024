"""SONiC CONFIG_DB read key by key: ``redis-cli -n 4 hgetall "PORT_QOS_MAP|Ethernet0"`` and ``sonic-db-cli`` output.

Operators asked for one table entry paste the command and what it printed, one after another:

* ``redis-cli`` on a terminal numbers the fields and values it alternates (`` 1) "pfc_enable"`` / `` 2) "3,4"``);
  piped, or with ``--raw``, it prints them bare, one a line; ``| paste - -`` puts each pair on one line;
* ``sonic-db-cli CONFIG_DB hgetall KEY`` prints a Python dict (``{'pfc_enable': '3,4', ...}``);
* ``hget KEY FIELD`` prints one value.

The key comes from the command, so an output without its command line cannot be placed and is skipped. Only
CONFIG_DB is read (``redis-cli -n 4``, ``sonic-db-cli CONFIG_DB``); ``-n asic0`` (sonic-db-cli) or ``ip netns exec
asic0`` names a namespace, whose ports become ``asic0/Ethernet0`` as in a multi-ASIC config_db. The entries are put
together into config_db tables and read by the config_db reader (:func:`~tensorfabric.fabric.parsers.sonic.
deployed_from_db`): the same facts as the JSON file. ``keys *`` listings and other databases are skipped and listed.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.parsers._json_tables import Dups
from tensorfabric.fabric.parsers._read import Reading, markers
from tensorfabric.fabric.parsers.sonic import deployed_from_db

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "sonic-redis"
NAME = "SONiC CONFIG_DB (redis-cli)"
SUFFIXES = (".redis",)
EXPECTED = ("'redis-cli -n 4 hgetall \"PORT_QOS_MAP|Ethernet0\"' or 'sonic-db-cli CONFIG_DB hgetall KEY' commands "
            "with their output")
MARKERS = markers(
    ("redis-cli hgetall", r"(?i)^(?:sudo\s+)?(?:ip netns exec \S+\s+)?redis-cli\b[^\n]{0,200}\bhget(?:all)?\s"),
    ("sonic-db-cli CONFIG_DB hgetall", r"(?i)^(?:sudo\s+)?sonic-db-cli\b[^\n]{0,100}\bCONFIG_DB\s+hget(?:all)?\s"),
    ("numbered reply", r'^\s{0,4}\d{1,4}\) "(?:pfc_enable|dscp_to_tc_map|wred_profile|scheduler|profile|xoff)"$'),
)
# The command: its database, namespace, verb and key (quoted or not). Bounded classes only: linear on any line.
_COMMAND = re.compile(
    r"(?i)^(?:sudo\s+)?(?:ip\s+netns\s+exec\s+(?P<netns>\S{1,32})\s+)?"
    r"(?P<tool>redis-cli|sonic-db-cli)\b(?P<opts>[^\n]{0,200}?)\s+(?P<verb>hgetall|hget|keys|hkeys|hvals)\s+"
    r"(?P<key>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'|\S{1,256})(?:\s+(?P<field>\S{1,64}))?\s*(?:\|[^\n]{0,100})?$")
_REDIS_DB = re.compile(r"(?:^|\s)-n\s*(\d{1,2})\b")
_SONIC_DB = re.compile(r"(?:^|\s)(?:-n\s+(?P<ns>\S{1,32})\s+)?(?P<db>[A-Z_]{2,32})$")
_NUMBERED = re.compile(r'^\s{0,8}\d{1,6}\)\s+(?:"((?:[^"\\]|\\.){0,4096})"|\(nil\)|(\S{1,4096}))$')
_QUOTED = re.compile(r'^"((?:[^"\\]|\\.){0,4096})"$')
_EMPTY = ("(empty array)", "(empty list or set)", "{}")
_NAMESPACE = re.compile(r"^asic\d{1,3}$")


def _config_db(tool: str, opts: str) -> tuple[bool, str]:
    """Whether the command reads CONFIG_DB, and the namespace it names ("" for the host's)."""
    if tool.lower() == "redis-cli":
        match = _REDIS_DB.search(opts)
        return (match is not None and match.group(1) == "4"), ""
    match = _SONIC_DB.search(opts.strip())
    if match is None or match.group("db") != "CONFIG_DB":
        return False, ""
    ns = match.group("ns") or ""
    return True, ns if _NAMESPACE.match(ns) else ""


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text


class _Entry:
    """One command and the output lines that follow it."""

    def __init__(self, number: int, verb: str, key: str, field: str | None, namespace: str, wanted: bool) -> None:
        self.number, self.verb, self.key, self.field = number, verb, key, field
        self.namespace, self.wanted = namespace, wanted
        self.items: list[tuple[int, str]] = []
        self.fields: dict[str, str] = {}
        self.used: list[int] = []
        self.closed = False
        """A later command (or a bare prompt) follows the reply, so the reply is whole."""


def _python_dict(text: str) -> dict[str, str] | None:
    """``sonic-db-cli ... hgetall`` prints ``{'field': 'value', ...}``: a literal, never evaluated as code."""
    if not (text.startswith("{") and text.endswith("}")):
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError, TypeError):
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    return {k: str(v) for k, v in value.items()}


def _output(entry: _Entry, number: int, text: str) -> bool:
    """Take one output line of ``entry``'s command; False when it is not such output."""
    stripped = text.strip()
    if stripped in _EMPTY:
        return True
    found = _python_dict(stripped)
    if found is not None:
        entry.fields.update(found)
        return True
    match = _NUMBERED.match(text)
    if match is not None:
        entry.items.append((number, match.group(1) if match.group(1) is not None else (match.group(2) or "")))
        return True
    if "\t" in stripped and stripped.count("\t") == 1:  # hgetall KEY | paste - -
        name, value = stripped.split("\t")
        entry.items.extend([(number, _unquote(name)), (number, _unquote(value))])
        return True
    quoted = _QUOTED.match(stripped)
    if quoted is not None or (stripped and " " not in stripped and len(stripped) <= 256):
        entry.items.append((number, quoted.group(1) if quoted is not None else stripped))
        return True
    return False


def read(r: Reading, *, device: str | None = None) -> Deployed:
    entries: list[_Entry] = []
    current: _Entry | None = None
    for line in r.content():
        match = _COMMAND.match(line.text.strip()[:1024])
        if current is not None and (match is not None or line.kind == "command"):
            current.closed = True
        if match is not None:
            wanted, namespace = _config_db(match.group("tool"), match.group("opts"))
            namespace = namespace or (match.group("netns") or "")
            namespace = namespace if _NAMESPACE.match(namespace) else ""
            key = _unquote(match.group("key"))
            verb = match.group("verb").lower()
            current = _Entry(line.number, verb, key, match.group("field"), namespace, wanted and "|" in key)
            entries.append(current)
            continue
        if line.kind == "command":
            current = None  # another shell command: its output is not an entry's
            continue
        if current is None or not line.text.strip() or line.text.lstrip().startswith("#"):
            continue  # a comment between replies does not end the reply
        if _output(current, line.number, line.text):
            current.used.append(line.number)
        else:
            current = None
    db: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for entry in entries:
        if not entry.wanted or entry.verb not in ("hgetall", "hget"):
            # keys * listings, other databases, hkeys/hvals without their partner: no table entry to place
            r.unknown(entry.number)
            continue
        fields = dict(entry.fields)
        items = [value for _, value in entry.items]
        if not fields and not items:
            # "(empty array)": the key does not exist. An empty entry would read as a configured one (a PFC_WD
            # entry with no timers), so nothing is placed.
            r.use(entry.number)
            for number in entry.used:
                r.use(number)
            continue
        if entry.items and not entry.closed:
            # A reply of one field or value a line that runs to the end of the paste may have been cut between
            # two lines; a map missing its last entries would read as DSCPs in no class.
            r.warn(entry.number, f"the reply to {entry.verb} {entry.key} runs to the end of the paste with no "
                   "prompt after it (cut short?); it is not used")
            continue
        if entry.verb == "hget" and entry.field is not None:
            if len(items) == 1:
                fields[entry.field] = items[0]
            elif items:
                r.warn(entry.number, f"hget {entry.key} {entry.field} printed {len(items)} values; not used")
        else:
            if len(items) % 2:
                r.warn(entry.items[-1][0], f"hgetall {entry.key}: field {items[-1]!r} has no value after it; the "
                       "reply is not used")
                continue
            fields.update(zip(items[0::2], items[1::2], strict=True))
        table, _, rest = entry.key.partition("|")
        part = db.setdefault(entry.namespace, {}) if entry.namespace else db
        part.setdefault(table, {}).setdefault(rest, {}).update(fields)
        lines.setdefault(table, entry.number)
        r.use(entry.number)
        for number in entry.used:
            r.use(number)
    if any(_NAMESPACE.match(k) for k in db):
        # Keys read on the host sit beside per-ASIC ones: the host's namespace, as show runningconfiguration writes it.
        on_host = {k: v for k, v in db.items() if not _NAMESPACE.match(k)}
        db = {k: v for k, v in db.items() if _NAMESPACE.match(k)} | ({"localhost": on_host} if on_host else {})
    # The prompt names the switch when no DEVICE_METADATA entry was asked for.
    host = next((line.origin for line in r.text.lines if line.kind == "command" and line.origin), "")
    named = device or (None if "DEVICE_METADATA" in db else host or None)
    # Keys asked one by one: whatever was not asked for is unknown.
    return deployed_from_db(db, Dups(), r, lines, named, FORMAT, piecewise=True)
