"""GID tables as users paste them: ``show_gids``, ``ibv_devinfo -v``/``-vv`` port sections, ``rdma link``.

Formats (one capture may hold several, e.g. ``rdma link`` for port state and ``show_gids`` for the table):

* ``show_gids`` (MLNX_OFED script): a ``DEV PORT INDEX GID IPv4 VER DEV`` header, a dashes line, one row per GID
  (``mlx5_0  1  3  0000:...:ffff:c0a8:0101  192.168.1.1  v2  ens1f0np0``; the IPv4 column is empty for IPv6 GIDs),
  an ``n_gids_found=N`` trailer; spaces or tabs, sparse indices, shell prompts and indentation all occur;
* ``ibv_devinfo -v``: ``hca_id:\\tmlx5_0``, ``port:\\t1`` sections with ``state:``, ``link_layer:`` and
  ``GID[  3]:\\t\\t::ffff:192.168.1.1, RoCE v2`` (full or compressed IPv6; older rdma-core omits the type);
* ``rdma link``: ``link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0np0`` (no GIDs: a port known
  only from it has no table, so no index can be recommended).

A line that starts like a GID row but does not parse is an error, never skipped: a wrong index is worse than none.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace

from tensorfabric.errors import ParseError
from tensorfabric.host.gids import Gid, select_gid
from tensorfabric.host.records import RdmaPort

__all__ = ["CapturedPort", "parse_gid_capture", "recommended_index"]

_SHOW_GIDS = re.compile(r"([\w.-]+)\s+(\d+)\s+(\d+)\s+([0-9A-Fa-f:]+)(?:\s+(\d+\.\d+\.\d+\.\d+))?\s+(v[12])"
                        r"(?:\s+(\S+))?$")
_SHOW_GIDS_START = re.compile(r"[\w.-]+\s+\d+\s+\d+\s+[0-9A-Fa-f]{1,4}:")
_HCA = re.compile(r"hca_id:\s+(\S+)$")
_PORT = re.compile(r"port:\s+(\d+)$")
_FIELD = re.compile(r"(state|link_layer):\s+(\S(?:.*\S)?)$")
_DEVINFO_GID = re.compile(r"GID\[\s*(\d+)\]:\s+([0-9A-Fa-f:.]+)(?:,\s*(IB/RoCE v1|RoCE v[12]))?$")
_RDMA_LINK = re.compile(r"link ([\w.-]+)/(\d+)\b(.*)$")
_WORD_VALUE = re.compile(r"(state|physical_state|netdev) (\S+)")


@dataclass(frozen=True, slots=True)
class CapturedPort:
    device: str
    port: int
    gids: tuple[Gid, ...] = ()
    state: str | None = None
    link_layer: str | None = None
    netdev: str | None = None
    formats: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def is_roce(self) -> bool:
        if self.link_layer is not None:
            return self.link_layer.lower() == "ethernet"
        return any(g.version is not None for g in self.gids)

    @property
    def usable(self) -> bool:
        """Active, or of unknown state (``show_gids`` carries none)."""
        return self.state is None or "ACTIVE" in self.state.upper()

    def as_port(self) -> RdmaPort:
        """The port record the doctor's GID checks read (state defaults to active when the capture has none)."""
        return RdmaPort(self.device, self.port, state="4: ACTIVE" if self.usable else (self.state or ""),
                        link_layer=self.link_layer or ("Ethernet" if self.is_roce else ""), gids=self.gids,
                        netdev=self.netdev)


def recommended_index(port: CapturedPort) -> int | None:
    """The RoCE v2 IPv4 GID NCCL >= 2.21 would pick (and older NCCL needs pinned); ``None`` when there is none."""
    gid = select_gid(port.gids, family="AF_INET", version=2)
    return gid.index if gid is not None else None


class _Capture:
    def __init__(self, source: str) -> None:
        self.source = source
        self.ports: dict[tuple[str, int], CapturedPort] = {}
        self.device: str | None = None
        self.port: int | None = None

    def update(self, device: str, port: int, fmt: str, **changes: object) -> None:
        key = (device, port)
        current = self.ports.get(key, CapturedPort(device, port))
        merged = {k: v for k, v in changes.items() if v is not None}
        formats = current.formats if fmt in current.formats else (*current.formats, fmt)
        self.ports[key] = replace(current, formats=formats, **merged)  # type: ignore[arg-type]

    def add_gid(self, device: str, port: int, gid: Gid, fmt: str, number: int) -> None:
        current = self.ports.get((device, port), CapturedPort(device, port))
        same = next((g for g in current.gids if g.index == gid.index), None)
        if same is not None:
            if _address(same.gid) != _address(gid.gid) or (same.version and gid.version and
                                                            same.version != gid.version):
                raise ParseError(f"{device} port {port} GID index {gid.index} appears twice with different values "
                                 f"({same.describe()} and {gid.describe()}); pass one host's capture",
                                 source=self.source, line=number)
            gids = tuple(g if g.index != gid.index else replace(g, type=g.type or gid.type, ndev=g.ndev or gid.ndev)
                         for g in current.gids)
        else:
            gids = tuple(sorted((*current.gids, gid), key=lambda g: g.index))
        self.update(device, port, fmt, gids=gids)


def _address(text: str) -> ipaddress.IPv6Address | None:
    try:
        return ipaddress.IPv6Address(text)
    except ValueError:
        return None


def _gid(index: int, text: str, kind: str | None, ndev: str | None, source: str, number: int) -> Gid:
    if _address(text) is None:
        raise ParseError(f"GID {text!r} is not an IPv6-form GID (like fe80:0000:...:3c4d or ::ffff:10.0.0.1)",
                         source=source, line=number, excerpt=text)
    return Gid(index, text, kind, ndev)


def _line(capture: _Capture, raw: str, number: int) -> bool:
    text = raw.strip()  # prompts, headers and other ibv_devinfo fields match nothing below and are skipped
    if (row := _SHOW_GIDS.match(text)) is not None:
        kind = "RoCE v2" if row[6] == "v2" else "RoCE v1"
        gid = _gid(int(row[3]), row[4], kind, row[7], capture.source, number)
        capture.add_gid(row[1], int(row[2]), gid, "show_gids", number)
        if row[7]:
            capture.update(row[1], int(row[2]), "show_gids", netdev=row[7])
        return True
    if _SHOW_GIDS_START.match(text):
        raise ParseError("looks like a show_gids row but is not DEV PORT INDEX GID [IPv4] VER [NETDEV]",
                         source=capture.source, line=number, excerpt=text)
    if (hca := _HCA.match(text)) is not None:
        capture.device, capture.port = hca[1], None
        return True
    if (port := _PORT.match(text)) is not None and capture.device is not None:
        capture.port = int(port[1])
        capture.update(capture.device, capture.port, "ibv_devinfo")
        return True
    in_port = capture.device is not None and capture.port is not None
    if in_port and (fld := _FIELD.match(text)) is not None:
        assert capture.device is not None and capture.port is not None
        capture.update(capture.device, capture.port, "ibv_devinfo",
                       **{"state" if fld[1] == "state" else "link_layer": fld[2]})
        return True
    if text.startswith("GID["):
        gid_row = _DEVINFO_GID.match(text)
        if gid_row is None or not in_port:
            raise ParseError("GID line outside an ibv_devinfo port section, or not 'GID[ i]: <gid>[, RoCE vN]'",
                             source=capture.source, line=number, excerpt=text)
        assert capture.device is not None and capture.port is not None
        gid = _gid(int(gid_row[1]), gid_row[2], gid_row[3], None, capture.source, number)
        capture.add_gid(capture.device, capture.port, gid, "ibv_devinfo", number)
        return True
    if (link := _RDMA_LINK.match(text)) is not None:
        values = dict(_WORD_VALUE.findall(link[3]))
        state = values.get("state")
        capture.update(link[1], int(link[2]), "rdma link", state=state, netdev=values.get("netdev"),
                       # iproute2 prints subnet_prefix/lid only for InfiniBand ports (rdma/link.c)
                       link_layer="InfiniBand" if " lid " in f" {link[3]} " else "Ethernet")
        return True
    return False


def parse_gid_capture(text: str | bytes, *, source: str = "<gids>") -> tuple[CapturedPort, ...]:
    """Every port in a capture, with its GIDs (sorted by index). Raises ParseError for binary input, a malformed GID
    row, conflicting entries, or a file with no recognised line at all."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"not UTF-8 text (byte {exc.start}); pass show_gids, ibv_devinfo -v or rdma link "
                             "output", source=source) from None
    if "\x00" in text:
        raise ParseError("contains NUL bytes; pass show_gids, ibv_devinfo -v or rdma link output", source=source)
    capture = _Capture(source)
    for number, raw in enumerate(text.splitlines(), start=1):
        if len(raw) > 4096:
            raise ParseError("line longer than 4096 characters: not show_gids, ibv_devinfo or rdma link output",
                             source=source, line=number)
        if raw.strip():
            _line(capture, raw, number)
    if not capture.ports:
        raise ParseError("no show_gids rows, ibv_devinfo port sections or rdma link lines found", source=source)
    return tuple(capture.ports[k] for k in sorted(capture.ports))
