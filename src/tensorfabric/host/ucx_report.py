"""A user's UCX/NIXL log, judged: the endpoint lane lines and ``UCX_PROTO_INFO=y`` tables
(:mod:`tensorfabric.host.ucx_log`) read through the intake, a verdict per scope (inter-node, intra-node, self) with
the transport of every lane, and the errors that explain a log where no endpoint ever came up.

The scopes are kept apart because they answer different questions: a NIXL agent talks to a decode worker on the
same host over shared memory or cuda_ipc and to one on another host over rc_mlx5, and only the second says anything
about the network. The top-level class and verdict (what callers and the doctor's rules use) come from the
inter-node scope when the log has one, else from the endpoints to other processes on the host.

A log whose backend never came up (``ibv_query_gid ... Invalid argument`` in a pod, ``no usable
transports/devices``, ``NIXL_ERR_BACKEND``) is read too: its verdict is ``no-data-path`` and :attr:`problems` say why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensorfabric.host.ucx_log import (
    MAX_LINE,
    SCOPES,
    LaneLine,
    ProtoTables,
    UcxLanes,
    UcxTransport,
    classify,
    classify_tls,
    parse_lane_line,
    split_prefix,
    tl_class,
)
from tensorfabric.intake import Line, ReadReport, Tally, normalise

__all__ = ["CAPTURE_HINT", "ScopeVerdict", "UcxLogReport", "UcxProblem", "parse_ucx_report"]

CAPTURE_HINT = "UCX_LOG_LEVEL=info UCX_PROTO_INFO=y"
_EXPECTED = (f"the log of a run with {CAPTURE_HINT}: 'UCX  INFO' lines, endpoint lane lines such as "
             "'<worker> inter-node cfg#1 rma(rc_mlx5/mlx5_0:1) ...' or 'ep_cfg[1]: tag(...)', UCX_PROTO_INFO=y "
             "protocol tables, or UCX WARN/ERROR lines")
_ERROR_LEVELS = ("ERROR", "FATAL")


@dataclass(frozen=True, slots=True)
class ScopeVerdict:
    """The endpoints of one scope, merged: the class of their data path and every lane's transport."""

    scope: str
    transport: UcxTransport
    lanes: tuple[tuple[str, tuple[str, ...]], ...]
    """``(lane kind, ("tl/device", ...))`` merged over the scope's endpoints, in order of first appearance."""
    endpoints: int
    inferred: bool
    """The scope was inferred from the transports (UCX <= 1.13 prints none)."""

    @property
    def kind(self) -> str:
        return self.transport.kind

    def transports(self) -> dict[str, str]:
        """Every lane's ``tl/device`` -> its class (``rc_mlx5/mlx5_0:1`` -> ``rdma``, ``sysv/memory`` -> ``shm``)."""
        return {tl: tl_class(tl.partition("/")[0]) for _, tls in self.lanes for tl in tls}

    def summary(self) -> str:
        shown = ", ".join(self.transport.lanes) or "no data lane"
        return f"{self.scope}{' (inferred)' if self.inferred else ''} {self.kind} ({shown})"

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.kind, "data_lanes": list(self.transport.lanes),
                "lanes": {kind: list(tls) for kind, tls in self.lanes}, "transports": self.transports(),
                "endpoints": self.endpoints, "scope_inferred": self.inferred}


@dataclass(frozen=True, slots=True)
class UcxProblem:
    """A UCX WARN/ERROR line (or NIXL's backend error) and what it means."""

    line: int
    level: str
    """``ERROR``, ``FATAL`` or ``WARN``."""
    kind: str
    """A known signature (``gid-query-failed``, ``no-usable-transports``, ...), else ``error`` or ``warning``."""
    message: str

    @property
    def cause(self) -> str:
        known = _SIGNATURES.get(self.kind)
        return known[1] if known else f"UCX logged: {self.message}"

    @property
    def fix(self) -> str:
        known = _SIGNATURES.get(self.kind)
        return known[2] if known else "read the quoted line; rerun with UCX_LOG_LEVEL=debug to see the failing step"

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "level": self.level, "kind": self.kind, "message": self.message}


# kind -> (needle sets: any set whose words all appear, cause, fix). Order matters: the first match names the line.
_SIGNATURES: dict[str, tuple[tuple[tuple[str, ...], ...], str, str]] = {
    "gid-query-failed": (
        (("ibv_query_gid", "fail"),),
        "UCX could not read a GID of the RDMA port (in a pod or on an SR-IOV function this is a GID index that is "
        "empty or not visible in this network namespace)",
        "inside the pod run show_gids (or read /sys/class/infiniband/<dev>/ports/1/gids/<n> and gid_attrs/types/<n>) "
        "and set UCX_IB_GID_INDEX to the RoCE v2 index of the pod's IPv4, or unset it; an empty table means the "
        "RoCE netdev is not in the pod's namespace"),
    "no-usable-transports": (
        (("no usable transports",),),
        "UCX found none of the transports/devices it was asked for, so the backend never came up",
        "compare UCX_TLS/UCX_NET_DEVICES with `ucx_info -d` run in the same container; rc/ud/dc need "
        "/dev/infiniband mounted, and a nixl wheel uses its bundled libucp"),
    "device-unavailable": (
        (("network device", "not available"),),
        "a device named in UCX_NET_DEVICES is not available to UCX here",
        "name a device `ucx_info -d` lists in this container (mlx5_N:1 for RDMA) or mount /dev/infiniband"),
    "transports-unavailable": (
        (("transport", "not available"),),
        "transports named in UCX_TLS are not available to UCX here",
        "check `ucx_info -d` in the same container: the transport's module and device must be present"),
    "address-handle-failed": (
        (("ibv_create_ah",),),
        "UCX could not build an address handle to the peer's GID (GID index, RoCE version or route)",
        "compare both hosts' GID tables (show_gids): the same RoCE version, an IPv4-mapped RoCE v2 GID on the "
        "interface that routes to the peer; set UCX_IB_GID_INDEX on both"),
    "iface-open-failed": (
        (("uct_iface_open",), ("failed to create",), ("ibv_create_qp",), ("create_cq",), ("ibv_modify_qp",)),
        "UCX could not open a transport on the device (queue pair or completion queue creation failed)",
        "check the device with ibv_devinfo, the locked-memory limit (ulimit -l unlimited, also in the container) "
        "and that the RDMA provider matches the driver"),
    "version-mismatch": (
        (("version is incompatible",),),
        "two UCX versions are mixed in one process",
        "use one UCX: the nixl wheel bundles its own (nixl.libs); drop LD_LIBRARY_PATH entries that point at "
        "another libucp, or build NIXL against the system UCX"),
    "endpoint-failed": (
        (("ucp_ep_create",), ("unreachable",), ("connect", "failed")),
        "UCX could not create or connect the endpoint to the peer",
        "check that the peer's address is reachable: UCX_NET_DEVICES, the TCP wireup port through firewalls, "
        "and for RoCE the GID and route"),
    "nixl-backend-error": (
        (("NIXL_ERR_BACKEND",), ("unsupported backend",)),
        "NIXL could not create its UCX backend",
        "read the UCX lines before it (rerun with UCX_LOG_LEVEL=info); `ucx_info -d` in the same container"),
}


def _signature(message: str) -> str | None:
    for kind, (needles, _, _) in _SIGNATURES.items():
        if any(all(word in message for word in words) for words in needles):
            return kind
    return None


@dataclass(frozen=True, slots=True)
class UcxLogReport:
    source: str
    transport: UcxTransport
    """The data path of the inter-node scope when the log has one, else of the endpoints to other local processes."""
    endpoints: tuple[UcxLanes, ...]
    """Lane lines and protocol tables, in log order."""
    version: str | None
    by_scope: tuple[ScopeVerdict, ...]
    """One verdict per scope present, in the order inter-node, intra-node, self."""
    problems: tuple[UcxProblem, ...]
    environment: tuple[tuple[str, str], ...]
    """``UCX_*`` variables the log printed (``UCX_* env variables: ...``)."""
    hosts: tuple[str, ...]
    """Hosts of the ``[host:pid:thread]`` prefixes, in order of appearance."""
    read: ReadReport

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(sorted(s.scope for s in self.by_scope))

    def scope(self, name: str) -> ScopeVerdict | None:
        return next((s for s in self.by_scope if s.scope == name), None)

    @property
    def devices(self) -> tuple[str, ...]:
        """The devices of the data lanes (``mlx5_0:1``, ``eth0``; shared memory is ``memory``), in order."""
        out: dict[str, None] = {}
        for lane in self.transport.lanes:
            if device := lane.partition("/")[2]:
                out[device] = None
        return tuple(out)

    @property
    def transports(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(lane.partition("/")[0] for lane in self.transport.lanes))

    @property
    def errors(self) -> tuple[UcxProblem, ...]:
        return tuple(p for p in self.problems if p.level in _ERROR_LEVELS)

    @property
    def verdict(self) -> str:
        """The class (``rdma``/``gpu-ipc``/``tcp``/``shm``/``unknown``), ``self-only``, ``no-data-path`` (no endpoint
        and errors that say why) or ``no-lanes``."""
        if not self.endpoints:
            return "no-data-path" if self.errors else "no-lanes"
        if self.transport.kind == "unknown" and all(e.scope == "self" for e in self.endpoints):
            return "self-only"
        return self.transport.kind

    @property
    def inter_node(self) -> bool:
        return "inter-node" in self.scopes

    def summary(self) -> str:
        """``inter-node rdma (rc_mlx5/mlx5_4:1); intra-node shm (sysv/memory, posix/memory); self loopback (...)``."""
        return "; ".join(s.summary() for s in self.by_scope) or self.verdict

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "class": self.transport.kind, "verdict": self.verdict,
                "lanes": list(self.transport.lanes), "devices": list(self.devices),
                "transports": list(self.transports), "scopes": list(self.scopes),
                "by_scope": {s.scope: s.to_dict() for s in self.by_scope}, "endpoints": len(self.endpoints),
                "version": self.version, "problems": [p.to_dict() for p in self.problems],
                "environment": dict(self.environment), "hosts": list(self.hosts), "read": self.read.to_dict()}


def _by_scope(endpoints: tuple[UcxLanes, ...]) -> tuple[ScopeVerdict, ...]:
    out = []
    for scope in SCOPES:
        members = [e for e in endpoints if e.scope == scope]
        if not members:
            continue
        lanes: dict[str, dict[str, None]] = {}
        data: dict[str, None] = {}
        for entry in members:
            for kind, tls in entry.lanes:
                lanes.setdefault(kind, {}).update(dict.fromkeys(tls))
            data.update(dict.fromkeys(entry.data_lanes()))
        merged = tuple((kind, tuple(tls)) for kind, tls in lanes.items())
        kind = classify_tls(data)
        if scope == "self" and any(tl.startswith("self/") for tl in data):
            kind = "loopback"  # an endpoint to its own worker: the other lanes are for memory types self cannot copy
        out.append(ScopeVerdict(scope, UcxTransport(kind, tuple(data)), merged, len(members),
                                any(e.scope_inferred for e in members)))
    return tuple(out)


def _whole(text: str) -> bool:
    """False only for a broken lane line (a hard wrap cuts one): the intake then tries it joined with the next."""
    if "cfg" not in text:
        return True
    parsed = parse_lane_line(text)
    return parsed is None or parsed.problem is None


class _Reader:
    """One pass over the content lines; every rule either uses a line, lists it as not understood, or passes."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.tables = ProtoTables()
        self.lanes: list[UcxLanes] = []
        self.problems: list[UcxProblem] = []
        self.environment: dict[str, str] = {}
        self.hosts: dict[str, None] = {}

    def read(self, line: Line) -> None:
        parsed = parse_lane_line(line.text) if "cfg" in line.text else None
        process, level, message = split_prefix(line.text[:MAX_LINE])
        if process:
            self.hosts[process.partition(":")[0]] = None
        if parsed is not None:
            self._lane(line, parsed, process)
            return
        shape = self.tables.feed(line.number, process, message, line.origin)
        if shape in ("header", "row"):
            self.tally.use(line)
        if shape is not None:
            return
        if level == "INFO":
            self._info(line, message)
        elif level in ("WARN", *_ERROR_LEVELS):
            kind = _signature(message) or ("warning" if level == "WARN" else "error")
            self.problems.append(UcxProblem(line.number, level, kind, message[:300]))
            self.tally.use(line)
        elif not level and _signature(line.text) == "nixl-backend-error":
            self.problems.append(UcxProblem(line.number, "ERROR", "nixl-backend-error", line.text.strip()[:300]))
            self.tally.use(line)

    def _lane(self, line: Line, parsed: LaneLine, process: str) -> None:
        if parsed.problem is not None:
            self.tally.warn(line, parsed.problem)
        if not parsed.lanes:
            self.tally.not_understood(line)
            return
        host = process.partition(":")[0] or line.origin
        self.lanes.append(UcxLanes(parsed.worker, parsed.scope, parsed.lanes, line.text.strip()[:300],
                                   parsed.scope_inferred, line.number, host))
        self.tally.use(line)

    def _info(self, line: Line, message: str) -> None:
        words = message.split()
        if message.startswith("Version ") and len(words) > 1:
            self.tally.version = self.tally.version or words[1]
        elif message.startswith("UCP version is ") and len(words) > 3 and words[3][:1].isdigit():
            self.tally.version = self.tally.version or words[3]
        elif message.startswith("UCX_* env variable"):
            for word in message.partition(":")[2].split():
                name, sep, value = word.partition("=")
                if sep and name.startswith("UCX_"):
                    self.environment[name] = value
        else:
            self.tally.not_understood(line)
            return
        self.tally.use(line)


def parse_ucx_report(data: str | bytes, *, source: str = "<log>") -> UcxLogReport:
    """Read a UCX/NIXL log as pasted. ParseError only for binary or empty input or a text with no UCX line at all;
    a malformed lane line is a warning in ``read``, other lines are skipped or listed as not understood."""
    text = normalise(data, source=source, what="a UCX log").rejoined(_whole)
    tally = Tally(text, "UCX log")
    reader = _Reader(tally)
    for line in text.content():
        reader.read(line)
    tally.require(_EXPECTED)
    endpoints = tuple(sorted([*reader.lanes, *reader.tables.close()], key=lambda e: e.number))
    by_scope = _by_scope(endpoints)
    inter = next((s for s in by_scope if s.scope == "inter-node"), None)
    transport = inter.transport if inter is not None else classify(endpoints)
    return UcxLogReport(source, transport, endpoints, tally.version, by_scope, tuple(reader.problems),
                        tuple(reader.environment.items()), tuple(reader.hosts), tally.report())
