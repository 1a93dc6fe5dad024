"""One NCCL log line at a time: find the message after ``NCCL INFO|WARN``, and read what it says.

Every pattern here is matched once, anchored at the start of the message, and is built so that no quantified
part can overlap the text that follows it (a character class is always followed by a delimiter outside the
class). The regex engine therefore never backtracks more than one step, and each line costs linear time. Lines
longer than :data:`MAX_LINE_CHARS` are not interpreted at all; the parser reports them instead.

Line formats (NVIDIA/nccl, the text after ``NCCL INFO``), oldest first:

* 2.3: ``NET : Using interface eth0:10.1.4.9<0>``, ``NET/IB : Using interface ib0 for sideband communication``,
  one ``NET/IB: [0] mlx5_0:1/IB`` line per device, ``Using internal Network IB|Socket``,
  ``Ring 00 : 7 -> 8 [send] via NET/Socket/0``;
* 2.4 - 2.6: ``NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:...``, ``Ring 00 : 1[18100000] -> 0[435e00000] [receive]
  via NET/IB/0/GDRDMA``;
* 2.7+: ``Using network IB``, ``Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA`` (PXN ``NET/IB/0(1)``),
  ``Connected all rings, use ring PXN 0 GDR 1``, QP lines ``NET/IB: ncclIbConnect: NCCL Dev 0 IbDev 0 Port 1
  qp_num 4721 mtu 5 GID 3 (0/101A8C0FFFF0000)`` (RoCE) or ``... LID 12 subnet-prefix ...`` (IB).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_LINE_CHARS", "ChannelPath", "LogDevice", "QpInfo", "decode_gid", "message_of", "parse_channel",
           "parse_devices", "parse_env", "parse_gdr", "parse_network", "parse_plugin", "parse_qp"]

MAX_LINE_CHARS = 16384
"""Longest line the parser interprets. NCCL formats each message into a 1024-byte buffer (src/debug.cc) and a
launcher prefix adds well under 1 KiB, so a real NCCL line is far shorter; longer lines are reported instead."""

_MARK = re.compile(r"NCCL (INFO|WARN|TRACE|ABORT)(?: |$)")
_CHANNEL = re.compile(r"(?:Channel|Ring) (\d+)(?:/(\d+))? ?: +(\d+)(?:\[([0-9A-Fa-fx]+)\])? -> (\d+)"
                      r"(?:\[([0-9A-Fa-fx]+)\])?(?: \[(send|receive)\])? via (.+)$")
_VIA_NET = re.compile(r"NET/([^/()]+)/(\d+)(?:\((\d+)\))?((?:/[A-Za-z]+|\(PCI\))*)$")
_BANNER = re.compile(r"NET/(IB|Socket|[A-Za-z][\w-]*) ?: Using ")
_IB_DEV = re.compile(r"\[(\d+)\] ?([\w.-]+):(\d+)/(IB|RoCE)")
_SOCK_DEV = re.compile(r"\[(\d+)\]([\w.@-]+):([0-9A-Fa-f:.%]+)")
_OLD_IB_DEV = re.compile(r"NET/IB ?: \[(\d+)\] ?([\w.-]+):(\d+)/(IB|RoCE)")
_OLD_IFACE = re.compile(r"NET(?:/Socket)? ?: Using interface ([\w.@-]+):([0-9A-Fa-f:.%]+)")
_NETWORK = re.compile(r"Using (?:internal )?[Nn]etwork (\S(?:.*\S)?)")
_PLUGIN = re.compile(r"NET/Plugin ?: Loaded net plugin (\S(?:.*\S)?)")
_PLUGIN_VERSION = re.compile(r" \(v\d+\)$")
_ENV = re.compile(r"([A-Z][A-Z0-9_]*) set (?:by environment )?to (.*)")
_GDR_HCA = re.compile(r"NET/[\w .-]*: GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']*)'")
_GDR_GPU = re.compile(r"(?:NET/[\w .-]*: )?GPU Direct RDMA (Enabled|Disabled) for GPU ([0-9A-Fa-fx]+) / HCA "
                      r"([0-9A-Fa-fx]+) \(distance (\d+) ([<>]=?) (\d+)\)")
_GDR_SUMMARY = re.compile(r"Connected all rings(?:, use ring PXN (\d) GDR (\d))?")
_QP = re.compile(r"NET/IB ?: (?:\w+: )?(?:NCCL (?:Merged)?Dev (\d+) )?(?:IbDev (\d+) )?Port (\d+) "
                 r"(?:qpn|qp_num) (\d+) mtu (\d+) (?:GID (-?\d+) \(([0-9A-Fa-f]+)/([0-9A-Fa-f]+)\)|LID (\d+))")


@dataclass(frozen=True, slots=True)
class LogDevice:
    index: int
    name: str
    port: int | None
    link: str
    """``RoCE``, ``IB`` or ``Socket`` (then ``port`` is ``None`` and ``name`` is ``if:address``)."""

    def __str__(self) -> str:
        return f"{self.name}:{self.port}/{self.link}" if self.port is not None else f"{self.name}/{self.link}"


@dataclass(frozen=True, slots=True)
class ChannelPath:
    channel: int
    src: int
    dst: int
    direction: str
    via: str
    net: str | None
    """Network name for ``NET/<net>/<dev>`` paths (``IB``, ``Socket``, ``IBext_v8``); ``None`` for P2P/SHM."""
    net_device: int | None
    gdr: bool
    line: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "src": self.src, "dst": self.dst, "direction": self.direction,
                "via": self.via, "gdr": self.gdr}


@dataclass(frozen=True, slots=True)
class QpInfo:
    """One NET-subsystem QP line: the device, and the GID (RoCE) or LID (InfiniBand) NCCL connected with."""

    net_device: int | None
    ib_device: int | None
    port: int
    link: str
    """``RoCE`` when the line carries a GID, ``IB`` when it carries a LID."""
    gid_index: int | None
    gid: str | None
    line: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"net_device": self.net_device, "ib_device": self.ib_device, "port": self.port, "link": self.link,
                "gid_index": self.gid_index, "gid": self.gid}


def message_of(line: str) -> tuple[str, str] | None:
    """``(level, message)`` after the first ``NCCL INFO|WARN|TRACE|ABORT`` of ``line``, whatever the prefix."""
    mark = _MARK.search(line)
    if mark is None:
        return None
    return mark[1], line[mark.end():].strip()


def parse_channel(message: str, line: int = 0) -> ChannelPath | None:
    match = _CHANNEL.match(message)
    if match is None:
        return None
    via = match[8]
    net = _VIA_NET.match(via)
    return ChannelPath(int(match[1]), int(match[3]), int(match[5]), match[7] or "", via,
                       net[1] if net else None, int(net[2]) if net else None,
                       bool(net and "/GDRDMA" in net[4]), line)


def is_cut_channel(message: str) -> bool:
    """A channel line that stops short of a complete ``via`` path (the log was cut in this line)."""
    if not message.startswith(("Channel ", "Ring ")) or "->" not in message:
        return False
    path = parse_channel(message)
    if path is None:
        return True
    if path.via.endswith("/"):
        return True
    net = _VIA_NET.match(path.via)
    return path.via.startswith("NET/") and (net is None or any(
        flag not in ("/GDRDMA", "/Shared", "(PCI)") for flag in re.findall(r"/[A-Za-z]+|\(PCI\)", net[4])))


def parse_devices(message: str) -> tuple[str, list[LogDevice]] | None:
    """Device banners of every era: ``NET/IB : Using [0]mlx5_0:1/RoCE ...``, ``NET/Socket : Using [0]eth0:...``,
    2.3's ``NET/IB: [0] mlx5_0:1/IB`` and ``NET : Using interface eth0:10.1.4.9<0>``."""
    if (old := _OLD_IB_DEV.match(message)) is not None:
        return "IB", [LogDevice(int(old[1]), old[2], int(old[3]), old[4])]
    if (iface := _OLD_IFACE.match(message)) is not None:
        return "Socket", [LogDevice(0, f"{iface[1]}:{iface[2]}", None, "Socket")]
    banner = _BANNER.match(message)
    if banner is None:
        return None
    rest = message[banner.end():]
    if banner[1].lower() == "socket":
        devs = [LogDevice(int(m[1]), f"{m[2]}:{m[3]}", None, "Socket") for m in _SOCK_DEV.finditer(rest)]
    else:
        devs = [LogDevice(int(m[1]), m[2], int(m[3]), m[4]) for m in _IB_DEV.finditer(rest)]
    return (banner[1], devs) if devs else None


def parse_network(message: str) -> str | None:
    match = _NETWORK.match(message)
    return match[1] if match else None


def parse_plugin(message: str) -> str | None:
    match = _PLUGIN.match(message)
    return _PLUGIN_VERSION.sub("", match[1]) if match else None


def parse_env(message: str) -> tuple[str, str] | None:
    """``NCCL_IB_TC set by environment to 104.`` -> ``("NCCL_IB_TC", "104")`` (NCCL ends the line with a dot)."""
    match = _ENV.match(message)
    if match is None or not match[1].startswith(("NCCL_", "GLOO_")):
        return None
    value = match[2].strip()
    return match[1], value[:-1] if value.endswith(".") else value


def parse_gdr(message: str) -> tuple[str, bool, str] | None:
    """GPUDirect decisions: ``("hca", on, name)``, ``("gpu", on, "distance d > l")`` or ``("summary", on, "")``."""
    if (hca := _GDR_HCA.match(message)) is not None:
        return "hca", hca[1] == "Enabled", hca[3]
    if (gpu := _GDR_GPU.match(message)) is not None:
        return "gpu", gpu[1] == "Enabled", f"GPU {gpu[2]} / HCA {gpu[3]}: distance {gpu[4]} {gpu[5]} {gpu[6]}"
    if (summary := _GDR_SUMMARY.match(message)) is not None and summary[2] is not None:
        return "summary", summary[2] == "1", ""
    return None


def decode_gid(subnet_hex: str, iface_hex: str) -> str | None:
    """The GID NCCL prints as ``(%lX/%lX)``: two 64-bit halves read from network-order bytes on a little-endian
    host, so ``0/101A8C0FFFF0000`` is ``::ffff:192.168.1.1`` and a ``80FE`` prefix is link-local ``fe80::``."""
    try:
        raw = int(subnet_hex, 16).to_bytes(8, "little") + int(iface_hex, 16).to_bytes(8, "little")
    except OverflowError:
        return None
    addr = ipaddress.IPv6Address(raw)
    return f"::ffff:{addr.ipv4_mapped}" if addr.ipv4_mapped is not None else str(addr)


def parse_qp(message: str, line: int = 0) -> QpInfo | None:
    match = _QP.match(message)
    if match is None:
        return None
    dev = int(match[1]) if match[1] is not None else None
    ibdev = int(match[2]) if match[2] is not None else None
    if match[6] is not None:
        return QpInfo(dev, ibdev, int(match[3]), "RoCE", int(match[6]), decode_gid(match[7], match[8]), line)
    return QpInfo(dev, ibdev, int(match[3]), "IB", None, None, line)
