"""What UCX itself says it chose: the endpoint lane lines of ``UCX_LOG_LEVEL=info`` and the protocol tables of
``UCX_PROTO_INFO=y``, classified as rdma, tcp, gpu-ipc, shm or loopback.

UCX prints one line per endpoint configuration when an endpoint is created. Since UCX 1.14 (one line each)::

    [1796115719.43] [vm:8043 :0]  ucp_worker.c:1997 UCX  INFO    r1 intra-node cfg#1 rma(sysv/memory
    posix/memory)  amo(sysv/memory posix/memory)  am(sysv/memory cma/memory)

(wrapped here): the worker's name (the NIXL agent's, ``ucp_context_N`` or a hex address), the scope UCX derived
from the peers' host ids (``self``, ``intra-node``, ``inter-node``), ``cfg#N`` and ``lane(transport/device ...)``
groups. UCX 1.14 development builds printed no space after the id (``cfg#1tag(...)``, fixed by openucx/ucx#8699);
UCX up to 1.13 printed neither worker nor scope (``ep_cfg[2]: tag(self/memory0 rc_mlx5/mlx5_0:1);``, groups ended
by ``;``), so the scope of those lines is inferred from their transports (:func:`infer_scope`) and marked so.

A protocol table opens with a header row naming the worker, scope and configuration (``| mpi ep_cfg[3] | ...`` on
UCX 1.12, ``| nixl-agent-0 inter-node cfg#1 | remote memory write by ucp_put* ... |`` since), then one row per
message-size range whose last cell is the lane: ``rc_mlx5/mlx5_0:1``, ``rc_mlx5/mlx5_0:1/path0``,
``rc_mlx5/mlx5_0:1 50% on path0 and 50% on path1`` or a split over rails, ``50% on rc_mlx5/mlx5_0:1 and 50% on
rc_mlx5/mlx5_2:1``. Rows may follow a ``proto_debug.c:406 UCX INFO`` prefix (UCX 1.12-1.13), only the
``[time] [host:pid:thread]`` prefix, or nothing (``ucx_info -e``).

The data path is the ``rma`` lanes (one-sided writes), else ``rma_am`` (RMA emulated over active messages), ``am``
or ``tag`` (MPI-style workers); its class is the best transport on it (:data:`CLASS_ORDER`).

Used by the NIXL engine (:mod:`tensorfabric.transfer.engines.nixl_engine`) to prove its transport at ``init``,
through :func:`parse_ucx_log` (strict: a broken lane line is a ParseError), and by
:mod:`tensorfabric.host.ucx_report`, which reads a user's paste through the intake and turns the same problem into a
warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tensorfabric.errors import ParseError

__all__ = ["CLASS_ORDER", "GPU_IPC_TLS", "LEVELS", "MAX_LINE", "RDMA_TLS", "SCOPES", "SHM_TLS", "LaneLine",
           "ProtoTables", "UcxLanes", "UcxTransport", "classify", "classify_tls", "infer_scope", "parse_lane_line",
           "parse_ucx_log", "split_prefix", "tl_class"]

RDMA_TLS = frozenset({"rc_verbs", "rc_mlx5", "dc_mlx5", "ud_verbs", "ud_mlx5", "gga_mlx5", "srd"})
SHM_TLS = frozenset({"sysv", "posix", "cma", "xpmem", "knem", "self"})
GPU_IPC_TLS = frozenset({"cuda_ipc", "rocm_ipc", "ze_ipc"})
"""GPU peer copies (NVLink/xGMI/PCIe P2P) between processes on one host, or across an NVLink fabric (MNNVL)."""
CLASS_ORDER = ("rdma", "gpu-ipc", "tcp", "shm", "loopback")
"""Best first: the class of a set of lanes is the first of these any lane has (``unknown`` when none)."""
SCOPES = ("inter-node", "intra-node", "self")
LEVELS = ("INFO", "WARN", "ERROR", "DIAG", "DEBUG", "TRACE", "PRINT", "FATAL", "DATA", "FUNC", "POLL", "REQ")
MAX_LINE = 16384
"""Lane lines are a few hundred characters (eight rails of ``rc_mlx5/mlx5_ibN:1`` stay under 1 K); longer ones are
read up to here, so a hostile log stays linear and small."""


def tl_class(transport: str) -> str:
    """``rc_mlx5`` -> ``rdma``, ``tcp`` -> ``tcp``, ``cuda_ipc`` -> ``gpu-ipc``, ``sysv`` -> ``shm``, ``self`` ->
    ``loopback``; staging copies (``cuda_copy``, ``gdr_copy``) and unknown names -> ``other``."""
    if transport in RDMA_TLS:
        return "rdma"
    if transport == "tcp":
        return "tcp"
    if transport in GPU_IPC_TLS:
        return "gpu-ipc"
    if transport == "self":
        return "loopback"
    return "shm" if transport in SHM_TLS else "other"


def classify_tls(lanes: Iterable[str]) -> str:
    """The class of ``transport/device`` lanes: the best any of them has, or ``unknown``."""
    found = {tl_class(lane.partition("/")[0]) for lane in lanes}
    return next((kind for kind in CLASS_ORDER if kind in found), "unknown")


def infer_scope(lanes: Iterable[str]) -> str:
    """The scope of an endpoint printed without one (UCX <= 1.13): ``self`` when it has the loopback transport or
    only staging copies (a memory-type endpoint), ``intra-node`` when it has shared memory or GPU IPC (UCX offers
    those only to peers on the same host), else ``inter-node``."""
    classes = {tl_class(lane.partition("/")[0]) for lane in lanes}
    if "loopback" in classes or not classes - {"other"}:
        return "self"
    return "intra-node" if classes & {"shm", "gpu-ipc"} else "inter-node"


@dataclass(frozen=True)
class UcxLanes:
    """One endpoint configuration: a lane line, or a protocol table reduced to its lanes."""

    worker: str
    scope: str
    """``intra-node``, ``inter-node`` or ``self``: UCX's own word, or :func:`infer_scope`'s when ``scope_inferred``."""
    lanes: tuple[tuple[str, tuple[str, ...]], ...]
    """``(lane kind, ("tl/device", ...))`` in the order printed, e.g. ``("rma", ("sysv/memory",))``."""
    line: str
    scope_inferred: bool = False
    number: int = 0
    """Line number in the text read (0 when not known)."""
    host: str = ""
    """The host of the ``[host:pid:thread]`` prefix ("" when the line had none)."""

    def data_lanes(self) -> tuple[str, ...]:
        # An MPI-style worker (tag matching only) prints just tag(...); its data rides those lanes.
        for kind in ("rma", "rma_am", "am", "tag"):
            for name, tls in self.lanes:
                if name == kind:
                    return tls
        return ()

    def all_lanes(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for _, tls in self.lanes:
            seen.update(dict.fromkeys(tls))
        return tuple(seen)


@dataclass(frozen=True)
class UcxTransport:
    """The classified data path of one or more endpoints."""

    kind: str
    """``rdma``, ``gpu-ipc``, ``tcp``, ``shm``, ``loopback`` or ``unknown``."""
    lanes: tuple[str, ...]
    """``tl/device`` entries of the data lanes, deduplicated, in order."""

    @property
    def rdma(self) -> bool:
        return self.kind == "rdma"

    def label(self) -> str:
        """``nixl/shm(sysv/memory,posix/memory)``, ``nixl/tcp(tcp/lo)``, ``nixl/rdma(rc_mlx5/mlx5_0:1)``."""
        return f"nixl/{self.kind}({','.join(self.lanes)})" if self.lanes else f"nixl/{self.kind}"


def classify(lines: Iterable[UcxLanes]) -> UcxTransport:
    """The data path over the endpoints to other processes (``self`` endpoints are loopback and ignored)."""
    tls: dict[str, None] = {}  # ordered set: many distinct lanes stay linear
    for entry in lines:
        if entry.scope == "self":
            continue
        tls.update(dict.fromkeys(entry.data_lanes()))
    return UcxTransport(classify_tls(tls), tuple(tls))


def split_prefix(text: str) -> tuple[str, str, str]:
    """``(process, level, message)`` of a UCX log line: the ``[time] [host:pid:thread]`` and ``file.c:NNN UCX LEVEL``
    prefixes taken off where present (either may be missing: timestamps stripped by the intake, a grep'd message);
    ``process`` is ``host:pid`` ("" without the prefix)."""
    rest = text.lstrip()
    process = ""
    for _ in range(2):  # the epoch stamp (when the intake left it), then host:pid:thread
        if not rest.startswith("["):
            break
        close = rest.find("]", 1, 300)
        if close < 0:
            break
        inner = rest[1:close]
        if ":" in inner:
            process = ":".join(part.strip() for part in inner.split(":")[:2])
        elif not inner.strip().replace(".", "", 1).isdigit():
            break
        rest = rest[close + 1:].lstrip()
    marker = rest.find(" UCX ", 0, 120)
    if marker < 0 and rest.startswith("UCX "):
        marker = -1
    elif marker < 0:
        return process, "", rest
    words = rest[marker + 5:marker + 20].split(None, 1)
    if not words or words[0] not in LEVELS:
        return process, "", rest
    level = words[0]
    body = rest[marker + 5:]
    return process, level, body[body.find(level) + len(level):].strip()


@dataclass(frozen=True, slots=True)
class LaneLine:
    """A lane line as read, before it becomes :class:`UcxLanes`; ``problem`` says what was malformed."""

    worker: str
    scope: str
    scope_inferred: bool
    lanes: tuple[tuple[str, tuple[str, ...]], ...]
    problem: str | None


def _anchor(text: str) -> tuple[str, str, int] | None:
    """``(worker, scope, end of the configuration id)``; scope "" for the old ``ep_cfg[N]`` form."""
    at = text.find("cfg#")
    if at > 0 and text[at - 1] == " ":
        words = text[:at].split()
        if words and words[-1] in SCOPES:
            end = at + 4
            while end < len(text) and text[end].isdigit():
                end += 1
            worker = words[-2] if len(words) >= 2 and words[-2] not in LEVELS else ""
            return worker, words[-1], end
    at = text.find("ep_cfg[")
    if at >= 0:
        close = text.find("]", at + 7, at + 20)
        if close > 0 and text[at + 7:close].isdigit():
            words = text[:at].split()
            worker = words[-1] if words and words[-1] not in LEVELS and "." not in words[-1] else ""
            return worker, "", close + 1
    return None


_GROUP = re.compile(r"[ \t;:]*(\w+)\(([^()]*)\)", re.ASCII)
"""One ``lane(tl/dev ...)`` group: separator, name and contents are disjoint character classes, so a match is
linear in its span and a failed one gives up within the group."""
_SEPARATORS = re.compile(r"[ \t;:]*")


def _groups(rest: str) -> tuple[list[tuple[str, tuple[str, ...]]], str | None]:
    """``lane(tl/dev ...)`` groups separated by spaces or ``;``; what stops the scan short is the problem."""
    out: list[tuple[str, tuple[str, ...]]] = []
    pos = 0
    while (match := _GROUP.match(rest, pos)) is not None:
        entries = tuple(match[2].split())
        # one slash exactly: a wrapped line glued without its space ("sysv/memoryposix/memory") must not parse
        bad = next((e for e in entries if e.count("/") != 1 or e[0] == "/" or e[-1] == "/"), None)
        if bad is not None:
            return out, f"lane entry {bad[:40]!r} in {match[1]}(...) is not transport/device"
        out.append((match[1], entries))
        pos = match.end()
    separators = _SEPARATORS.match(rest, pos)
    start = separators.end() if separators is not None else pos
    if start == len(rest):
        return out, None
    head = rest[start:start + 60]
    opened = rest.find("(", start)
    closed = rest.find(")", opened + 1) if opened >= 0 else -1
    if opened < 0 or not rest[start:opened].replace("_", "").isalnum():
        return out, f"{head[:40]!r} is not lane(transport/device ...)"
    if closed < 0:
        return out, f"lane group {head[:40]!r} has no closing ')'"
    return out, f"lane group {rest[start:closed + 1][:60]!r} is not lane(transport/device ...)"


def parse_lane_line(text: str) -> LaneLine | None:
    """The lane line in ``text`` (with or without any prefix), or None when it holds none.

    A line is a lane line when a configuration id (``<scope> cfg#N`` or ``ep_cfg[N]``) is followed by a
    ``name(`` group; a protocol table header (``| w inter-node cfg#1 | ...``) and prose naming ``ep_cfg[2]`` are not.
    """
    text = text[:MAX_LINE]
    anchor = _anchor(text)
    if anchor is None:
        return None
    worker, scope, end = anchor
    rest = text[end:]
    head = rest.lstrip(" :\t")
    j = 0
    while j < len(head) and (head[j].isalnum() or head[j] == "_"):
        j += 1
    if j == 0 or j >= len(head) or head[j] != "(":
        return None
    groups, problem = _groups(rest)
    if problem is not None and len(text) == MAX_LINE:
        problem = None  # the cut ended inside a group: what was read stands
    lanes = tuple(groups)
    inferred = not scope
    if inferred:
        scope = infer_scope(tl for _, tls in lanes for tl in tls)
    return LaneLine(worker, scope, inferred, lanes, problem)


def parse_ucx_log(text: str, worker: str | None = None, *, source: str = "ucx log") -> list[UcxLanes]:
    """Every endpoint line (for ``worker`` only when given); other log lines are skipped; a broken lane line is a
    ParseError naming it (this is the engine's own capture, so a broken line means a format change to look at)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        parsed = parse_lane_line(line)
        if parsed is None:
            continue
        if parsed.problem is not None:
            raise ParseError(f"UCX {parsed.problem}", source=source, line=number, excerpt=line[:MAX_LINE])
        if not parsed.lanes or (worker is not None and parsed.worker != worker):
            continue
        host = split_prefix(line[:MAX_LINE])[0].partition(":")[0]
        out.append(UcxLanes(parsed.worker, parsed.scope, parsed.lanes, line[:MAX_LINE].strip(), parsed.scope_inferred,
                            number, host))
    return out


# The operation a protocol table describes -> the lane kind the endpoint lines use for it.
_OPERATIONS = (("remote memory write", "rma"), ("remote memory read", "rma"), ("atomic", "amo"),
               ("tagged message", "tag"), ("active message", "am"), ("stream", "am"))


def _operation(description: str) -> str:
    for words, kind in _OPERATIONS:
        if description.startswith(words):
            return kind
    return "other"


def _table_lanes(cell: str) -> list[str]:
    """``tl/device`` of every rail a lane cell names: ``rc_mlx5/mlx5_0:1/path0``, ``rc_mlx5/mlx5_0:1 50% on path0
    and 50% on path1``, ``50% on rc_mlx5/mlx5_0:1 and 50% on rc_mlx5/mlx5_2:1``."""
    out = []
    for word in cell.split():
        name, sep, rest = word.partition("/")
        device = rest.split("/", 1)[0]
        if sep and device and name.replace("_", "").isalnum():
            out.append(f"{name}/{device}")
    return out


def _cells(message: str) -> list[str] | None:
    """The cells of a table row (the message after the UCX prefix), or None for any other line. The leading ``|``
    may be gone: a collector's ``<time> | `` separator can take it with it."""
    body = message.strip()
    if len(body) < 3 or not body.endswith("|"):
        return None
    body = body[1:-1] if body.startswith("|") else body[:-1]
    return [cell.strip() for cell in body.split("|")]


class ProtoTables:
    """Reads protocol tables row by row, one open table per ``host:pid`` (interleaved processes stay apart)."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[int, str, str, bool, str, dict[str, None], str]] = {}
        self.tables: list[UcxLanes] = []

    def feed(self, number: int, process: str, message: str, origin: str = "") -> str | None:
        """``header``, ``row``, ``border`` or None (not a table line) for line ``number``, given what
        :func:`split_prefix` made of it; ``origin`` is the host a collector prefix named, used when the line has no
        UCX prefix of its own."""
        key = process or origin
        host = process.partition(":")[0] or origin
        if message.startswith("+-") and message.rstrip().endswith("+") and set(message.strip()) <= {"+", "-"}:
            return "border"
        cells = _cells(message)
        if cells is None or len(cells) < 2:
            return None
        anchor = _anchor(cells[0] + " ")
        if anchor is not None and len(cells) == 2:
            worker, scope, end = anchor
            if cells[0][end:].strip():
                return None
            self._close(key)
            self._open[key] = (number, worker, scope, not scope, _operation(cells[1]), {}, host)
            return "header"
        current = self._open.get(key)
        if current is None or len(cells) < 3:
            return None
        lanes = _table_lanes(cells[-1])
        if not lanes:
            return None
        current[5].update(dict.fromkeys(lanes))
        return "row"

    def _close(self, key: str) -> None:
        entry = self._open.pop(key, None)
        if entry is None:
            return
        number, worker, scope, inferred, kind, tls, host = entry
        if not tls:
            return
        if inferred:
            scope = infer_scope(tls)
        self.tables.append(UcxLanes(worker, scope, ((kind, tuple(tls)),), f"protocol table at line {number}",
                                    inferred, number, host))

    def close(self) -> list[UcxLanes]:
        for key in list(self._open):
            self._close(key)
        return sorted(self.tables, key=lambda t: t.number)
