"""Prove from NCCL's own ``NCCL_DEBUG=INFO`` output which transport it really used.

Any line prefix is accepted (``host:pid:tid [dev] NCCL INFO ...``, timestamps, ``[rank3]:`` launchers); only the
text after ``NCCL INFO|WARN|TRACE`` is interpreted. Lines that do not contain ``NCCL`` at all are ignored, so
application output interleaved anywhere never changes the verdict.

Evidence, strongest first (nccl.md §5): per-channel paths (``Channel NN/N : a[b] -> c[d] [send] via
NET/IB/0/GDRDMA``, older ``Ring NN : a -> b via NET/Socket/0``); ``Using network IB|Socket|<plugin>``; the device
banners (``NET/IB : Using [0]mlx5_0:1/RoCE``, ``NET/Socket : Using [0]eth0:...``); GPUDirect lines (``GPU Direct
RDMA Disabled for HCA``, ``use ring PXN 1 GDR 1``). "Using network IB" alone does not prove RoCE; the banner's
``/RoCE`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tensorfabric.errors import ParseError
from tensorfabric.findings import Severity
from tensorfabric.host.signatures import match_signatures

__all__ = ["ChannelPath", "LogDevice", "NcclLogReport", "SignatureHit", "Transport", "parse_nccl_log"]

Transport = Literal["roce", "ib", "socket", "plugin", "unknown"]

_MARK = re.compile(r"NCCL (INFO|WARN|TRACE|ABORT)\b ?(.*)$")
_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_BANNER = re.compile(r"^NET/(?P<net>[\w .-]+?) ?: Using(?P<rest>.*)$")
_IB_DEV = re.compile(r"\[(\d+)\]([\w.-]+):(\d+)/(IB|RoCE)")
_SOCK_DEV = re.compile(r"\[(\d+)\]([\w.@-]+):([0-9A-Fa-f:.%]+)")
_NETWORK = re.compile(r"^Using network (.+?)\s*$")
_PLUGIN = re.compile(r"^NET/Plugin ?: Loaded net plugin (.+?)(?: \(v\d+\))?\s*$")
_CHANNEL = re.compile(r"^Channel (\d+)(?:/(\d+))? ?: (\d+)\[([0-9A-Fa-fx]+)\] -> (\d+)\[([0-9A-Fa-fx]+)\]"
                      r"(?: \[(send|receive)\])? via (.+?)\s*$")
_RING = re.compile(r"^Ring (\d+) ?: (\d+)(?:\[([0-9A-Fa-fx]+)\])? -> (\d+)(?:\[([0-9A-Fa-fx]+)\])?"
                   r"(?: \[(send|receive)\])? via (.+?)\s*$")
# PXN paths name the proxy rank in parentheses: ``via NET/IB/0(1)/GDRDMA``.
_VIA_NET = re.compile(r"^NET/(?P<net>.+?)/(?P<dev>\d+)(?:\((?P<proxy>\d+)\))?(?P<flags>.*)$")
_GDR_HCA = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA (\d+) '([^']*)'")
_GDR_SUMMARY = re.compile(r"Connected all rings.*\bGDR (\d)")
_ENV_SET = re.compile(r"^(NCCL_\w+|GLOO_\w+) set by environment to (.*?)\.?\s*$")
_GID = re.compile(r"\bGID (\d+) \(([0-9A-Fa-f]+)/([0-9A-Fa-f]+)\)")
_FLAGS = re.compile(r"^(?:/GDRDMA|/Shared|\(PCI\))*$")


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

    def to_dict(self) -> dict[str, Any]:
        return {"channel": self.channel, "src": self.src, "dst": self.dst, "direction": self.direction,
                "via": self.via, "gdr": self.gdr}


@dataclass(frozen=True, slots=True)
class SignatureHit:
    id: str
    severity: Severity
    line: int
    excerpt: str
    meaning: str
    fix: str
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "line": self.line, "count": self.count,
                "excerpt": self.excerpt, "meaning": self.meaning, "fix": self.fix}


@dataclass(frozen=True, slots=True)
class NcclLogReport:
    source: str
    transport: Transport
    gpudirect: bool | None
    devices: tuple[LogDevice, ...]
    channels: tuple[ChannelPath, ...]
    signatures: tuple[SignatureHit, ...]
    network: str | None = None
    plugin: str | None = None
    version: str | None = None
    gid_index: int | None = None
    no_device: bool = False
    environment: Mapping[str, str] = field(default_factory=dict)
    """Variables NCCL reports as ``X set by environment to Y`` (ENV subsystem, on by default)."""

    @property
    def rdma(self) -> bool | None:
        """True when data moved over RDMA verbs (RoCE, IB, or an RDMA net plugin), False for sockets."""
        if self.transport in ("roce", "ib"):
            return True
        if self.transport == "socket":
            return False
        if self.transport == "plugin":
            name = (self.plugin or self.network or "").lower()
            return None if "tcp" in name or "socket" in name else True
        return None

    def verdict(self) -> tuple[Any, ...]:
        return self.transport, self.gpudirect, self.devices, self.channels, self.network

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "transport": self.transport, "gpudirect": self.gpudirect,
                "devices": [str(d) for d in self.devices], "network": self.network, "plugin": self.plugin,
                "version": self.version, "gid_index": self.gid_index, "environment": dict(self.environment),
                "channels": [c.to_dict() for c in self.channels],
                "signatures": [s.to_dict() for s in self.signatures]}


def _decode(data: str | bytes, source: str) -> str:
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"not UTF-8 text (byte {exc.start}); is this a binary file rather than an NCCL log?",
                             source=source) from None
    if "\x00" in data:
        raise ParseError("contains NUL bytes; is this a binary file rather than an NCCL log?", source=source,
                         line=data.count("\n", 0, data.index("\x00")) + 1)
    controls = sum(1 for ch in data[:65536] if ord(ch) < 32 and ch not in "\t\n\r\x1b\x0c")
    if controls > max(8, len(data[:65536]) // 10):
        raise ParseError("mostly control characters; is this a binary file rather than an NCCL log?", source=source)
    return data


class _State:
    def __init__(self) -> None:
        self.devices: dict[str, list[LogDevice]] = {}
        self.channels: list[ChannelPath] = []
        self.hits: dict[str, SignatureHit] = {}
        self.network: str | None = None
        self.plugin: str | None = None
        self.version: str | None = None
        self.gid_index: int | None = None
        self.no_device = False
        self.gdr_hca: dict[str, bool] = {}
        self.gdr_summary: bool | None = None
        self.environment: dict[str, str] = {}


def _channel(message: str) -> ChannelPath | None:
    match = _CHANNEL.match(message)
    if match:
        channel, src, dst, direction, via = int(match[1]), int(match[3]), int(match[5]), match[7] or "", match[8]
    else:
        match = _RING.match(message)
        if not match:
            return None
        channel, src, dst, direction, via = int(match[1]), int(match[2]), int(match[4]), match[6] or "", match[7]
    net = _VIA_NET.match(via)
    return ChannelPath(channel, src, dst, direction, via, net["net"] if net else None,
                       int(net["dev"]) if net else None, bool(net and "GDRDMA" in net["flags"]))


def _banner(state: _State, message: str) -> bool:
    match = _BANNER.match(message)
    if not match:
        return False
    net, rest = match["net"].strip(), match["rest"]
    if net.lower() == "socket":
        devs = [LogDevice(int(m[1]), f"{m[2]}:{m[3]}", None, "Socket") for m in _SOCK_DEV.finditer(rest)]
    else:
        devs = [LogDevice(int(m[1]), m[2], int(m[3]), m[4]) for m in _IB_DEV.finditer(rest)]
    if not devs:
        return False
    state.devices.setdefault(net, devs)
    return True


def _interpret(state: _State, message: str) -> bool:
    """Update ``state`` from one NCCL message; True when it was recognised."""
    if (path := _channel(message)) is not None:
        state.channels.append(path)
        return True
    if _banner(state, message):
        return True
    if (match := _NETWORK.match(message)) is not None:
        state.network = match[1]
        return True
    if (match := _PLUGIN.match(message)) is not None:
        state.plugin = match[1]
        return True
    if "No device found" in message and message.startswith("NET/IB"):
        state.no_device = True
        return True
    if (match := _GDR_HCA.search(message)) is not None:
        state.gdr_hca[match[3]] = match[1] == "Enabled"
        return True
    if (match := _GDR_SUMMARY.search(message)) is not None:
        state.gdr_summary = match[1] == "1"
        return True
    if (match := _ENV_SET.match(message)) is not None:
        state.environment.setdefault(match[1], match[2])
        return True
    if (match := _GID.search(message)) is not None and state.gid_index is None:
        state.gid_index = int(match[1])
        return True
    return _VERSION.search(message) is not None


def parse_nccl_log(text: str | bytes, *, source: str = "<log>") -> NcclLogReport:
    """Parse NCCL debug output into a verdict. Raises ParseError for binary, empty, cut-off or NCCL-less input."""
    text = _decode(text, source)
    if not text.strip():
        raise ParseError("empty log; capture NCCL output with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET",
                         source=source)
    state = _State()
    lines = text.split("\n")
    seen_nccl = False
    for number, line in enumerate(lines, start=1):
        if "NCCL" not in line:
            continue
        seen_nccl = True
        for sig in match_signatures(line):
            previous = state.hits.get(sig.id)
            state.hits[sig.id] = (SignatureHit(sig.id, sig.severity, number, line.strip()[:200], sig.meaning, sig.fix)
                                  if previous is None else
                                  SignatureHit(previous.id, previous.severity, previous.line, previous.excerpt,
                                               previous.meaning, previous.fix, previous.count + 1))
        if state.version is None and (version := _VERSION.search(line)) is not None:
            state.version = version[1]
        mark = _MARK.search(line)
        if mark is None:
            continue
        message = mark[2].strip()
        recognised = _interpret(state, message)
        if number == len(lines) and not text.endswith("\n") and _looks_cut(message, recognised):
            raise ParseError("log ends in the middle of an NCCL line (truncated?)", source=source, line=number,
                             excerpt=message)
    if not seen_nccl:
        raise ParseError("no NCCL lines found; run with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET)",
                         source=source)
    return _report(state, source)


def _looks_cut(message: str, recognised: bool) -> bool:
    """Whether an unterminated final message stops short of a form we know to be longer."""
    if message.startswith(("Channel ", "Ring ")) and "->" in message:
        if not recognised:
            return True
        via = message.rsplit(" via ", 1)[-1]
        net = _VIA_NET.match(via)
        return via.endswith("/") or (net is not None and not _FLAGS.match(net["flags"]))
    if message.startswith("NET/") and ": Using" in message.replace(" : ", ": "):
        return not recognised
    return message.startswith("Using network") and not recognised


def _report(state: _State, source: str) -> NcclLogReport:
    net_paths = [c for c in state.channels if c.net is not None]
    socket_used = any(c.net is not None and c.net.lower() == "socket" for c in net_paths)
    network = state.network
    transport: Transport
    devices: tuple[LogDevice, ...]
    if socket_used or (not net_paths and network is not None and network.lower() == "socket") or (
            network is None and not net_paths and "Socket" in state.devices and not _ib_banners(state)):
        transport, devices = "socket", tuple(state.devices.get("Socket", ()))
    elif net_paths or network is not None:
        name = net_paths[0].net if net_paths and net_paths[0].net else (network or "")
        devices = tuple(_ib_banners(state))
        if name.upper() == "IB":
            used = {c.net_device for c in net_paths}
            links = {d.link for d in devices if not used or d.index in used}
            transport = "roce" if "RoCE" in links else "ib"
        else:
            transport = "plugin"
    else:
        transport, devices = "unknown", tuple(d for devs in state.devices.values() for d in devs)
    return NcclLogReport(
        source=source, transport=transport, gpudirect=_gpudirect(state, transport, net_paths), devices=devices,
        channels=tuple(state.channels), signatures=tuple(sorted(state.hits.values(), key=lambda h: h.line)),
        network=network, plugin=state.plugin, version=state.version, gid_index=state.gid_index,
        no_device=state.no_device, environment=dict(state.environment))


def _ib_banners(state: _State) -> list[LogDevice]:
    return [d for net, devs in state.devices.items() if net.lower() != "socket" for d in devs]


def _gpudirect(state: _State, transport: Transport, net_paths: list[ChannelPath]) -> bool | None:
    if transport == "socket":
        return False
    if net_paths:
        return all(c.gdr for c in net_paths)
    if state.gdr_summary is not None:
        return state.gdr_summary
    if state.gdr_hca:
        return all(state.gdr_hca.values())
    return None
