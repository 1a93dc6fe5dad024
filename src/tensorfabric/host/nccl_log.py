"""Say from NCCL's (or RCCL's) own ``NCCL_DEBUG=INFO`` output which transport it used, and how strongly the log
shows it.

Capture the log with ``NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET`` (:data:`CAPTURE_HINT`): INIT and NET
carry the device banners, channel paths and QP lines, ENV the ``X set by environment to Y`` lines.

The text goes through the intake (:func:`tensorfabric.intake.normalise`), which takes off what collectors and
terminals wrapped around it (Ray, kubectl, mpirun, torchrun, srun and pdsh prefixes, timestamps, ANSI, Markdown);
NCCL's own ``host:pid:tid [dev]`` prefix stays and names the host. Only the text after ``NCCL INFO|WARN`` is
interpreted (:mod:`tensorfabric.host.nccl_lines`); lines without it are skipped, so application output interleaved
anywhere never changes the verdict. A line that looks like a network line but that no rule reads is listed as not
understood in the report's ``read``, and so is a WARN line no rule or signature reads; a log is refused only when
not one line carries the NCCL mark or a fact. The verdict itself is graded by evidence, never withheld
(:mod:`tensorfabric.host.nccl_verdict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tensorfabric.findings import Severity
from tensorfabric.host.nccl_lines import (
    MAX_LINE_CHARS,
    ChannelPath,
    LogDevice,
    QpInfo,
    is_cut_channel,
    message_of,
    nccl_host,
    parse_channel,
    parse_comm,
    parse_device_info,
    parse_devices,
    parse_ece,
    parse_env,
    parse_gdr,
    parse_interfaces,
    parse_missing_network,
    parse_network,
    parse_plugin,
    parse_qp,
    parse_vdevice,
    parse_version,
)
from tensorfabric.host.nccl_verdict import Evidence, Facts, GdrMode, Scope, Transport, judge
from tensorfabric.host.signatures import match_signatures
from tensorfabric.intake import Line, ReadReport, Tally, normalise

__all__ = ["CAPTURE_HINT", "MAX_LINE_CHARS", "ChannelPath", "Evidence", "GdrMode", "LogDevice", "NcclLogReport",
           "QpInfo", "Scope", "SignatureHit", "Transport", "parse_nccl_log"]

CAPTURE_HINT = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET"
_RELEVANT = ("NET/IB", "NET/Socket", "NET : ", "Using network", "Using internal Network", "GPU Direct RDMA")
_NOISE = ("interfaces found", "AsyncThreadMain start.")
_BARE = ("NET/IB", "NET/Socket", "Channel ", "Ring ", "Using network ", "Using internal Network ",
         "Initialized NET plugin ", "GPU Direct RDMA ")
_PLUGIN_FOUND = ("nccl.net-plugin-unsupported",)
"""Signatures that only matter when no plugin loaded after them (NCCL probes symbol versions newest first)."""


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
    """The line(s) the transport rests on (``line N: ...``), ``None`` when nothing says."""
    qps: tuple[QpInfo, ...] = ()
    long_lines: tuple[int, ...] = ()
    """Line numbers longer than MAX_LINE_CHARS: reported, never interpreted."""
    gdr_notes: tuple[str, ...] = ()
    evidence: Evidence = "none"
    """How the log supports ``transport``: ``data-path`` (channel/QP lines), ``selected`` (the chosen network with
    the banner's link layer), ``devices`` (a banner alone) or ``none``."""
    gpudirect_mode: GdrMode = "unknown"
    """``on``, ``receive-only`` (sends staged through host memory), ``partial``, ``off`` or ``unknown``."""
    plugin_link: str | None = None
    """The link layer a net plugin's devices show (``RoCE``/``IB``), when its banner shows one."""
    interfaces: tuple[str, ...] = ()
    """Interfaces the log shows NCCL bound (bootstrap, the IB banner's OOB, socket devices)."""
    hosts: tuple[str, ...] = ()
    """Hosts named by NCCL's own ``host:pid:tid`` prefixes."""
    product: str = "NCCL"
    rdma_selected: bool = False
    read: ReadReport | None = None

    @property
    def rdma(self) -> bool | None:
        """True when data moved (or was set to move) over RDMA verbs: RoCE, IB, or an RDMA net plugin."""
        if self.transport in ("roce", "ib"):
            return True
        if self.transport == "socket":
            return False
        if self.transport == "plugin":
            name = (self.network or self.plugin or "").lower()
            return None if "tcp" in name or "socket" in name else True
        return True if self.rdma_selected else None

    @property
    def env_logged(self) -> bool:
        """Whether the ENV subsystem was on: then a variable missing from ``environment`` was unset in the job."""
        return bool(self.environment)

    def verdict(self) -> tuple[Any, ...]:
        return (self.transport, self.gpudirect, self.devices, self.channels, self.network, self.scope,
                self.evidence)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "product": self.product, "transport": self.transport,
                "evidence": self.evidence, "gpudirect": self.gpudirect, "gpudirect_mode": self.gpudirect_mode,
                "scope": self.scope, "proof": self.proof, "devices": [str(d) for d in self.devices],
                "network": self.network, "plugin": self.plugin, "plugin_link": self.plugin_link,
                "version": self.version, "gid_index": self.gid_index, "environment": dict(self.environment),
                "interfaces": list(self.interfaces), "hosts": list(self.hosts),
                "qps": [q.to_dict() for q in self.qps], "long_lines": list(self.long_lines),
                "gdr_notes": list(self.gdr_notes), "channels": [c.to_dict() for c in self.channels],
                "signatures": [s.to_dict() for s in self.signatures],
                "read": self.read.to_dict() if self.read is not None else None}


def parse_nccl_log(data: str | bytes, *, source: str = "<log>") -> NcclLogReport:
    """Read NCCL/RCCL debug output into a graded verdict.

    Raises ParseError only for binary or empty input, or when no line carries the NCCL mark or a known fact.
    """
    text = normalise(data, source=source, what="an NCCL log", max_line_chars=MAX_LINE_CHARS)
    tally = Tally(text, "NCCL log")
    facts = Facts()
    hits: dict[str, SignatureHit] = {}
    unterminated = not (data.endswith(b"\n") if isinstance(data, bytes) else data.endswith("\n"))
    marked = False
    for line in text.content():
        cut = unterminated and line.number == text.total
        marked = _read_line(facts, hits, tally, line, cut) or marked
    if facts.product == "RCCL":
        tally.format = "RCCL log"
    tally.version = facts.version
    if not marked:
        tally.require(f"lines holding 'NCCL INFO' or 'NCCL WARN' (no NCCL lines found; capture with {CAPTURE_HINT})")
    if facts.plugin is not None:
        hits = {k: v for k, v in hits.items() if k not in _PLUGIN_FOUND}
    verdict = judge(facts)
    return NcclLogReport(
        source=source, transport=verdict.transport, gpudirect=verdict.gpudirect, devices=verdict.devices,
        channels=tuple(facts.channels), signatures=tuple(sorted(hits.values(), key=lambda h: h.line)),
        network=facts.network, plugin=facts.plugin, version=facts.version,
        gid_index=next((q.gid_index for q in facts.qps if q.gid_index is not None), None),
        no_device=facts.no_device, environment=dict(facts.environment), scope=verdict.scope, proof=verdict.proof,
        qps=tuple(facts.qps), long_lines=text.long_lines, gdr_notes=verdict.notes, evidence=verdict.evidence,
        gpudirect_mode=verdict.gdr_mode, plugin_link=verdict.plugin_link, interfaces=tuple(facts.interfaces),
        hosts=tuple(h for h in facts.hosts if h), product=facts.product, rdma_selected=verdict.rdma_selected,
        read=tally.report())


def _read_line(facts: Facts, hits: dict[str, SignatureHit], tally: Tally, line: Line, cut: bool) -> bool:
    """Read one content line; True when it carries the NCCL mark."""
    text = line.text
    if facts.version is None and (version := parse_version(text)) is not None:
        facts.product, facts.version = version
        tally.use(line)
    found = message_of(text)
    if found is None:
        bare = text.strip()
        # write-ups and grep -o pastes quote the message without NCCL's prefix; only its distinctive forms are read
        read = bare.startswith(_BARE) and _interpret(facts, tally, line, bare, "")
        if _signatures(hits, text, line.number) or read:
            tally.use(line)
        return False
    message = found[1]
    if cut and _looks_cut(message):
        tally.warn(line, "the log ends in the middle of this line (cut off?); it was not read")
        return True
    if parse_channel(message) is not None and is_cut_channel(message):
        # an elided or wrapped paste: a path like "via NET/IB/0/GDR" would otherwise read as "no GPUDirect"
        tally.warn(line, "this channel line stops short of its path (cut off?); it was not read")
        return True
    signed = _signatures(hits, text, line.number)
    host = nccl_host(text)
    if host is not None:
        facts.hosts.setdefault(host)
    if _interpret(facts, tally, line, message, host or "") or signed:
        tally.use(line)
    elif found[0] != "INFO" or _relevant(message):
        tally.not_understood(line)
    return True


def _relevant(message: str) -> bool:
    """An INFO line about the network that no rule read: worth listing as not understood (the other INFO lines --
    trees, affinity, timings, proxies -- are hundreds of shapes that say nothing about the transport)."""
    if message.endswith(_NOISE):
        return False
    if message.startswith(("Channel ", "Ring ")):
        return " via " in message
    return message.startswith(_RELEVANT) or "NET plugin" in message[:48]


def _interpret(facts: Facts, tally: Tally, line: Line, message: str, host: str) -> bool:
    """Update ``facts`` from one NCCL message; True when a rule read it."""
    number = line.number
    if (path := parse_channel(message, number, host)) is not None:
        facts.channels.append(path)
    elif (info := parse_device_info(message)) is not None:
        facts.device_info.setdefault(info.name, info)
        facts.device_info_line = facts.device_info_line or number
    elif (devices := parse_devices(message)) is not None:
        net, devs = devices
        known = facts.devices.setdefault(net, [])
        known += [d for d in devs if all(k.index != d.index for k in known)]
        facts.banner_lines.setdefault(net, number)
        facts.interfaces.update(dict.fromkeys(parse_interfaces(message)))
    elif (vdev := parse_vdevice(message)) is not None:
        facts.vdevices[vdev[0]] = vdev[1]
    elif (qp := parse_qp(message, number)) is not None:
        facts.qps.append(qp)
        if qp.link == "RoCE" and qp.gid is None:
            tally.warn(line, "the QP line's GID halves are not 64-bit hex values; the GID was not decoded")
    elif parse_ece(message):
        pass
    elif (network := parse_network(message)) is not None:
        facts.networks.append((network, number, message.startswith("Using")))
    elif (plugin := parse_plugin(message)) is not None:
        facts.plugin = facts.plugin or plugin
    elif (gdr := parse_gdr(message)) is not None:
        facts.gdr.append(gdr)
    elif (env := parse_env(message)) is not None:
        facts.environment.setdefault(*env)
    elif (comm := parse_comm(message)) is not None:
        facts.comms.append((host, comm))
    elif interfaces := parse_interfaces(message):
        facts.interfaces.update(dict.fromkeys(interfaces))
    elif (missing := parse_missing_network(message)) is not None:
        facts.network_missing = missing
    else:
        return _fallbacks(facts, message)
    return True


def _fallbacks(facts: Facts, message: str) -> bool:
    """The lines that say a network could not be used (the reasons for a fallback) or that no plugin is there."""
    if message.startswith("NET/IB") and "No device found" in message:
        facts.no_device = facts.ib_failed = True
    elif message.startswith("Failed to open libibverbs"):
        facts.ib_failed = True
    elif message.startswith("Failed to initialize NET plugin "):
        facts.ib_failed = facts.ib_failed or message.endswith(" IB")
    elif not message.startswith("NET/Plugin") or not ("No plugin found" in message or "Could not find" in message
                                                      or "internal" in message):
        return False
    return True


def _signatures(hits: dict[str, SignatureHit], line: str, number: int) -> bool:
    found = match_signatures(line)
    for sig in found:
        previous = hits.get(sig.id)
        hits[sig.id] = (
            SignatureHit(sig.id, sig.severity, number, line.strip()[:200], sig.meaning, sig.fix, 1, sig.reference)
            if previous is None else
            SignatureHit(previous.id, previous.severity, previous.line, previous.excerpt, previous.meaning,
                         previous.fix, previous.count + 1, previous.reference))
    return bool(found)


def _looks_cut(message: str) -> bool:
    """Whether an unterminated final message stops short of a form we know to be longer."""
    if message.startswith(("Channel ", "Ring ")) and "->" in message:
        return is_cut_channel(message)
    if message.startswith("NET/") and ": Using" in message.replace(" : ", ": "):
        return parse_devices(message) is None and "interface" not in message
    return message.startswith("Using network") and parse_network(message) is None
