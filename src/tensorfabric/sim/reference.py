"""The packet-level reference (Broadcom csg-htsim, ``sim/datacenter/htsim_roce``): traffic out, results in.

* :func:`connection_matrix` writes our flows in htsim's connection-matrix syntax (``Nodes N``,
  ``Connections C``, then ``SRC->DST id I start PS size B`` with the start in picoseconds);
* :func:`parse_output` reads what ``htsim_roce`` prints: ``Flow Roce_S_D ID finished at US total bytes B``
  per finished flow, and, from the path-logging build (``scripts/build-htsim.sh``), ``ECMP ID QUEUE`` per
  switch hop of each flow's first packet;
* :func:`fat_tree_path` turns those queue names (``LS3->US1(0)``, ``US1->CS2(0)``...) into a device path
  of our :func:`~tensorfabric.sim.topologies.fat_tree`, so the fluid model can be run on the reference's own
  ECMP choices and compared flow by flow.

Host ``i`` of htsim's fat tree is our ``h{i}``: both number hosts pod by pod, ToR by ToR. htsim's core
``c`` is wired to aggregation position ``c mod k/2`` (uplink ``c div k/2``); ours is ``core{p*k/2 + l}``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from tensorfabric.errors import InputError, ParseError
from tensorfabric.sim.workloads import Flow

__all__ = ["RefRun", "connection_matrix", "fat_tree_path", "host_index", "parse_output"]

_HOST = re.compile(r"h(\d{1,9})")
# Bounded quantifiers only: every pattern is linear on any line.
_FINISHED = re.compile(r"Flow Roce_(\d{1,9})_(\d{1,9}) (\d{1,12}) finished at ([0-9.eE+-]{1,32}) "
                       r"total bytes (\d{1,20})")
_ECMP_ID = re.compile(r"ECMP (\d{1,12}) ")
_QUEUE = re.compile(r"(SRC|LS_?|US|CS)(\d{1,9})->(LS_?|US|CS|DST)(\d{1,9})\(\d{1,6}\)\Z")


@dataclass(frozen=True)
class RefRun:
    """One reference run: completion time (s, from time 0) and switch-hop queue names, per (src, dst) host."""

    finish_s: dict[tuple[int, int], float]
    hops: dict[tuple[int, int], tuple[tuple[str, int, str, int], ...]]
    """Per flow, each switch egress its first packet took: (from kind, from index, to kind, to index)."""
    retransmits: int | None


def host_index(name: str) -> int:
    m = _HOST.fullmatch(name)
    if m is None:
        raise InputError(f"host {name!r}: the packet-level reference numbers hosts; expected h<N>")
    return int(m.group(1))


def connection_matrix(flows: Sequence[Flow], nodes: int) -> str:
    """htsim's connection-matrix text for ``flows`` (ids from 1).

    Every flow must start at 0: the format has a start field, but ``htsim_roce`` (csg-htsim's main_roce) starts
    every connection at time 0 whatever it says, so a staggered flow would be compared with one that was not."""
    if not flows:
        raise InputError("no flows to export")
    late = [i for i, f in enumerate(flows) if f.start_s != 0]
    if late:
        raise InputError(f"flow {late[0]}: starts at {flows[late[0]].start_s:g} s, but htsim_roce starts every "
                         "connection at 0 (it ignores the matrix's start field); export flows that start at 0")
    lines = [f"Nodes {nodes}", f"Connections {len(flows)}"]
    for i, f in enumerate(flows):
        src, dst = host_index(f.src), host_index(f.dst)
        if max(src, dst) >= nodes:
            raise InputError(f"flow {i}: host index {max(src, dst)} is outside the {nodes}-node reference fabric")
        if f.stage or f.path:
            raise InputError(f"flow {i}: staged or explicitly routed flows have no connection-matrix form")
        if f.size_bytes != int(f.size_bytes) or f.size_bytes >= 2**31:
            raise InputError(f"flow {i}: size {f.size_bytes!r} must be a whole number of bytes below 2 GiB")
        lines.append(f"{src}->{dst} id {i + 1} start 0 size {int(f.size_bytes)}")
    return "\n".join(lines) + "\n"


def parse_output(text: str, flows: Sequence[Flow] = ()) -> RefRun:
    """Completion times and ECMP hops from ``htsim_roce`` stdout; other lines are ignored.

    ECMP lines carry the connection-matrix id (``id I``), so ``flows`` -- the list that
    :func:`connection_matrix` exported -- says which (src, dst) each belongs to.
    """
    by_id = {i + 1: (host_index(f.src), host_index(f.dst)) for i, f in enumerate(flows)}
    finish: dict[tuple[int, int], float] = {}
    raw: dict[int, list[tuple[str, int, str, int]]] = {}
    rtx: int | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("Flow Roce_"):
            m = _FINISHED.match(line)
            if m is None:
                raise ParseError(f"htsim output line {n}: unreadable completion line {line[:120]!r}")
            key = (int(m.group(1)), int(m.group(2)))
            try:
                t = float(m.group(4)) * 1e-6
            except ValueError:
                raise ParseError(f"htsim output line {n}: time {m.group(4)!r} is not a number") from None
            finish.setdefault(key, t)  # htsim prints the last flow twice
        elif line.startswith("ECMP "):
            m, q = _ECMP_ID.match(line), _QUEUE.search(line[-64:])
            if m is None or q is None:
                raise ParseError(f"htsim output line {n}: unreadable ECMP line {line[:120]!r}")
            fid = int(m.group(1))
            hop = (q.group(1).rstrip("_"), int(q.group(2)), q.group(3).rstrip("_"), int(q.group(4)))
            seen = raw.setdefault(fid, [])
            if hop not in seen:  # a retransmitted first packet logs its hops again
                seen.append(hop)
        elif line.startswith("New: ") and " Rtx: " in line:
            try:
                rtx = int(line.rsplit(" ", 1)[1])
            except ValueError:
                raise ParseError(f"htsim output line {n}: unreadable counter line {line[:120]!r}") from None
    unknown = sorted(set(raw) - set(by_id))
    if unknown:
        raise ParseError(f"htsim output: ECMP hops for flow ids {unknown[:5]} not in the exported matrix")
    return RefRun(finish_s=finish, hops={by_id[f]: tuple(h) for f, h in raw.items()}, retransmits=rtx)


def _device(kind: str, index: int, half: int) -> str:
    if kind == "LS":
        return f"edge{index // half}_{index % half}"
    if kind == "US":
        return f"agg{index // half}_{index % half}"
    if kind == "CS":
        return f"core{(index % half) * half + index // half}"
    raise ParseError(f"htsim queue kind {kind!r} is not a switch (LS, US, CS)")


def fat_tree_path(k: int, src: int, dst: int, hops: Sequence[tuple[str, int, str, int]]) -> tuple[str, ...]:
    """Our device path for a reference flow ``src -> dst`` on ``fat_tree(k)`` from its logged switch hops."""
    half = k // 2
    devices = [f"h{src}", _device("LS", src // half, half)]
    for frm, i, to, j in hops:
        if _device(frm, i, half) != devices[-1]:
            raise ParseError(f"htsim hops of {src}->{dst}: {frm}{i} does not follow {devices[-1]}")
        if to == "DST":
            break
        devices.append(_device(to, j, half))
    devices.append(f"h{dst}")
    if devices[-2] != _device("LS", dst // half, half):
        raise ParseError(f"htsim hops of {src}->{dst} end at {devices[-2]}, not the destination's ToR")
    return tuple(devices)
