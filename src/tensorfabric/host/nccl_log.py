"""Prove from NCCL's own ``NCCL_DEBUG=INFO`` output which transport it really used.

Capture the log with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET`` (:data:`CAPTURE_HINT`): INIT and NET
carry the device banners, channel paths and QP lines, ENV the ``X set by environment to Y`` lines.

Any line prefix is accepted (``host:pid:tid``, ``:pid:tid``, ``[rank3]:``, ``[1,3]<stdout>:``, pod names,
timestamps); only the text after ``NCCL INFO|WARN`` is interpreted (:mod:`tensorfabric.host.nccl_lines`). Lines
that do not contain ``NCCL`` are ignored, so application output interleaved anywhere never changes the verdict.

Proof rules:

* ``roce``/``ib`` needs a data-path line: a channel ``via NET/IB/<idx>`` whose device index the banner maps to a
  link layer, or a QP line (``GID n (..)`` is RoCE, ``LID n`` is InfiniBand). A banner and ``Using network IB``
  alone prove nothing (``unknown``): NCCL may never have connected over them.
* Any channel ``via NET/Socket`` is ``socket``, whatever the interface is called (``ib0`` included); bootstrap
  ``NET/Socket`` banners beside IB channels are only the out-of-band path.
* A log whose channels are all intra-node (P2P, SHM, NVLS) has no inter-node traffic: ``unknown``, scope
  ``intra-node``.
* GPUDirect: an internal IB channel without ``/GDRDMA`` is off; an external plugin's channel without it is
  *unknown* (plugins need not print the suffix) unless a GDR line says more.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tensorfabric.errors import ParseError
from tensorfabric.findings import Severity
from tensorfabric.host.nccl_lines import (
    MAX_LINE_CHARS,
    ChannelPath,
    LogDevice,
    QpInfo,
    is_cut_channel,
    message_of,
    parse_channel,
    parse_devices,
    parse_env,
    parse_gdr,
    parse_network,
    parse_plugin,
    parse_qp,
)
from tensorfabric.host.signatures import match_signatures

__all__ = ["CAPTURE_HINT", "MAX_LINE_CHARS", "ChannelPath", "LogDevice", "NcclLogReport", "QpInfo", "Scope",
           "SignatureHit", "Transport", "decode_log", "parse_nccl_log"]

Transport = Literal["roce", "ib", "socket", "plugin", "unknown"]
Scope = Literal["inter-node", "intra-node", "unknown"]
CAPTURE_HINT = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET"
_INTERNAL = ("ib", "socket")
_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)?")


@dataclass(frozen=True, slots=True)
class SignatureHit:
    id: str
    severity: Severity
    line: int
    excerpt: str
    meaning: str
    fix: str
    count: int = 1
    reference: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "severity": self.severity, "line": self.line, "count": self.count,
                "excerpt": self.excerpt, "meaning": self.meaning, "fix": self.fix, "reference": self.reference}


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
    """Variables NCCL reports as ``X set by environment to Y`` (ENV subsystem)."""
    scope: Scope = "unknown"
    proof: str | None = None
    """The line that proves the transport (``line N: ...``), ``None`` when nothing does."""
    qps: tuple[QpInfo, ...] = ()
    long_lines: tuple[int, ...] = ()
    """Line numbers longer than MAX_LINE_CHARS: reported, never interpreted."""
    gdr_notes: tuple[str, ...] = ()

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
        if any(c.net is not None and c.net.upper() == "IB" for c in self.channels):
            return True  # NET/IB channels whose link layer the log never names: RDMA, RoCE or IB unknown
        return None

    @property
    def env_logged(self) -> bool:
        """Whether the ENV subsystem was on: then a variable missing from ``environment`` was unset in the job."""
        return bool(self.environment)

    def verdict(self) -> tuple[Any, ...]:
        return self.transport, self.gpudirect, self.devices, self.channels, self.network, self.scope

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "transport": self.transport, "gpudirect": self.gpudirect,
                "scope": self.scope, "proof": self.proof,
                "devices": [str(d) for d in self.devices], "network": self.network, "plugin": self.plugin,
                "version": self.version, "gid_index": self.gid_index, "environment": dict(self.environment),
                "qps": [q.to_dict() for q in self.qps], "long_lines": list(self.long_lines),
                "gdr_notes": list(self.gdr_notes), "channels": [c.to_dict() for c in self.channels],
                "signatures": [s.to_dict() for s in self.signatures]}


def _decode(data: str | bytes, source: str) -> str:
    return decode_log(data, source, "an NCCL log")


def decode_log(data: str | bytes, source: str, what: str) -> str:
    """UTF-8 text of a captured log; ParseError for binary input (bad UTF-8, NUL bytes, mostly control bytes)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"not UTF-8 text (byte {exc.start}); is this a binary file rather than {what}?",
                             source=source) from None
    nul = data.find("\x00")
    if nul >= 0:
        raise ParseError(f"contains NUL bytes; is this a binary file rather than {what}?", source=source,
                         line=data.count("\n", 0, nul) + 1)
    head = data[:65536]
    controls = sum(1 for ch in head if ord(ch) < 32 and ch not in "\t\n\r\x1b\x0c")
    if controls > max(8, len(head) // 10):
        raise ParseError(f"mostly control characters; is this a binary file rather than {what}?", source=source)
    return data


class _State:
    def __init__(self) -> None:
        self.devices: dict[str, list[LogDevice]] = {}
        self.channels: list[ChannelPath] = []
        self.qps: list[QpInfo] = []
        self.hits: dict[str, SignatureHit] = {}
        self.network: str | None = None
        self.plugin: str | None = None
        self.version: str | None = None
        self.no_device = False
        self.gdr: dict[str, list[tuple[bool, str]]] = {"hca": [], "gpu": [], "summary": []}
        self.environment: dict[str, str] = {}
        self.long_lines: list[int] = []
        self.network_line = 0


def _interpret(state: _State, message: str, number: int) -> bool:
    """Update ``state`` from one NCCL message; True when it was recognised."""
    if (path := parse_channel(message, number)) is not None:
        state.channels.append(path)
    elif (devices := parse_devices(message)) is not None:
        net, devs = devices
        known = state.devices.setdefault(net, [])
        known += [d for d in devs if all(k.index != d.index for k in known)]
    elif (qp := parse_qp(message, number)) is not None:
        state.qps.append(qp)
    elif (network := parse_network(message)) is not None:
        state.network, state.network_line = network, number
    elif (plugin := parse_plugin(message)) is not None:
        state.plugin = plugin
    elif (gdr := parse_gdr(message)) is not None:
        state.gdr[gdr[0]].append((gdr[1], gdr[2]))
    elif (env := parse_env(message)) is not None:
        state.environment.setdefault(*env)
    elif message.startswith("NET/IB") and "No device found" in message:
        state.no_device = True
    else:
        return message.startswith("NCCL version")
    return True


def _signatures(state: _State, line: str, number: int) -> None:
    for sig in match_signatures(line):
        previous = state.hits.get(sig.id)
        state.hits[sig.id] = (
            SignatureHit(sig.id, sig.severity, number, line.strip()[:200], sig.meaning, sig.fix, 1, sig.reference)
            if previous is None else
            SignatureHit(previous.id, previous.severity, previous.line, previous.excerpt, previous.meaning,
                         previous.fix, previous.count + 1, previous.reference))


def parse_nccl_log(text: str | bytes, *, source: str = "<log>") -> NcclLogReport:
    """Parse NCCL debug output into a verdict. Raises ParseError for binary, empty, cut-off or NCCL-less input."""
    text = _decode(text, source)
    if not text.strip():
        raise ParseError(f"empty log; capture NCCL output with {CAPTURE_HINT}", source=source)
    state = _State()
    lines = text.split("\n")
    seen_nccl = False
    for number, line in enumerate(lines, start=1):
        if len(line) > MAX_LINE_CHARS:
            state.long_lines.append(number)
            continue
        if "NCCL" not in line:
            continue
        seen_nccl = True
        _signatures(state, line, number)
        if state.version is None and (at := line.find("NCCL version ")) >= 0:
            version = _VERSION.match(line, at + 13)
            state.version = version[0] if version else None
        found = message_of(line)
        if found is None:
            continue
        message = found[1]
        recognised = _interpret(state, message, number)
        if number == len(lines) and not text.endswith("\n") and _looks_cut(message, recognised):
            raise ParseError("log ends in the middle of an NCCL line (truncated?)", source=source, line=number,
                             excerpt=message)
    if not seen_nccl:
        raise ParseError(f"no NCCL lines found; run with {CAPTURE_HINT}"
                         + (f" ({len(state.long_lines)} line(s) over {MAX_LINE_CHARS} characters were skipped)"
                            if state.long_lines else ""), source=source)
    return _report(state, source)


def _looks_cut(message: str, recognised: bool) -> bool:
    """Whether an unterminated final message stops short of a form we know to be longer."""
    if message.startswith(("Channel ", "Ring ")) and "->" in message:
        return is_cut_channel(message)
    if message.startswith("NET/") and ": Using" in message.replace(" : ", ": "):
        return not recognised and "interface" not in message
    return message.startswith("Using network") and not recognised


def _link_of(state: _State, path: ChannelPath) -> str | None:
    """RoCE/IB for an internal ``NET/IB/<idx>`` channel: the banner's device ``idx``, else the QP lines."""
    banner = next((d for d in state.devices.get("IB", ()) if d.index == path.net_device), None)
    if banner is not None:
        return banner.link
    links = {q.link for q in state.qps if q.net_device in (None, path.net_device)}
    return links.pop() if len(links) == 1 else None


def _report(state: _State, source: str) -> NcclLogReport:
    net_paths = [c for c in state.channels if c.net is not None]
    sockets = [c for c in net_paths if c.net is not None and c.net.lower() == "socket"]
    ib = [c for c in net_paths if c.net is not None and c.net.upper() == "IB"]
    plugin = [c for c in net_paths if c.net is not None and c.net.lower() not in _INTERNAL]
    transport: Transport = "unknown"
    proof: str | None = None
    devices: tuple[LogDevice, ...] = ()
    if sockets:
        transport, proof = "socket", _cite(sockets[0])
    elif ib:
        links = {_link_of(state, c) for c in ib}
        if None not in links:
            transport, proof = ("roce" if "RoCE" in links else "ib"), _cite(ib[0])
    elif plugin:
        transport, proof = "plugin", _cite(plugin[0])
    elif state.qps:
        links = {q.link for q in state.qps}
        transport = "roce" if "RoCE" in links else "ib"
        proof = f"line {state.qps[0].line}: QP connected over {state.qps[0].link}"
    elif not state.channels and (state.network or "").lower() == "socket":
        transport, proof = "socket", f"line {state.network_line}: Using network Socket (no other network)"
    if transport == "socket":
        devices = tuple(state.devices.get("Socket", ()))
    elif transport in ("roce", "ib", "plugin"):
        devices = tuple(d for net, devs in state.devices.items() if net.lower() != "socket" for d in devs)
    else:
        devices = tuple(d for devs in state.devices.values() for d in devs)
    scope: Scope = "inter-node" if net_paths or state.qps else "intra-node" if state.channels else "unknown"
    gpudirect, notes = _gpudirect(state, transport, ib, plugin)
    return NcclLogReport(
        source=source, transport=transport, gpudirect=gpudirect, devices=devices,
        channels=tuple(state.channels), signatures=tuple(sorted(state.hits.values(), key=lambda h: h.line)),
        network=state.network, plugin=state.plugin, version=state.version,
        gid_index=next((q.gid_index for q in state.qps if q.gid_index is not None), None),
        no_device=state.no_device, environment=dict(state.environment), scope=scope, proof=proof,
        qps=tuple(state.qps), long_lines=tuple(state.long_lines), gdr_notes=tuple(notes))


def _cite(path: ChannelPath) -> str:
    return f"line {path.line}: channel {path.channel:02d} {path.src} -> {path.dst} via {path.via}"


def _gpudirect(state: _State, transport: Transport, ib: list[ChannelPath],
               plugin: list[ChannelPath]) -> tuple[bool | None, list[str]]:
    notes = [note for on, note in state.gdr["gpu"] if not on and note]
    if not ib and not plugin and state.channels and not any(c.net for c in state.channels):
        return None, ["intra-node channels only: GPUDirect RDMA is not exercised"]
    if transport == "socket":
        return False, notes
    if ib:
        return all(c.gdr for c in ib), notes
    if plugin and all(c.gdr for c in plugin):
        return True, notes
    for kind in ("summary", "hca", "gpu"):
        if state.gdr[kind]:
            return all(on for on, _ in state.gdr[kind]), notes
    if plugin:
        notes.append("plugin channels carry no /GDRDMA suffix and no GDR line says more: GPUDirect unknown")
    return None, notes
