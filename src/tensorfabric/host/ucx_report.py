"""A user's UCX/NIXL log, judged: the endpoint lane lines (:mod:`tensorfabric.host.ucx_log`) and the protocol
tables ``UCX_PROTO_INFO=y`` prints (UCX >= 1.13), reduced to a transport class, its devices and a verdict.

A protocol table opens with a header row naming the worker, scope and endpoint configuration, then one row per
message-size range whose last cell is the lane (UCX 1.16, one line each; older UCX prints the same rows after a
``proto_debug.c:NNN UCX  INFO`` prefix)::

    [1704982674.01] [node-a:2320454:0]   | perftest inter-node cfg#0 | active message by ucp_am_send* from host memory |
    [1704982674.01] [node-a:2320454:0]   |            0..8184 | short                         | rc_mlx5/mlx5_0:1 |

Devices may carry a path suffix (``rc_mlx5/mlx5_0:1/path0``) or a split (``rc_mlx5/mlx5_0:1 50% on path0 and
50% on path1``); only ``transport/device`` is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensorfabric.errors import ParseError
from tensorfabric.host.nccl_log import decode_log
from tensorfabric.host.ucx_log import UcxLanes, UcxTransport, classify, parse_ucx_log

__all__ = ["CAPTURE_HINT", "UcxLogReport", "parse_ucx_report"]

CAPTURE_HINT = "UCX_LOG_LEVEL=info UCX_PROTO_INFO=y"
_MAX_LINE = 4096
_LEVELS = ("INFO", "WARN", "ERROR", "DIAG", "DEBUG", "TRACE", "PRINT", "FATAL")
_SCOPES = ("intra-node", "inter-node", "self")
# The operation a protocol table describes -> the lane kind the endpoint lines use for it.
_OPERATIONS = (("remote memory write", "rma"), ("remote memory read", "rma"), ("atomic", "amo"),
               ("tagged message", "tag"), ("active message", "am"), ("stream", "am"))


@dataclass(frozen=True, slots=True)
class UcxLogReport:
    source: str
    transport: UcxTransport
    """The data path over the endpoints to other processes (``self`` endpoints ignored)."""
    endpoints: tuple[UcxLanes, ...]
    """Lane lines and protocol-table headers, in log order."""
    version: str | None

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple(sorted({e.scope for e in self.endpoints}))

    @property
    def devices(self) -> tuple[str, ...]:
        """The devices of the data lanes (``mlx5_0:1``, ``eth0``; shared memory is ``memory``), in order."""
        out: list[str] = []
        for lane in self.transport.lanes:
            device = lane.partition("/")[2]
            if device and device not in out:
                out.append(device)
        return tuple(out)

    @property
    def transports(self) -> tuple[str, ...]:
        out: list[str] = []
        for lane in self.transport.lanes:
            if (name := lane.partition("/")[0]) not in out:
                out.append(name)
        return tuple(out)

    @property
    def verdict(self) -> str:
        """``rdma``/``tcp``/``shm`` (the class), ``self-only``, ``no-lanes`` or ``unknown``."""
        if not self.endpoints:
            return "no-lanes"
        if self.transport.kind == "unknown" and all(e.scope == "self" for e in self.endpoints):
            return "self-only"
        return self.transport.kind

    @property
    def inter_node(self) -> bool:
        return "inter-node" in self.scopes

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "class": self.transport.kind, "verdict": self.verdict,
                "lanes": list(self.transport.lanes), "devices": list(self.devices),
                "transports": list(self.transports), "scopes": list(self.scopes), "endpoints": len(self.endpoints),
                "version": self.version}


def _is_ucx_line(line: str) -> bool:
    at = line.find(" UCX ")
    words = line[at + 5:at + 16].split() if at >= 0 else []
    return bool(words) and words[0] in _LEVELS


def _cells(line: str) -> list[str] | None:
    """The cells of a table row (``| a | b |`` after the log prefix), or None for any other line."""
    start = line.find("| ")
    end = line.rfind("|")
    if start < 0 or end <= start:
        return None
    return [cell.strip() for cell in line[start + 1:end].split("|")]


def _operation(description: str) -> str:
    for words, kind in _OPERATIONS:
        if description.startswith(words):
            return kind
    return "other"


def _lane(cell: str) -> str | None:
    """``rc_mlx5/mlx5_0:1`` from ``rc_mlx5/mlx5_0:1/path0`` or ``rc_mlx5/mlx5_0:1 50% on path0 ...``."""
    word = cell.split(" ", 1)[0]
    name, sep, rest = word.partition("/")
    if not sep or not rest or not name.replace("_", "").isalnum():
        return None
    return f"{name}/{rest.split('/', 1)[0]}"


def _proto_tables(lines: list[str]) -> list[UcxLanes]:
    out: list[UcxLanes] = []
    header: tuple[int, str, str, str] | None = None
    tls: dict[str, None] = {}  # ordered set: a hostile log with many distinct lanes stays linear

    def close() -> None:
        if header is not None and tls:
            number, worker, scope, kind = header
            out.append(UcxLanes(worker, scope, ((kind, tuple(tls)),), lines[number - 1][:_MAX_LINE].strip()))

    for number, raw in enumerate(lines, 1):
        cells = _cells(raw[:_MAX_LINE])
        if cells is None:
            continue
        words = cells[0].split()
        if len(cells) == 2 and len(words) >= 3 and words[-2] in _SCOPES and words[-1].startswith("cfg#"):
            close()
            header, tls = (number, " ".join(words[:-2]), words[-2], _operation(cells[1])), {}
        elif len(cells) == 3 and header is not None and (lane := _lane(cells[2])) is not None:
            tls[lane] = None
    close()
    return out


def parse_ucx_report(data: str | bytes, *, source: str = "<log>") -> UcxLogReport:
    """Classify a UCX log. ParseError for binary input, a broken lane line, or a text with no UCX line at all."""
    text = decode_log(data, source, "a UCX log")
    lines = text.splitlines()
    version = None
    seen = False
    for line in lines:
        head = line[:_MAX_LINE]
        if not _is_ucx_line(head):
            continue
        seen = True
        if version is None and (at := head.find(" INFO  Version ")) >= 0:
            version = head[at + 15:].split(" ", 1)[0] or None
    lane_lines = parse_ucx_log(text, source=source)
    tables = _proto_tables(lines)
    if not seen and not tables:
        raise ParseError(f"no UCX lines found; run the job with {CAPTURE_HINT}", source=source)
    endpoints = tuple(lane_lines) + tuple(tables)
    return UcxLogReport(source, classify(endpoints), endpoints, version)
