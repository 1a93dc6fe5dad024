"""One NCCL/RCCL log line at a time: find the message after ``NCCL INFO|WARN``, and read what it says.

Every pattern here is matched once, anchored at the start of the message, and is built so that no quantified
part can overlap the text that follows it (a character class is always followed by a delimiter outside the
class, and free-text parts are bounded). The regex engine therefore never backtracks more than a bounded amount,
and each line costs linear time. Lines longer than :data:`MAX_LINE_CHARS` are not interpreted at all; the reader
reports them instead.

Line formats (NVIDIA/nccl and ROCm/rccl, the text after ``NCCL INFO``), oldest first:

* 2.3: ``NET/IB : Using interface ib0 for sideband communication``, one ``NET/IB: [0] mlx5_0:1/IB`` line per
  device, ``Using internal Network IB|Socket``, ``Ring 00 : 7 -> 8 [send] via NET/Socket/0``;
* 2.4 - 2.11: ``NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:...``, ``NET/Socket : Using [0]eth0:...`` (only when
  NCCL fell back to sockets), ``Ring|Channel 00 : 1[18100000] -> 0[435e00000] [receive] via NET/IB/0/GDRDMA``,
  ``Using network IB`` (2.6+);
* 2.12 - 2.26: ``Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA`` (PXN ``NET/IB/0(1)``), ``Connected all
  rings, use ring PXN 0 GDR 1``, ``GPU Direct RDMA Enabled for GPU 3b000 / HCA 0 (distance 3 <= 3), read 0``, QP
  lines ``NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 4721 mtu 5 query_ece={...} GID 3 (0/101A8C0FFFF0000)`` (RoCE) or
  ``... LID 12 subnet-prefix ...`` (IB), ``comm 0x.. rank 0 nRanks 16 nNodes 2 ...``;
* 2.24+: ``NET/IB : Made virtual device [8] name=mlx5_0+mlx5_1 speed=800000 ndevs=2`` (merged NICs: channel
  indices beyond the banner's list); 2.27+: ``NET/IB: [0] rocep3s0f0:uverbs0:1/RoCE provider=Mlx5 speed=...``
  device lines (``[n]`` is the verbs device index, not NCCL's), ``Initialized NET plugin IB``;
* RCCL: ``RCCL version 2.20.5+hip6.2 HEAD:45b618a+``, channel lines ending ``comm 0x55d0 nRanks 08``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_LINE_CHARS", "ChannelPath", "CommInfo", "DeviceInfo", "GdrLine", "LogDevice", "QpInfo",
           "decode_gid", "is_cut_channel", "message_of", "nccl_host", "parse_channel", "parse_comm",
           "parse_device_info", "parse_devices", "parse_ece", "parse_env", "parse_gdr", "parse_interfaces",
           "parse_missing_network", "parse_network", "parse_plugin", "parse_qp", "parse_vdevice",
           "parse_version"]

MAX_LINE_CHARS = 16384
"""Longest line the parser interprets. NCCL formats each message into a 1024-byte buffer (src/debug.cc) and a
launcher prefix adds well under 1 KiB, so a real NCCL line is far shorter; longer lines are reported instead."""

# digit runs are bounded: int() refuses strings over 4300 digits, and no NCCL number is longer than nine
_MARK = re.compile(r"NCCL (INFO|WARN|TRACE|ABORT)(?: |$)")
_HOST = re.compile(r"([\w.<>-]{0,253}):(\d{1,10}):(\d{1,10}) \[(\d{1,4})\] ")
_CHANNEL = re.compile(r"(?:Channel|Ring) (\d{1,9})(?:/(\d{1,9}))? ?: +(\d{1,9})(?:\[([0-9A-Fa-fx]+)\])? -> (\d{1,9})"
                      r"(?:\[([0-9A-Fa-fx]+)\])?(?: \[(send|receive)\])? via (.+)$")
_RCCL_TAIL = re.compile(r" comm 0x[0-9A-Fa-f]{1,16} nRanks \d{1,6}")
_VIA_NET = re.compile(r"NET/([^/()]+)/(\d{1,9})(?:\((\d{1,9})\))?((?:/[A-Za-z]+|\(PCI\))*)$")
_FLAG = re.compile(r"/[A-Za-z]+|\(PCI\)")
_FLAGS = ("/GDRDMA", "/Shared", "(PCI)")
_BANNER = re.compile(r"NET/(IB|Socket|[A-Za-z][\w-]*) ?: Using ")
_IB_DEV = re.compile(r"\[(\d{1,9})\] ?([\w.-]+):(\d{1,9})(?::\d{0,4}){0,2}/(IB|RoCE)")
_SOCK_DEV = re.compile(r"\[(\d{1,9})\]([\w.@-]+):([0-9A-Fa-f:.%]+)")
_OLD_IB_DEV = re.compile(r"NET/IB ?: \[(\d{1,9})\] ?([\w.-]+):(\d{1,9})/(IB|RoCE)")
_DEVICE_INFO = re.compile(r"NET/IB ?: \[(\d{1,9})\] ([\w.-]+):([\w.-]+):(\d{1,9})/(IB|RoCE)(?: provider=(\w+))?"
                          r"(?: speed=(\d{1,9}))?")
_VDEVICE = re.compile(r"NET/IB ?: Made virtual device \[(\d{1,9})\] name=([\w.+-]+)")
_OLD_IFACE = re.compile(r"NET(?:/Socket)? ?: Using interface ([\w.@-]+):([0-9A-Fa-f:.%]+)")
_SIDEBAND = re.compile(r"NET/IB ?: Using interface ([\w.@-]+) for sideband communication")
_BOOTSTRAP = re.compile(r"Bootstrap ?: Using (?:\[\d{1,9}\])?([\w.@-]+):")
_OOB = re.compile(r"; OOB ([\w.@-]+):")
_NETWORK = re.compile(r"(?:Using (?:internal )?[Nn]etwork|Initialized NET plugin|Assigned NET plugin) "
                      r"(\S(?:[^\n]{0,120}\S)?)")
_ASSIGNED_TAIL = " to comm"
_PLUGIN = re.compile(r"NET/Plugin ?: Loaded net plugin (\S(?:.{0,120}\S)?)")
_P2P_PLUGIN = re.compile(r"P2P plugin (?:v\d{1,9} )?(\S{1,64})$")
_OFI_PLUGIN = re.compile(r"NET/OFI (?:Using|Initializing) (aws-ofi-nccl \S{1,32})")
_PLUGIN_VERSION = re.compile(r" \(v\d{1,9}\)$")
_ENV = re.compile(r"([A-Z][A-Z0-9_]*) set (?:by environment )?to (.*)")
_GDR_HCA = re.compile(r"NET/[\w .-]*: GPU Direct RDMA (Enabled|Disabled) for HCA (\d{1,9}) '([^']*)'")
_GDR_GPU = re.compile(r"(?:NET/[\w .-]*: )?GPU Direct RDMA (Enabled|Disabled) for GPU ([0-9A-Fa-fx]+) / HCA "
                      r"([\w.-]+) \(([^()]{0,80})\)(?:, read (\d))?")
_GDR_SUMMARY = re.compile(r"Connected all rings(?:, use ring PXN (\d) GDR (\d))?")
_QP = re.compile(r"NET/IB ?: (?:\w+: )?(?:NCCL (?:Merged)?Dev (\d{1,9}) |Dev (\d{1,9}) )?(?:IbDev (\d{1,9}) )?"
                 r"Port (\d{1,9}) (?:qpn|qp_num) (\d{1,9}) mtu (\d{1,9}) (?:query_ece=\{[^{}]{0,200}\} )?"
                 r"(?:GID (-?\d{1,9}) \(([0-9A-Fa-f]+)/([0-9A-Fa-f]+)\)|LID (\d{1,9}))")
_ECE = re.compile(r"NET/IB ?: (?:\w+: )?(?:NCCL (?:Merged)?Dev \d{1,9} |Dev \d{1,9} )?(?:IbDev \d{1,9} )?"
                  r"Port \d{1,9} (?:qpn|qp_num) \d{1,9} (?:query|set)_ece=\{")
_COMM = re.compile(r"(?:\w+ )?comm (?:0x[0-9A-Fa-f]{1,16}|\(nil\)) rank (\d{1,9}) n[Rr]anks (\d{1,9})"
                   r"(?: nNodes (\d{1,9}))?")
_VERSION = re.compile(r"([NR])CCL version (\d{1,9}\.\d{1,9}(?:\.\d{1,9})?)")
_MISSING = re.compile(r"Error: network (\S{1,64}) not found")


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
class DeviceInfo:
    """A 2.27+ ``NET/IB: [n] dev:uverbsN:port/LINK provider=... speed=...`` line; ``n`` is the verbs index."""

    name: str
    port: int
    link: str
    provider: str | None
    speed_mbps: int | None


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
    host: str = field(default="", compare=False)

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


@dataclass(frozen=True, slots=True)
class GdrLine:
    kind: str
    """``hca`` (per NIC), ``gpu`` (per GPU-NIC pair) or ``summary`` (``Connected all rings ... GDR n``)."""
    enabled: bool
    note: str
    read: int | None = None
    """For ``gpu`` lines since 2.12: 0 when the check was for receives (writes into GPU memory), 1 for sends."""


@dataclass(frozen=True, slots=True)
class CommInfo:
    rank: int
    nranks: int
    nnodes: int | None


def message_of(line: str) -> tuple[str, str] | None:
    """``(level, message)`` after the first ``NCCL INFO|WARN|TRACE|ABORT`` of ``line``, whatever the prefix."""
    mark = _MARK.search(line)
    if mark is None:
        return None
    return mark[1], line[mark.end():].strip()


def nccl_host(line: str) -> str | None:
    """The host of NCCL's own ``host:pid:tid [dev]`` prefix, just before the ``NCCL`` mark (None without one)."""
    mark = _MARK.search(line)
    if mark is None:
        return None
    # only the tail before the mark: the prefix is short, and a bounded window keeps this linear on any line
    head = line[max(0, mark.start() - 300):mark.start()]
    cut = head.rfind(" [")
    if cut < 0:
        return None
    start = head.rfind(" ", 0, cut) + 1
    match = _HOST.match(head, start)
    return match[1] if match else None


def _strip_rccl_tail(via: str) -> str:
    at = via.rfind(" comm 0x")
    return via[:at] if at >= 0 and _RCCL_TAIL.fullmatch(via, at) else via


def parse_channel(message: str, line: int = 0, host: str = "") -> ChannelPath | None:
    match = _CHANNEL.match(message)
    if match is None:
        return None
    via = _strip_rccl_tail(match[8])
    net = _VIA_NET.match(via)
    return ChannelPath(int(match[1]), int(match[3]), int(match[5]), match[7] or "", via,
                       net[1] if net else None, int(net[2]) if net else None,
                       bool(net and "/GDRDMA" in net[4]), line, host)


def is_cut_channel(message: str) -> bool:
    """A channel line that stops short of a complete ``via`` path (the log was cut in this line): no ``via`` yet, a
    trailing ``/``, or a flag that is the start of one NCCL prints (``/GDR`` of ``/GDRDMA``)."""
    if not message.startswith(("Channel ", "Ring ")) or "->" not in message:
        return False
    path = parse_channel(message)
    if path is None:
        return True
    if path.via.endswith("/"):
        return True
    net = _VIA_NET.match(path.via)
    return path.via.startswith("NET/") and (net is None or any(
        flag not in _FLAGS and any(f.startswith(flag) for f in _FLAGS) for flag in _FLAG.findall(net[4])))


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


def parse_device_info(message: str) -> DeviceInfo | None:
    match = _DEVICE_INFO.match(message)
    if match is None:
        return None
    return DeviceInfo(match[2], int(match[4]), match[5], match[6], int(match[7]) if match[7] else None)


def parse_vdevice(message: str) -> tuple[int, tuple[str, ...]] | None:
    """``Made virtual device [8] name=mlx5_0+mlx5_1`` -> ``(8, ("mlx5_0", "mlx5_1"))``."""
    match = _VDEVICE.match(message)
    return (int(match[1]), tuple(match[2].split("+"))) if match else None


def parse_interfaces(message: str) -> tuple[str, ...]:
    """Interfaces NCCL says it bound: bootstrap, the IB banner's OOB interface, socket devices, 2.3 sideband."""
    if (boot := _BOOTSTRAP.match(message)) is not None:
        return (boot[1],)
    if (old := _OLD_IFACE.match(message)) is not None:
        return (old[1],)
    if (side := _SIDEBAND.match(message)) is not None:
        return (side[1],)
    banner = _BANNER.match(message)
    if banner is None:
        return ()
    if banner[1].lower() == "socket":
        return tuple(m[2] for m in _SOCK_DEV.finditer(message, banner.end()))
    oob = _OOB.search(message, banner.end())
    return (oob[1],) if oob else ()


def parse_network(message: str) -> str | None:
    """The network NCCL chose: ``Using network IB``, ``Using internal Network Socket`` (2.3), ``Initialized|Assigned
    NET plugin IB`` (2.27+)."""
    match = _NETWORK.match(message)
    if match is None:
        return None
    name = match[1]
    return name[:-len(_ASSIGNED_TAIL)] if name.endswith(_ASSIGNED_TAIL) else name


def parse_plugin(message: str) -> str | None:
    """The external net plugin that loaded: ``NET/Plugin: Loaded net plugin NCCL RDMA Plugin v8 (v8)``, the SHARP
    plugin's ``P2P plugin IBext_v8``, aws-ofi-nccl's ``NET/OFI Using aws-ofi-nccl 1.7.4-aws``."""
    if (match := _PLUGIN.match(message)) is not None:
        return _PLUGIN_VERSION.sub("", match[1])
    if (p2p := _P2P_PLUGIN.match(message)) is not None:
        return p2p[1]
    if (ofi := _OFI_PLUGIN.match(message)) is not None:
        return ofi[1]
    return None


def parse_env(message: str) -> tuple[str, str] | None:
    """``NCCL_IB_TC set by environment to 104.`` -> ``("NCCL_IB_TC", "104")`` (NCCL ends the line with a dot)."""
    match = _ENV.match(message)
    if match is None or not match[1].startswith(("NCCL_", "GLOO_", "RCCL_")):
        return None
    value = match[2].strip()
    return match[1], value[:-1] if value.endswith(".") else value


def parse_gdr(message: str) -> GdrLine | None:
    """GPUDirect decisions, per NIC, per GPU-NIC pair (with ``read 0|1`` since 2.12), or the rings' summary."""
    if (hca := _GDR_HCA.match(message)) is not None:
        return GdrLine("hca", hca[1] == "Enabled", hca[3])
    if (gpu := _GDR_GPU.match(message)) is not None:
        return GdrLine("gpu", gpu[1] == "Enabled", f"GPU {gpu[2]} / HCA {gpu[3]}: {gpu[4]}",
                       int(gpu[5]) if gpu[5] is not None else None)
    if (summary := _GDR_SUMMARY.match(message)) is not None and summary[2] is not None:
        return GdrLine("summary", summary[2] == "1", "")
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
    dev = match[1] or match[2]
    ibdev = int(match[3]) if match[3] is not None else None
    net_device = int(dev) if dev is not None else None
    if match[7] is not None:
        return QpInfo(net_device, ibdev, int(match[4]), "RoCE", int(match[7]), decode_gid(match[8], match[9]),
                      line)
    return QpInfo(net_device, ibdev, int(match[4]), "IB", None, None, line)


def parse_ece(message: str) -> bool:
    """A QP's Enhanced Connection Establishment line (``query_ece={...}``/``set_ece={...}`` on its own)."""
    return _ECE.match(message) is not None


def parse_comm(message: str) -> CommInfo | None:
    """``comm 0x.. rank 3 nRanks 16 nNodes 2 ...`` (2.19+), ``ncclCommInitRank comm 0x.. rank 0 nranks 16 ...``,
    2.3's ``comm 0x.. rank 3 nranks 8`` and RCCL's ``comm 0x.. rank 0 nranks 1 cudaDev 0 ...``."""
    match = _COMM.match(message)
    if match is None:
        return None
    return CommInfo(int(match[1]), int(match[2]), int(match[3]) if match[3] is not None else None)


def parse_version(line: str) -> tuple[str, str] | None:
    """``("NCCL", "2.21.5")`` from ``NCCL version 2.21.5+cuda12.4``; ``("RCCL", ...)`` from RCCL's banner."""
    at = line.find("CCL version ")
    if at < 1:
        return None
    match = _VERSION.match(line, at - 1)
    return (f"{match[1]}CCL", match[2]) if match else None


def parse_missing_network(message: str) -> str | None:
    """``Error: network gIB not found.``: the network NCCL_NET asked for is not there (init fails)."""
    match = _MISSING.match(message)
    return match[1].rstrip(".") if match else None
