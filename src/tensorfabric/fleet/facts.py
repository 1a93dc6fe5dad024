"""One host's comparable facts, read from its ``doctor --json`` report (any schema version, any producer).

The fleet rules never look at the raw report: :func:`host_facts` turns it into a :class:`HostReport` and collects a
warning for every value it could not use (a report of schema 1, written before the fleet fields existed, simply
has fewer facts, and the rules that need them say so instead of guessing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tensorfabric.findings import Finding

__all__ = ["HostReport", "NetFacts", "PortFacts", "host_facts"]


@dataclass(frozen=True, slots=True)
class PortFacts:
    """One RDMA port as the fleet compares it."""

    name: str
    """``mlx5_0:1``."""
    device: str
    state: str = ""
    link_layer: str = ""
    netdev: str | None = None
    rate: str = ""
    mtu: int | None = None
    speed_mbps: int | None = None
    gid_index: int | None = None
    traffic_class: int | None = None
    fw_ver: str = ""
    hca_type: str = ""
    driver: str | None = None
    active: bool = field(init=False, default=False)
    is_roce: bool = field(init=False, default=False)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its arguments: pickling 10,000 reports from the readers' processes stays cheap.
        return PortFacts, (self.name, self.device, self.state, self.link_layer, self.netdev, self.rate, self.mtu,
                           self.speed_mbps, self.gid_index, self.traffic_class, self.fw_ver, self.hca_type,
                           self.driver)

    def __post_init__(self) -> None:
        # Fields, not properties: the rules ask them of every port of 10,000 hosts several times.
        object.__setattr__(self, "active", self.state.split(":")[-1].strip().upper() == "ACTIVE")
        object.__setattr__(self, "is_roce", self.link_layer.lower() == "ethernet")


@dataclass(frozen=True, slots=True)
class NetFacts:
    name: str
    role: str = ""
    """``roce`` (a RoCE port's netdev), ``socket`` (named by NCCL/GLOO_SOCKET_IFNAME) or ``tcp-path``."""
    mtu: int | None = None
    speed_mbps: int | None = None
    operstate: str = ""

    def __reduce__(self) -> tuple[Any, ...]:
        return NetFacts, (self.name, self.role, self.mtu, self.speed_mbps, self.operstate)


@dataclass(frozen=True, slots=True)
class HostReport:
    """What the fleet rules read about one host."""

    host: str
    source: str
    schema_version: int = 1
    environment: Mapping[str, str] = field(default_factory=dict)
    ports: tuple[PortFacts, ...] = ()
    netdevs: tuple[NetFacts, ...] = ()
    software: Mapping[str, str] = field(default_factory=dict)
    hostname: str | None = None
    """The name the host gave itself (``gethostname``), when the report came from a live host."""
    addresses: tuple[str, ...] = ()
    """What that name resolves to."""
    findings: tuple[Finding, ...] = ()
    """The host's own doctor findings."""
    clock_offset_s: float | None = None
    """Wall-clock offset to rank 0 (online runs only)."""
    warnings: tuple[str, ...] = ()
    roce_ports: tuple[PortFacts, ...] = field(init=False, default=())
    data_netdevs: tuple[NetFacts, ...] = field(init=False, default=())
    """The RoCE netdevs when the host has any, else the socket / TCP-path interface (a host without RDMA)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return HostReport, (self.host, self.source, self.schema_version, self.environment, self.ports, self.netdevs,
                            self.software, self.hostname, self.addresses, self.findings, self.clock_offset_s,
                            self.warnings)

    def __post_init__(self) -> None:
        object.__setattr__(self, "roce_ports", tuple(p for p in self.ports if p.is_roce))
        roce = tuple(n for n in self.netdevs if n.role == "roce")
        object.__setattr__(self, "data_netdevs",
                           roce or tuple(n for n in self.netdevs if n.role in ("socket", "tcp-path"))[:1])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"host": self.host, "source": self.source, "schema_version": self.schema_version,
                               "roce_ports": len(self.roce_ports),
                               "data_netdevs": [n.name for n in self.data_netdevs]}
        if self.clock_offset_s is not None:
            out["clock_offset_s"] = self.clock_offset_s
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


_TOP = ()


class _Reader:
    """Typed access to a report dict that notes, instead of raising, every value of the wrong shape.

    A value's place is ``at`` (a tuple of path parts, built once per object) plus ``key``, joined only when a warning
    is written: reading 10,000 reports must not format paths nobody reads, and each call stays two arguments."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warn(self, at: tuple[object, ...], key: str, text: str) -> None:
        self.warnings.append(f"{''.join(map(str, at))}{key}: {text}; ignored")

    def mapping(self, value: Any, at: tuple[object, ...], key: str = "") -> Mapping[str, Any]:
        if type(value) is dict or isinstance(value, Mapping):
            return value  # type: ignore[no-any-return]
        if value is not None:
            self.warn(at, key, f"expected an object, got {type(value).__name__}")
        return {}

    def items(self, value: Any, at: tuple[object, ...], key: str = "") -> list[Any]:
        if type(value) is list:
            return value
        if value is not None:
            self.warn(at, key, f"expected a list, got {type(value).__name__}")
        return []

    def int_(self, value: Any, at: tuple[object, ...], key: str = "") -> int | None:
        if type(value) is int or value is None:
            return value  # type: ignore[no-any-return]
        if value == "":
            return None
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            self.warn(at, key, f"{value!r} is not a number")
            return None
        try:
            return int(value)
        except ValueError:
            self.warn(at, key, f"{value!r} is not a number")
            return None

    def str_(self, value: Any, at: tuple[object, ...], key: str = "") -> str:
        if type(value) is str:
            return value
        if value is None:
            return ""
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        self.warn(at, key, f"{value!r} is not text")
        return ""

    def texts(self, raw: Any, key: str) -> dict[str, str]:
        """A flat object of text values (``environment``, ``software``)."""
        found = self.mapping(raw, _TOP, key)
        if all(type(v) is str for v in found.values()):
            return dict(found)
        at = (key, ".")
        return {str(k): self.str_(v, at, str(k)) for k, v in found.items()}


_SEEN: dict[tuple[Any, ...], Any] = {}
"""Port and interface records already built, by their raw items: a fleet's reports repeat the same ports, and a
frozen record can be shared. Only records read without a warning are kept (a warning must be said each time)."""
_SEEN_MAX = 8192


def _key(kind: str, raw: Any) -> tuple[Any, ...] | None:
    try:
        key = (kind, *raw.items())
        hash(key)
    except (AttributeError, TypeError):
        return None
    return key


def _remember(key: tuple[Any, ...] | None, before: int, r: _Reader, value: Any) -> Any:
    if key is not None and len(r.warnings) == before and len(_SEEN) < _SEEN_MAX:
        _SEEN[key] = value
    return value


def _port(r: _Reader, raw: Any, i: int) -> PortFacts | None:
    key = _key("port", raw)
    if key is not None and key in _SEEN:
        return _SEEN[key]  # type: ignore[no-any-return]
    before = len(r.warnings)
    return _remember(key, before, r, _read_port(r, raw, i))  # type: ignore[no-any-return]


def _read_port(r: _Reader, raw: Any, i: int) -> PortFacts | None:
    at = ("host.rdma_ports[", i, "]")
    item = r.mapping(raw, at)
    get = item.get
    name = r.str_(get("port"), at, ".port")
    if not name:
        if item:
            r.warn(at, "", "a port without a name")
        return None
    s, n = r.str_, r.int_
    return PortFacts(name=name, device=s(get("device"), at, ".device") or name.partition(":")[0],
                     state=s(get("state"), at, ".state"), link_layer=s(get("link_layer"), at, ".link_layer"),
                     netdev=s(get("netdev"), at, ".netdev") or None, rate=s(get("rate"), at, ".rate"),
                     mtu=n(get("mtu"), at, ".mtu"), speed_mbps=n(get("speed_mbps"), at, ".speed_mbps"),
                     gid_index=n(get("gid_index"), at, ".gid_index"),
                     traffic_class=n(get("traffic_class"), at, ".traffic_class"),
                     fw_ver=s(get("fw_ver"), at, ".fw_ver"), hca_type=s(get("hca_type"), at, ".hca_type"),
                     driver=s(get("driver"), at, ".driver") or None)


def _netdevs(r: _Reader, raw: Any) -> tuple[NetFacts, ...]:
    out = []
    for ifname, value in r.mapping(raw, _TOP, "data_netdevs").items():
        key = _key(f"net {ifname}", value)
        if key is not None and key in _SEEN:
            out.append(_SEEN[key])
            continue
        before = len(r.warnings)
        at = ("data_netdevs.", ifname)
        item = r.mapping(value, at)
        get = item.get
        out.append(_remember(key, before, r, NetFacts(
            str(ifname), r.str_(get("role"), at, ".role"), r.int_(get("mtu"), at, ".mtu"),
            r.int_(get("speed_mbps"), at, ".speed_mbps"), r.str_(get("operstate"), at, ".operstate"))))
    return tuple(out)


def _findings(r: _Reader, raw: Any) -> tuple[Finding, ...]:
    out = []
    for i, item in enumerate(r.items(raw, _TOP, "findings")):
        try:
            out.append(Finding.from_dict(item))
        except (KeyError, TypeError, ValueError, AttributeError):
            r.warn(("findings[", i, "]"), "", "not a finding (rule, severity, subject, message)")
    return tuple(out)


def host_facts(report: Mapping[str, Any], *, source: str, name: str | None = None) -> HostReport:
    """The facts of one ``doctor --json`` report. ``name`` (a collector's host prefix, a file name) is used when
    the report does not name its host."""
    r = _Reader()
    version = r.int_(report.get("schema_version"), _TOP, "schema_version") or 1
    host = r.mapping(report.get("host"), _TOP, "host")
    resolved = r.mapping(host.get("hostname"), _TOP, "host.hostname")
    hostname = r.str_(resolved.get("name"), _TOP, "host.hostname.name") or None
    at = ("host.hostname.addresses",)
    addresses = tuple(a for a in (r.str_(a, at) for a in r.items(resolved.get("addresses"), at)) if a)
    ports = tuple(p for i, raw in enumerate(r.items(host.get("rdma_ports"), _TOP, "host.rdma_ports"))
                  if (p := _port(r, raw, i)) is not None)
    offset = report.get("clock_offset_s")
    if version < 2:
        r.warnings.append("schema_version 1 (a doctor before the fleet fields): ports' MTU, speed, GID index, "
                          "firmware, the environment and versions are not in it; rerun `tensorfabric doctor --json`")
    return HostReport(host=hostname or name or source, source=source, schema_version=version,
                      environment=r.texts(report.get("environment"), "environment"), ports=ports,
                      netdevs=_netdevs(r, report.get("data_netdevs")),
                      software=r.texts(report.get("software"), "software"), hostname=hostname, addresses=addresses,
                      findings=_findings(r, report.get("findings")),
                      clock_offset_s=float(offset) if isinstance(offset, int | float) and not isinstance(
                          offset, bool) else None,
                      warnings=tuple(r.warnings))
