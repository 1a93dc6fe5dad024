"""The line rules of the GID-table reader: which pasted line says what about which port.

Every form a GID table is pasted in is read here, line by line, into :class:`Block` records (one per table start:
a command, a heading, a ``show_gids`` header, an ``hca_id:``, a ``CA '…'``); :mod:`tensorfabric.host.gid_capture`
then assigns blocks to nodes. The forms, with where each was seen, are listed in ``docs/formats.md``:

* ``show_gids`` rows ``DEV PORT INDEX GID [IPv4] VER [DEV]`` (tabs, or tabs rendered as spaces), with or without the
  header, ``n_gids_found=N`` trailer (``0``: an empty table);
* ``ibv_devinfo -v`` ``hca_id:`` / ``port:`` sections and ``GID[ i]: gid[, type]`` lines, also pasted without the
  ``hca_id:`` (the device then comes from an ``ibv_devinfo -d DEV`` command line, or is unknown);
* sysfs: ``path:value`` (``grep . …/gids/*``), ``path value`` (a ``printf`` loop), ``cat path`` then the value,
  ``==> path <==`` then the value (``tail -n +1``), for ``gids/N``, ``gid_attrs/types/N`` and ``gid_attrs/ndevs/N``;
* port listings without GIDs: ``rdma link`` (all three spellings), ``ibstat``, ``ibstatus``, ``ibdev2netdev``.

Every pattern is anchored and has no two quantifiers that can match the same characters, so a line costs linear
time; the intake has already dropped over-long lines.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from tensorfabric.host.gids import Gid, gid_version
from tensorfabric.intake import Line, Tally

__all__ = ["UNKNOWN_DEVICE", "Block", "PortKey", "Stream"]

UNKNOWN_DEVICE = "unknown device"
"""The device of an ``ibv_devinfo`` port section pasted without its ``hca_id:`` and without a command naming it."""

PortKey = tuple[str, int]

_HCA = re.compile(r"hca_id:\s*(\S+)$")
_PORT = re.compile(r"port:\s*(\d{1,3})$")
_FIELD = re.compile(r"(state|link_layer):\s*(\S.*)$")
_DEVINFO_GID = re.compile(r"GID\[\s{0,3}(\d{1,5})\]:\s*([0-9A-Fa-f:.]+)(?:,(.*))?$")
_DEVINFO_DEVICE = re.compile(r"(?:-d|--ib-dev=?)\s*([\w.-]{1,64})")
_DEVINFO_PORT = re.compile(r"(?:-i|--ib-port=?)\s*(\d{1,3})\b")
_SYSFS = re.compile(r"/sys/class/infiniband/([\w.-]{1,64})/ports/(\d{1,3})/(gids|gid_attrs/types|gid_attrs/ndevs)/"
                    r"(\d{1,5}|\*)")
_RDMA_LINK = re.compile(r"(?:link |\d{1,6}/\d{1,3}: )([\w.-]{1,64})/(\d{1,3}):? (.*)$")
_WORD_VALUE = re.compile(r"(state|physical_state|netdev) (\S+)")
_IBSTAT_CA = re.compile(r"CA '([\w.-]{1,64})'$")
_IBSTAT_PORT = re.compile(r"Port (\d{1,3}):$")
_IBSTAT_FIELD = re.compile(r"(State|Link layer):\s*(\S.*)$")
_IBSTATUS = re.compile(r"Infiniband device '([\w.-]{1,64})' port (\d{1,3}) status:$")
_IBDEV2NETDEV = re.compile(r"([\w.-]{1,64}) port (\d{1,3}) ==> (\S+) \((Up|Down)\)$")
_FOUND = re.compile(r"n_gids_found=(\d{1,6})$")
_NDEV = re.compile(r"[\w.@-]{1,15}$")  # IFNAMSIZ: 15 characters
_HOSTLIKE = re.compile(r"(?:(?:host|node|pod|server|worker) )?([A-Za-z][\w.-]{0,62})[:.]?$", re.IGNORECASE)
_COMMANDS = ("ibv_devinfo", "show_gids", "cat /", "grep ", "tail -", "head -", "rdma link", "ibstat", "ibdev2netdev",
             "sudo ")
_MARKERS = ("GID[", "/sys/class/infiniband/", "n_gids_found", "hca_id")
_FULL_GID = re.compile(r"[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}:[0-9A-Fa-f]{4}:")


def _address(text: str) -> ipaddress.IPv6Address | None:
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None


def _fits(path: _SysPath, value: str) -> bool:
    """Whether a line is what ``cat`` of that sysfs file prints (prose between a command and its output is not)."""
    if path.what == "gids":
        return _address(value) is not None
    if path.what == "gid_attrs/types":
        return gid_version(value) is not None
    return _NDEV.fullmatch(value) is not None


@dataclass
class Block:
    """What one table start and the lines after it said (a builder: mutable while the paste is read)."""

    title: str
    """The node it names (a prompt's host, a host-like heading, a collector's origin); "" when nothing named one."""
    form: str = ""
    full: bool = False
    """The block lists a port's whole table (show_gids, an ``hca_id:`` section, ``gids/*``), not a few entries."""
    header: bool = False
    """A ``show_gids`` header was read: a block with a header and no rows is an empty table, an answer."""
    rows: int = 0
    gids: dict[PortKey, dict[int, Gid]] = field(default_factory=dict)
    types: dict[PortKey, dict[int, str]] = field(default_factory=dict)
    ndevs: dict[PortKey, dict[int, str]] = field(default_factory=dict)
    fields: dict[PortKey, dict[str, str]] = field(default_factory=dict)
    forms: dict[PortKey, list[str]] = field(default_factory=dict)

    def touch(self, key: PortKey, form: str) -> None:
        seen = self.forms.setdefault(key, [])
        if form not in seen:
            seen.append(form)

    @property
    def empty_table(self) -> bool:
        return self.header and not self.gids


@dataclass
class _SysPath:
    key: PortKey
    what: str
    index: int


class Stream:
    """The reader's state for the lines of one origin (one host of an interleaved multi-host paste, or all)."""

    def __init__(self, origin: str, tally: Tally) -> None:
        self.origin = origin
        self.tally = tally
        self.title = origin
        self.blocks: list[Block] = []
        self.mode = ""
        self.device: str | None = None
        self.port: int | None = None
        self.hint: tuple[str | None, int | None, Line | None] = (None, None, None)
        self.pending: list[_SysPath] = []
        self.glob_values: bool | str = False
        """After ``cat …/gids/*``: True, then "warned" once the first unmappable value was reported."""

    # -- blocks ------------------------------------------------------------------------------------------------
    def start(self, form: str = "", *, full: bool = False) -> Block:
        block = Block(self.title, form, full)
        self.blocks.append(block)
        return block

    def current(self, line: Line, form: str) -> Block:
        """The open block when it holds ``form`` facts (or none yet), else a new one (a form changed mid-paste)."""
        block = self.blocks[-1] if self.blocks else None
        if block is None or (block.form and block.form != form):
            block = self.start(form)
        block.form = block.form or form
        return block

    # -- the line rules ----------------------------------------------------------------------------------------
    def feed(self, line: Line, text: str) -> None:
        if line.kind == "command":
            if line.origin:
                self.title = line.origin
            self.start()
            self.command(line, text)
        elif line.kind == "heading":
            self.heading(line, text)
        elif line.kind == "text":
            self.content(line, text.strip().strip("*`"))

    def heading(self, line: Line, text: str) -> None:
        path = _SYSFS.search(text) if text.startswith("/sys/") else None
        if path is not None:  # ``tail -n +1 …/gids/*`` titles each file "==> path <==": the value follows
            self.pending = [_SysPath((path[1], int(path[2])), path[3], int(path[4]))] if path[4] != "*" else []
            self.tally.use(line)
            return
        name = _HOSTLIKE.fullmatch(text)
        if name is not None and any(c.isdigit() for c in name[1]):
            self.title = name[1]
            self.start()
        # any other heading is prose: the table it interrupts goes on in the same block and section

    def command(self, line: Line, text: str) -> None:
        self.mode, self.device, self.port, self.pending, self.glob_values = "", None, None, [], False
        self.hint = (None, None, None)
        if "ibv_devinfo" in text:
            self.mode = "ibv_devinfo"
            dev, port = _DEVINFO_DEVICE.search(text), _DEVINFO_PORT.search(text)
            self.hint = (dev[1] if dev else None, int(port[1]) if port else None, line)
        elif "show_gids" in text:
            self.mode = "show_gids"
        paths = list(_SYSFS.finditer(text))
        if any(m[4] == "*" for m in paths):
            block = self.blocks[-1] if self.blocks else self.start()
            block.full = True  # a loop or grep over gids/* prints each path with its value
            self.glob_values = text.startswith("cat ")
        elif text.startswith(("cat ", "head ", "tail ")):
            self.pending = [_SysPath((m[1], int(m[2])), m[3], int(m[4])) for m in paths]

    def content(self, line: Line, text: str) -> None:
        if self.pending and _fits(self.pending[0], text):
            self.sysfs_value(line, self.pending.pop(0), text)
            return
        if self.glob_values and _address(text) is not None:
            if self.glob_values is True:
                self.tally.warn(line, "`cat …/gids/*` prints values without their files, so their indices are "
                                "unknown (glob order is lexical); use `grep . …/gids/*` or show_gids")
            self.glob_values = "warned"
            self.tally.not_understood(line)
            return
        for rule in (self.show_gids, self.devinfo, self.sysfs_line, self.listing, self.command_text):
            if rule(line, text):
                return
        if any(marker in text for marker in _MARKERS) or _FULL_GID.search(text) is not None:
            self.tally.not_understood(line)

    def show_gids(self, line: Line, text: str) -> bool:
        words = text.split()
        if words[:4] == ["DEV", "PORT", "INDEX", "GID"]:
            self.start("show_gids", full=True).header = True
            self.mode = "show_gids"
            self.tally.use(line)
            return True
        if text.startswith("---") and not text.strip("-\t "):
            if self.mode == "show_gids":
                self.tally.use(line)
            return True
        if (found := _FOUND.fullmatch(text)) is not None:
            block = self.current(line, "show_gids")
            if int(found[1]) != block.rows and block.header:
                self.tally.warn(line, f"show_gids counted {found[1]} GIDs but {block.rows} rows were read (is the "
                                "paste cut?)")
            self.tally.use(line)
            self.mode = ""
            return True
        if len(words) < 5 or not (words[1].isdigit() and words[2].isdigit() and ":" in words[3]):
            return False
        return self.show_gids_row(line, words)

    def show_gids_row(self, line: Line, words: list[str]) -> bool:
        ver = next((i for i in (4, 5) if i < len(words) and words[i] in ("v1", "v2")), None)
        if ver is None or _address(words[3]) is None or len(words) > ver + 2 or int(words[1]) > 255:
            self.tally.not_understood(line)
            self.tally.warn(line, "looks like a show_gids row but is not DEV PORT INDEX GID [IPv4] VER [NETDEV]")
            return True
        key = (words[0], int(words[1]))
        ndev = words[ver + 1].rstrip(".") if ver + 1 < len(words) else None
        kind = "RoCE v2" if words[ver] == "v2" else "RoCE v1"
        block = self.current(line, "show_gids")
        block.rows += 1
        self.add_gid(block, key, Gid(int(words[2]), words[3], kind, ndev or None), line, "show_gids")
        if ndev and int(words[2]) < 2:  # the default (index 0/1) GIDs sit on the port's own netdev
            block.fields.setdefault(key, {}).setdefault("netdev", ndev)
        return True

    def devinfo(self, line: Line, text: str) -> bool:
        if (hca := _HCA.match(text)) is not None:
            self.start("ibv_devinfo", full=True)
            self.mode, self.device, self.port = "ibv_devinfo", hca[1], None
            self.tally.use(line)
            return True
        # without a section open, only an indented "port:" is ibv_devinfo's (a config's "port: 1" is not)
        opens = self.mode == "ibv_devinfo" or (self.mode == "" and line.text[:1] in " \t")
        if (port := _PORT.match(text)) is not None and opens:
            self.mode, self.port = "ibv_devinfo", int(port[1])
            self.current(line, "ibv_devinfo").touch(self.key(line), "ibv_devinfo")
            self.tally.use(line)
            return True
        if (fld := _FIELD.match(text)) is not None and self.mode in ("ibv_devinfo", "ibstatus"):
            key = self.key(line)
            block = self.current(line, self.mode)
            block.touch(key, self.mode)
            block.fields.setdefault(key, {})[fld[1]] = fld[2].strip()
            self.tally.use(line)
            return True
        if not text.startswith("GID["):
            return False
        row = _DEVINFO_GID.match(text)
        address = _address(row[2]) if row is not None else None
        if row is None or address is None:
            self.tally.not_understood(line)
            self.tally.warn(line, "not an ibv_devinfo GID line ('GID[ i]: <gid>[, RoCE vN]')")
            return True
        kind = (row[3] or "").strip() or None
        if kind is not None and gid_version(kind) is None:
            self.tally.warn(line, f"GID type {kind!r} is neither RoCE v1 nor v2")
        self.mode = "ibv_devinfo"
        key = self.key(line)
        self.add_gid(self.current(line, "ibv_devinfo"), key, Gid(int(row[1]), row[2], kind), line, "ibv_devinfo")
        return True

    def key(self, line: Line) -> PortKey:
        """The port an ``ibv_devinfo`` line belongs to: its section's, else the command's ``-d``/``-i``, else the
        unknown device's port 1 (mlx5 devices have one port each)."""
        hint_dev, hint_port, hint_line = self.hint
        if self.device is None:
            self.device = hint_dev or UNKNOWN_DEVICE
            if hint_dev is not None and hint_line is not None:
                self.tally.use(hint_line)
            elif line.kind == "text":
                self.tally.warn(line, "an ibv_devinfo port section without its hca_id: line or a command naming the "
                                f"device: read as {UNKNOWN_DEVICE!r}")
        if self.port is None:
            self.port = hint_port or 1
        return self.device, self.port

    def sysfs_line(self, line: Line, text: str) -> bool:
        path = _SYSFS.search(text) if "/sys/class/infiniband/" in text else None
        if path is None:
            return False
        if text.startswith(("grep:", "cat:", "tail:", "head:")):
            self.tally.use(line)  # "Invalid argument": the type of an empty slot, nothing to read
            return True
        rest = text[path.end():]
        if path.start() != 0 or path[4] == "*" or not rest or rest[0] not in ": \t":
            self.tally.not_understood(line)
            return True
        self.sysfs_value(line, _SysPath((path[1], int(path[2])), path[3], int(path[4])), rest[1:].strip())
        return True

    def sysfs_value(self, line: Line, path: _SysPath, value: str) -> None:
        block = self.current(line, "sysfs")
        block.touch(path.key, "sysfs")
        if path.what == "gids":
            address = _address(value)
            if address is None:
                self.tally.not_understood(line)
                self.tally.warn(line, f"{value[:60]!r} is not a GID (an IPv6-form address)")
            elif int(address) != 0:  # an all-zero GID is an empty slot, as show_gids and NCCL treat it
                self.add_gid(block, path.key, Gid(path.index, value), line, "sysfs")
            else:
                self.tally.use(line)
            return
        if path.what == "gid_attrs/types" and gid_version(value) is not None:
            block.types.setdefault(path.key, {})[path.index] = value
        elif path.what == "gid_attrs/ndevs" and _NDEV.fullmatch(value):
            block.ndevs.setdefault(path.key, {})[path.index] = value
        else:
            self.tally.not_understood(line)
            return
        self.tally.use(line)

    def listing(self, line: Line, text: str) -> bool:
        """Port listings that carry state, link layer or netdev but no GID table."""
        if (link := _RDMA_LINK.match(text)) is not None:
            values = dict(_WORD_VALUE.findall(link[3]))
            # iproute2 prints subnet_prefix/lid only for InfiniBand ports (rdma/link.c)
            layer = "InfiniBand" if " lid " in f" {link[3]} " else "Ethernet"
            self.port_fields(line, (link[1], int(link[2])), "rdma link", state=values.get("state"),
                             netdev=values.get("netdev"), link_layer=layer)
            return True
        if (ca := _IBSTAT_CA.match(text)) is not None:
            self.start("ibstat")
            self.mode, self.device, self.port = "ibstat", ca[1], None
            self.tally.use(line)
            return True
        if (status := _IBSTATUS.match(text)) is not None:
            self.start("ibstatus")
            self.mode, self.device, self.port = "ibstatus", status[1], int(status[2])
            self.port_fields(line, (status[1], int(status[2])), "ibstatus")
            return True
        if self.mode == "ibstatus" and text.startswith("default gid:"):
            self.tally.use(line)  # index 0 only, the port's link-local default: not a table to choose from
            return True
        if self.mode == "ibstat" and self.device is not None:
            if (port := _IBSTAT_PORT.match(text)) is not None:
                self.port = int(port[1])
                self.port_fields(line, (self.device, self.port), "ibstat")
                return True
            if (fld := _IBSTAT_FIELD.match(text)) is not None and self.port is not None:
                name = "state" if fld[1] == "State" else "link_layer"
                self.port_fields(line, (self.device, self.port), "ibstat", **{name: fld[2].strip()})
                return True
        if (dev := _IBDEV2NETDEV.match(text)) is not None:
            self.port_fields(line, (dev[1], int(dev[2])), "ibdev2netdev", netdev=dev[3])
            return True
        return False

    def port_fields(self, line: Line, key: PortKey, form: str, **values: str | None) -> None:
        block = self.current(line, form)
        block.touch(key, form)
        block.fields.setdefault(key, {}).update({k: v for k, v in values.items() if v})
        self.tally.use(line)

    def command_text(self, line: Line, text: str) -> bool:
        """A command pasted as text (italicised, in backticks, after prose): it names the device that follows."""
        loop = text.startswith(("for ", "while ")) and "/sys/class/infiniband/" in text
        if "ibv_devinfo" not in text and not text.startswith(_COMMANDS) and not loop:
            return False
        if text.startswith(_COMMANDS) or loop:
            self.start()
        self.command(line, text)
        return True

    def add_gid(self, block: Block, key: PortKey, gid: Gid, line: Line, form: str) -> None:
        block.touch(key, form)
        table = block.gids.setdefault(key, {})
        same = table.get(gid.index)
        if same is not None and same.address != gid.address:
            self.tally.warn(line, f"{key[0]} port {key[1]} GID index {gid.index} listed again with another address "
                            f"({same.describe()} then {gid.describe()}); the first is kept")
            self.tally.not_understood(line)
            return
        table[gid.index] = gid if same is None else Gid(gid.index, same.gid, same.type or gid.type,
                                                        same.ndev or gid.ndev)
        self.tally.use(line)
