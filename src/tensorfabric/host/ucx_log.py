"""What UCX itself says it chose: the lane lines of ``UCX_LOG_LEVEL=info``, classified as shm, tcp or rdma.

UCX prints one line per endpoint configuration when an endpoint is created, e.g. (UCX 1.23, two local ranks,
``ucx_error_handling_mode=none``)::

    [1796115719.43] [vm:8043 :0]  ucp_worker.c:1997 UCX  INFO    r1 intra-node cfg#1 rma(sysv/memory
    posix/memory)  amo(sysv/memory posix/memory)  am(sysv/memory cma/memory)

(one line, wrapped here)
and over TCP ``rma_am(tcp/lo) amo_am(tcp/lo) am(tcp/lo cma/memory) ka(tcp/lo)``, on a RoCE host
``rma(rc_mlx5/mlx5_ib2:1) ... am(rc_mlx5/mlx5_ib2:1)``. The word after ``INFO`` is the worker's name (the NIXL
agent's), then the scope (``self`` for loopback to itself, ignored), ``cfg#N`` and ``lane(transport/device ...)``
groups. The data path is the ``rma`` lanes (one-sided writes), or ``rma_am`` when UCX emulates RMA with active
messages; the class is the best transport on it: any verbs transport is ``rdma``, else ``tcp``, else ``shm``.

Used by the NIXL engine (:mod:`tensorfabric.transfer.nixl_engine`) to prove its transport at ``init``; it lives in
``host`` beside ``nccl_log`` so the doctor can classify a user's UCX/NIXL log without importing transfer.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tensorfabric.errors import ParseError

__all__ = ["RDMA_TLS", "SHM_TLS", "UcxLanes", "UcxTransport", "classify", "parse_ucx_log"]

RDMA_TLS = frozenset({"rc_verbs", "rc_mlx5", "dc_mlx5", "ud_verbs", "ud_mlx5", "gga_mlx5", "srd"})
SHM_TLS = frozenset({"sysv", "posix", "cma", "xpmem", "knem", "self"})
_MAX_LINE = 4096
"""Lane lines are a few hundred characters; longer ones are cut so a hostile log stays linear."""


@dataclass(frozen=True)
class UcxLanes:
    """One endpoint configuration line."""

    worker: str
    scope: str
    """``intra-node``, ``inter-node`` (UCX's own guess from host ids) or ``self``."""
    lanes: tuple[tuple[str, tuple[str, ...]], ...]
    """``(lane kind, ("tl/device", ...))`` in the order printed, e.g. ``("rma", ("sysv/memory",))``."""
    line: str

    def data_lanes(self) -> tuple[str, ...]:
        # An MPI-style worker (tag matching only) prints just tag(...); its data rides those lanes.
        for kind in ("rma", "rma_am", "am", "tag"):
            for name, tls in self.lanes:
                if name == kind:
                    return tls
        return ()


@dataclass(frozen=True)
class UcxTransport:
    """The classified data path of one or more endpoints."""

    kind: str
    """``rdma``, ``tcp``, ``shm`` or ``unknown``."""
    lanes: tuple[str, ...]
    """``tl/device`` entries of the data lanes, deduplicated, in order."""

    @property
    def rdma(self) -> bool:
        return self.kind == "rdma"

    def label(self) -> str:
        """``nixl/shm(sysv/memory,posix/memory)``, ``nixl/tcp(tcp/lo)``, ``nixl/rdma(rc_mlx5/mlx5_0:1)``."""
        return f"nixl/{self.kind}({','.join(self.lanes)})" if self.lanes else f"nixl/{self.kind}"


def _parse_line(line: str, number: int, source: str) -> UcxLanes | None:
    line = line[:_MAX_LINE]
    marker = line.find(" INFO ")
    if marker < 0 or "UCX" not in line[:marker]:
        return None
    words = line[marker + 6:].split()
    if len(words) < 4 or words[1] not in ("intra-node", "inter-node", "self") or not words[2].startswith("cfg#"):
        return None
    lanes: list[tuple[str, tuple[str, ...]]] = []
    rest = " ".join(words[3:])
    for chunk in rest.split(")"):
        chunk = chunk.strip()
        if not chunk:
            continue
        name, paren, inner = chunk.partition("(")
        if not paren or not name or "(" in inner:
            raise ParseError(f"UCX lane group {chunk[:60]!r} is not lane(transport/device ...)", source=source,
                             line=number, excerpt=line)
        lanes.append((name, tuple(inner.split())))
    if not lanes:
        return None
    return UcxLanes(worker=words[0], scope=words[1], lanes=tuple(lanes), line=line.strip())


def parse_ucx_log(text: str, worker: str | None = None, *, source: str = "ucx log") -> list[UcxLanes]:
    """Every endpoint line (for ``worker`` only when given); other log lines are skipped."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        parsed = _parse_line(line, number, source)
        if parsed is not None and (worker is None or parsed.worker == worker):
            out.append(parsed)
    return out


def classify(lines: Iterable[UcxLanes]) -> UcxTransport:
    """The data path over the endpoints to other processes (``self`` lines are loopback and ignored)."""
    tls: dict[str, None] = {}  # ordered set: many distinct lanes stay linear
    for entry in lines:
        if entry.scope == "self":
            continue
        for tl in entry.data_lanes():
            tls[tl] = None
    names = {tl.split("/", 1)[0] for tl in tls}
    if names & RDMA_TLS:
        kind = "rdma"
    elif "tcp" in names:
        kind = "tcp"
    elif names and names <= SHM_TLS:
        kind = "shm"
    else:
        kind = "unknown"
    return UcxTransport(kind, tuple(tls))
