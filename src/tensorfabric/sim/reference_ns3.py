"""The packet-level reference with DCQCN: the HPCC ns-3 simulator (alibaba-edu/High-Precision-Congestion-Control,
``simulation/scratch/third``, ns-3.17). Our scenarios out as its input files, its output files back.

Inputs (``mix/config_doc.txt`` of the snapshot):

* :func:`config_text` -- the key/value config ``third`` reads: CC_MODE 1 (its "Mellanox version" of DCQCN),
  the DCQCN keys from :class:`Ns3Dcqcn`, ECN per link speed (``KMIN_MAP``/``KMAX_MAP`` in KB, ``PMAX_MAP``),
  the shared buffer (``BUFFER_SIZE`` in MB; PFC's dynamic threshold is 1/8 of the free buffer), the files;
* :func:`topology` -- ``<nodes> <switches> <links>``, the switch ids, then ``a b rate delay error`` per link.
  Host ``i`` of the fabric is node ``i``; switches follow in the fabric's order;
* :func:`flow_text` -- the flow count, then ``src dst pg dport size start_s`` sorted by start (``third``
  reads them in order). Each (src, dst) pair numbers its flows' source ports from 10000 in file order, which
  is how a completion line is matched to its flow.

Outputs: the FCT file (:func:`parse_fct`: ``sip dip sport dport size start_ns fct_ns standalone_fct_ns``,
IPs in hex, ``0b000001 + id/256 << 16 + id%256 << 8``), the PFC file (:func:`parse_pfc`: ``time_ns node
node_type ifindex type``, 1 = the port received a PAUSE, 0 = a RESUME), the queue-length file
(:func:`parse_qlen`: ``time: T`` then ``switch port n0 n1 ...``, samples per 1 KB bin since the monitor
started) and, from the build of ``scripts/build-ns3-hpcc.sh``, one ``PATH sip dip sport dport node ifindex``
line per switch hop of each flow's first packet (:func:`parse_paths`), so the model can run on the
reference's own ECMP choices.

Where its DCQCN differs in meaning from ours (``sim/dcqcn.py``), see :func:`from_firmware` and
:func:`from_paper`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from tensorfabric.errors import InputError, ParseError
from tensorfabric.sim.dcqcn import FirmwareDcqcn, PaperDcqcn
from tensorfabric.sim.ecn import EcnConfig
from tensorfabric.sim.workloads import Flow
from tensorfabric.topology import Fabric

__all__ = [
    "ACK_BYTES", "DATA_HEADER_BYTES", "FctRecord", "Ns3Dcqcn", "Ns3Files", "Ns3Flows", "Ns3Topology", "Pause",
    "config_text", "flow_text", "from_firmware", "from_paper", "matched_firmware", "node_of_ip", "parse_fct",
    "parse_paths", "parse_pfc", "parse_qlen", "topology",
]

DATA_HEADER_BYTES = 36
"""Bytes a data packet carries besides its payload: PPP 2, IPv4 20, UDP 8, sequence and priority 6 (no INT
header under DCQCN); ns-3's point-to-point link has no preamble or inter-frame gap."""
ACK_BYTES = 48
"""An ACK (one per data packet with ``L2_ACK_INTERVAL 1``; it carries the CNP flag): PPP 2, IPv4 20, the
12-byte ACK header padded to a 60-byte frame less the 34 bytes of Ethernet and IP it does not have."""
FIRST_PORT = 10000
PAUSE, RESUME = 1, 0

# Bounded quantifiers only: linear on any line.
_FCT = re.compile(r"([0-9a-f]{8}) ([0-9a-f]{8}) (\d{1,5}) (\d{1,5}) (\d{1,20}) (\d{1,20}) (\d{1,20}) (\d{1,20})")
_PATH = re.compile(r"PATH ([0-9a-f]{8}) ([0-9a-f]{8}) (\d{1,5}) (\d{1,5}) (\d{1,9}) (\d{1,4})")
_PFC = re.compile(r"(\d{1,20}) (\d{1,9}) ([01]) (\d{1,4}) ([01])")
_QLEN_TIME = re.compile(r"time: (\d{1,20})")


@dataclass(frozen=True, slots=True)
class Ns3Dcqcn:
    """The HPCC simulator's DCQCN keys (CC_MODE 1), in its units."""

    alpha_resume_interval_us: float
    """ALPHA_RESUME_INTERVAL: alpha <- (1 - g) alpha (+ g if a CNP came) every this many us."""
    rate_decrease_interval_us: float
    """RATE_DECREASE_INTERVAL: a rate cut every this many us if a CNP came since the last check."""
    rp_timer_us: float
    """RP_TIMER: the only rate-increase event (there is no byte counter)."""
    ewma_gain: float
    fast_recovery_times: int
    """FAST_RECOVERY_TIMES F: timer expiries 1..F fast recovery, F+1 additive, later ones hyper."""
    rate_ai_bps: float
    rate_hai_bps: float
    min_rate_bps: float
    clamp_target_rate: bool = False
    """CLAMP_TARGET_RATE 0: R_T <- R_C on a cut only when an increase came since the previous cut."""

    def __post_init__(self) -> None:
        for name in ("alpha_resume_interval_us", "rate_decrease_interval_us", "rp_timer_us", "ewma_gain",
                     "rate_ai_bps", "rate_hai_bps", "min_rate_bps"):
            if not getattr(self, name) > 0:
                raise InputError(f"ns-3 dcqcn {name}: {getattr(self, name)!r} must be positive")
        if not self.ewma_gain < 1 or self.fast_recovery_times < 0:
            raise InputError("ns-3 dcqcn: EWMA_GAIN must be in (0, 1) and FAST_RECOVERY_TIMES >= 0")


def from_firmware(fw: FirmwareDcqcn) -> Ns3Dcqcn:
    """Our firmware form in the reference's keys.

    Same meaning: the alpha timer (DCE_TCP_RTT), g, the decrease check period, the 300 us increase timer,
    AI/HAI, the target clamp after a timer increase. Differs: the reference has no byte counter
    (RPG_BYTE_RESET), no MIN_TIME_BETWEEN_CNPS (every marked packet's ACK is a CNP), no RPG_MIN_DEC_FAC (a
    cut is alpha/2, at most 50 %: our default cap), alpha = 1 on the first CNP (ours INITIAL_ALPHA
    1023/1024), and counts stages on the timer alone: expiry ``n`` is fast recovery for n <= F, additive for
    n = F + 1, hyper after (ours: additive once a stage count reaches RPG_THRESHOLD, hyper once both do), so
    RPG_THRESHOLD t maps to F = t - 1. Compare like with like by running the model with
    :func:`matched_firmware`.
    """
    return Ns3Dcqcn(alpha_resume_interval_us=fw.alpha_period_s * 1e6,
                    rate_decrease_interval_us=fw.rate_reduce_period_s * 1e6, rp_timer_us=fw.time_reset_s * 1e6,
                    ewma_gain=fw.g, fast_recovery_times=max(0, fw.threshold - 1), rate_ai_bps=fw.ai_bps,
                    rate_hai_bps=fw.hai_bps, min_rate_bps=fw.min_rate_bps, clamp_target_rate=fw.clamp_tgt_rate)


def matched_firmware(fw: FirmwareDcqcn) -> FirmwareDcqcn:
    """``fw`` with what the reference lacks switched off: no byte counter, no CNP pacing, alpha 1 on the
    first CNP, at most a 50 % cut."""
    return replace(fw, byte_reset_bytes=1e15, min_time_between_cnps_s=0.0, initial_alpha=1.0,
                   min_dec_fac=max(fw.min_dec_fac, 50.0))


def from_paper(p: PaperDcqcn) -> Ns3Dcqcn:
    """Our paper form (the SIGCOMM'15 fluid model) in the reference's keys, as its ``run.py --cc dcqcn_paper``
    does: the CNP interval tau becomes the decrease check period (one cut per tau if any mark came), tau' the
    alpha interval, T the timer, F the fast-recovery count; hyper increase = additive (the fluid model has none);
    and, unlike run.py, CLAMP_TARGET_RATE 1: the paper sets R_T <- R_C on every cut.

    Differs: the reference has no byte counter B (the fluid model's increase events come from both), decides
    a cut per interval from real marks where the fluid model cuts at the expected CNP rate
    (1 - (1 - p)^(tau R)) / tau, and updates alpha every tau' with or without a CNP in it as the model's ODE does.
    """
    return Ns3Dcqcn(alpha_resume_interval_us=p.alpha_interval_s * 1e6,
                    rate_decrease_interval_us=p.cnp_interval_s * 1e6, rp_timer_us=p.timer_s * 1e6,
                    ewma_gain=p.g, fast_recovery_times=p.fast_recovery_steps, rate_ai_bps=p.rai_bps,
                    rate_hai_bps=p.rai_bps, min_rate_bps=p.min_rate_bps, clamp_target_rate=True)


@dataclass(frozen=True, slots=True)
class Ns3Files:
    """Where ``third`` reads and writes, relative to its working directory."""

    topology: str = "topology.txt"
    flows: str = "flow.txt"
    trace: str = "trace.txt"
    trace_output: str = "mix.tr"
    fct: str = "fct.txt"
    pfc: str = "pfc.txt"
    qlen: str = "qlen.txt"


def _rate(bps: float) -> str:
    if bps <= 0 or bps != int(bps):
        raise InputError(f"link rate {bps!r} bit/s: the reference needs a whole positive number of bit/s")
    return f"{int(bps) // 1_000_000_000}Gbps" if int(bps) % 1_000_000_000 == 0 else f"{int(bps)}bps"


def _mbps(bps: float) -> str:
    return f"{bps / 1e6:.6g}Mb/s"


def config_text(*, dcqcn: Ns3Dcqcn, ecn: EcnConfig, rates: Iterable[float], payload_bytes: int = 1000,
                buffer_mb: int = 32, stop_s: float = 1.0, files: Ns3Files = Ns3Files(),
                qlen_ns: tuple[int, int] | None = None) -> str:
    """The config file for one run: DCQCN, ECN on every link speed in ``rates``, dynamic PFC thresholds.

    ``qlen_ns`` (start, end) turns the queue monitor on: every switch port sampled each 100 ns, a histogram
    written at every multiple of 100 ms (so ``end`` must reach one past ``start``); None leaves it off.
    """
    speeds = sorted({int(r) for r in rates})
    if not speeds:
        raise InputError("no link rates to set ECN thresholds for")
    if payload_bytes < 64 or buffer_mb < 1 or stop_s <= 0:
        raise InputError(f"payload {payload_bytes!r} B (>= 64), buffer {buffer_mb!r} MB (>= 1), stop "
                         f"{stop_s!r} s (> 0)")
    if ecn.kmin_bytes % 1000 or ecn.kmax_bytes % 1000:
        raise InputError(f"ECN Kmin {ecn.kmin_bytes:g} B / Kmax {ecn.kmax_bytes:g} B: the reference takes whole KB")
    qmon = (qlen_ns if qlen_ns is not None else (int((stop_s + 1) * 1e9), int((stop_s + 1) * 1e9)))

    def speed_map(value: str) -> str:
        return " ".join([str(len(speeds))] + [f"{s} {value}" for s in speeds])

    keys = [
        ("ENABLE_QCN", "1" if ecn.enabled else "0"), ("USE_DYNAMIC_PFC_THRESHOLD", "1"),
        ("PACKET_PAYLOAD_SIZE", str(payload_bytes)),
        ("TOPOLOGY_FILE", files.topology), ("FLOW_FILE", files.flows), ("TRACE_FILE", files.trace),
        ("TRACE_OUTPUT_FILE", files.trace_output), ("FCT_OUTPUT_FILE", files.fct), ("PFC_OUTPUT_FILE", files.pfc),
        ("SIMULATOR_STOP_TIME", f"{stop_s:.9g}"), ("CC_MODE", "1"),
        ("ALPHA_RESUME_INTERVAL", f"{dcqcn.alpha_resume_interval_us:g}"),
        ("RATE_DECREASE_INTERVAL", f"{dcqcn.rate_decrease_interval_us:g}"),
        ("CLAMP_TARGET_RATE", "1" if dcqcn.clamp_target_rate else "0"), ("RP_TIMER", f"{dcqcn.rp_timer_us:g}"),
        ("EWMA_GAIN", f"{dcqcn.ewma_gain:.10g}"), ("FAST_RECOVERY_TIMES", str(dcqcn.fast_recovery_times)),
        ("RATE_AI", _mbps(dcqcn.rate_ai_bps)), ("RATE_HAI", _mbps(dcqcn.rate_hai_bps)),
        ("MIN_RATE", _mbps(dcqcn.min_rate_bps)), ("DCTCP_RATE_AI", "1000Mb/s"),
        ("ERROR_RATE_PER_LINK", "0.0000"), ("L2_CHUNK_SIZE", "4000"), ("L2_ACK_INTERVAL", "1"),
        ("L2_BACK_TO_ZERO", "0"),
        # DCQCN as run.py runs it: rate-based, no window; ACKs (and the CNPs they carry) at high priority.
        ("HAS_WIN", "0"), ("GLOBAL_T", "1"), ("VAR_WIN", "0"), ("FAST_REACT", "0"), ("U_TARGET", "0.95"),
        ("MI_THRESH", "0"), ("INT_MULTI", "1"), ("MULTI_RATE", "0"), ("SAMPLE_FEEDBACK", "0"),
        ("PINT_LOG_BASE", "1.05"), ("PINT_PROB", "1.0"), ("RATE_BOUND", "1"), ("ACK_HIGH_PRIO", "1"),
        ("LINK_DOWN", "0 0 0"), ("ENABLE_TRACE", "0"),
        ("KMAX_MAP", speed_map(str(int(ecn.kmax_bytes) // 1000))),
        ("KMIN_MAP", speed_map(str(int(ecn.kmin_bytes) // 1000))),
        ("PMAX_MAP", speed_map(f"{ecn.pmax:.6g}")),
        ("BUFFER_SIZE", str(buffer_mb)), ("QLEN_MON_FILE", files.qlen),
        ("QLEN_MON_START", str(qmon[0])), ("QLEN_MON_END", str(qmon[1])),
    ]
    return "".join(f"{k} {v}\n" for k, v in keys)


@dataclass(frozen=True)
class Ns3Topology:
    text: str
    names: tuple[str, ...]
    """Device name of each node id (hosts first)."""
    neighbour: dict[tuple[int, int], int]
    """(node, ifindex) -> the node that interface is cabled to (interfaces number a node's links from 1)."""
    rates: tuple[float, ...]

    def node(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise InputError(f"{name!r} is not a device of the exported fabric") from None


def topology(fabric: Fabric) -> Ns3Topology:
    """The topology file for ``fabric``: hosts are nodes 0..H-1 in the fabric's order, then the switches;
    each link keeps its rate and its cable delay (5 ns/m)."""
    names = tuple([h.name for h in fabric.hosts] + [s.name for s in fabric.switches])
    ids = {n: i for i, n in enumerate(names)}
    lines = [f"{len(names)} {len(fabric.switches)} {len(fabric.links)}",
             " ".join(str(ids[s.name]) for s in fabric.switches)]
    ifaces: dict[int, int] = {}
    neighbour: dict[tuple[int, int], int] = {}
    for link in fabric.links:
        a, b = ids[link.a.device], ids[link.b.device]
        delay_ns = link.cable_length_m * 5.0
        lines.append(f"{a} {b} {_rate(link.speed_bps)} {delay_ns:.6g}ns 0")
        for x, y in ((a, b), (b, a)):
            ifaces[x] = ifaces.get(x, 0) + 1
            neighbour[(x, ifaces[x])] = y
    return Ns3Topology(text="\n".join(lines) + "\n", names=names, neighbour=neighbour,
                       rates=tuple(sorted({link.speed_bps for link in fabric.links})))


@dataclass(frozen=True)
class Ns3Flows:
    text: str
    key: dict[tuple[int, int, int], int]
    """(src node, dst node, source port) -> index into the exported flows."""


def flow_text(flows: Sequence[Flow], topo: Ns3Topology, *, start_offset_s: float = 0.0, priority: int = 3,
              dport: int = 100) -> Ns3Flows:
    """The flow file: ``src dst pg dport size start_s``, sorted by start (stable)."""
    if not flows:
        raise InputError("no flows to export")
    order = sorted(range(len(flows)), key=lambda i: flows[i].start_s)
    lines = [str(len(flows))]
    key: dict[tuple[int, int, int], int] = {}
    next_port: dict[tuple[int, int], int] = {}
    for i in order:
        f = flows[i]
        if f.stage or f.path:
            raise InputError(f"flow {i}: staged or explicitly routed flows have no flow-file form")
        if f.size_bytes != int(f.size_bytes) or f.size_bytes >= 2**32:
            raise InputError(f"flow {i}: size {f.size_bytes!r} must be a whole number of bytes below 4 GiB")
        src, dst = topo.node(f.src), topo.node(f.dst)
        port = next_port.get((src, dst), FIRST_PORT)
        if port > 65535:
            raise InputError(f"flow {i}: more than {65536 - FIRST_PORT} flows from {f.src} to {f.dst}")
        next_port[(src, dst)] = port + 1
        key[(src, dst, port)] = i
        lines.append(f"{src} {dst} {priority} {dport} {int(f.size_bytes)} {start_offset_s + f.start_s:.9f}")
    return Ns3Flows(text="\n".join(lines) + "\n", key=key)


def node_of_ip(hex_ip: str) -> int:
    return (int(hex_ip, 16) >> 8) & 0xFFFF


@dataclass(frozen=True)
class FctRecord:
    size_bytes: int
    start_ns: int
    fct_ns: int
    standalone_ns: int


def parse_fct(text: str, flows: Ns3Flows) -> dict[int, FctRecord]:
    """Completions by exported flow index; a line for a flow that was not exported is a ParseError."""
    out: dict[int, FctRecord] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _FCT.fullmatch(line.strip())
        if m is None:
            raise ParseError(f"ns-3 FCT file line {n}: expected 'sip dip sport dport size start fct standalone', "
                             f"got {line[:120]!r}")
        k = (node_of_ip(m.group(1)), node_of_ip(m.group(2)), int(m.group(3)))
        if k not in flows.key:
            raise ParseError(f"ns-3 FCT file line {n}: flow {k[0]}->{k[1]} port {k[2]} was not exported")
        out[flows.key[k]] = FctRecord(*(int(m.group(g)) for g in (5, 6, 7, 8)))
    return out


def parse_paths(stdout: str, flows: Ns3Flows, topo: Ns3Topology) -> dict[int, tuple[str, ...]]:
    """Each flow's device path (host, switches..., host) from the ``PATH`` lines of the path-logging build."""
    hops: dict[int, dict[int, int]] = {}
    for n, line in enumerate(stdout.splitlines(), 1):
        if not line.startswith("PATH "):
            continue
        m = _PATH.fullmatch(line.strip())
        if m is None:
            raise ParseError(f"ns-3 output line {n}: unreadable PATH line {line[:120]!r}")
        k = (node_of_ip(m.group(1)), node_of_ip(m.group(2)), int(m.group(3)))
        if k not in flows.key:
            raise ParseError(f"ns-3 output line {n}: PATH of flow {k[0]}->{k[1]} port {k[2]} was not exported")
        node, iface = int(m.group(5)), int(m.group(6))
        if (node, iface) not in topo.neighbour:
            raise ParseError(f"ns-3 output line {n}: node {node} has no interface {iface}")
        hops.setdefault(flows.key[k], {})[node] = topo.neighbour[(node, iface)]
    cabled = {(a, b) for (a, _), b in topo.neighbour.items()}
    paths: dict[int, tuple[str, ...]] = {}
    for (src, dst, _), i in flows.key.items():
        nxt = hops.get(i)
        if not nxt:
            continue
        first = [s for s in nxt if s not in nxt.values()]
        if len(first) != 1:
            raise ParseError(f"ns-3 PATH lines of flow {i}: {len(first)} first switches, expected one")
        path, at = [src, first[0]], first[0]
        while at in nxt and len(path) <= len(nxt) + 2:
            at = nxt[at]
            path.append(at)
        if path[-1] != dst:
            raise ParseError(f"ns-3 PATH lines of flow {i} end at node {path[-1]}, not its destination {dst}")
        loose = [(a, b) for a, b in zip(path, path[1:], strict=False) if (a, b) not in cabled]
        if loose:
            raise ParseError(f"ns-3 PATH lines of flow {i}: nodes {loose[0][0]} and {loose[0][1]} are not cabled")
        paths[i] = tuple(topo.names[x] for x in path)
    return paths


@dataclass(frozen=True)
class Pause:
    """PFC seen at one port (the port that received PAUSE and stopped sending)."""

    node: str
    ifindex: int
    neighbour: str
    pauses: int
    paused_ns: int


def parse_pfc(text: str, topo: Ns3Topology, end_ns: int) -> list[Pause]:
    """Per port: PAUSEs received and the time spent paused (a PAUSE latches until the RESUME; one still open
    at the end counts up to ``end_ns``)."""
    since: dict[tuple[int, int], int] = {}
    count: dict[tuple[int, int], int] = {}
    paused: dict[tuple[int, int], int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _PFC.fullmatch(line.strip())
        if m is None:
            raise ParseError(f"ns-3 PFC file line {n}: expected 'time node type ifindex 0|1', got {line[:120]!r}")
        t, port = int(m.group(1)), (int(m.group(2)), int(m.group(4)))
        if port not in topo.neighbour:
            raise ParseError(f"ns-3 PFC file line {n}: node {port[0]} has no interface {port[1]}")
        if int(m.group(5)) == PAUSE:
            count[port] = count.get(port, 0) + 1
            since.setdefault(port, t)
        elif port in since:
            paused[port] = paused.get(port, 0) + t - since.pop(port)
    for port, t in since.items():
        paused[port] = paused.get(port, 0) + max(0, end_ns - t)
    return [Pause(topo.names[p[0]], p[1], topo.names[topo.neighbour[p]], count.get(p, 0), paused.get(p, 0))
            for p in sorted(set(count) | set(paused))]


def parse_qlen(text: str) -> dict[tuple[int, int], list[int]]:
    """The last histogram of the queue-length file: (switch node, ifindex) -> samples per 1 KB bin."""
    last: dict[tuple[int, int], list[int]] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if _QLEN_TIME.fullmatch(line.strip()):
            last = {}
            continue
        fields = line.split()
        if len(fields) < 2 or not all(f.isascii() and f.isdigit() and len(f) <= 12 for f in fields):
            raise ParseError(f"ns-3 queue-length file line {n}: expected 'switch port counts...', got {line[:120]!r}")
        last[(int(fields[0]), int(fields[1]))] = [int(x) for x in fields[2:]]
    return last
