"""One rank of ``tensorfabric fleet``: this host's doctor, the report gathered on rank 0, the pair rounds.

Rank table (one process per host)::

    rank 0        doctor -> rendezvous -> gather every report (deadline) -> go/abort -> clock pings -> rounds
                  -> gather pair figures -> the fleet rules -> a FleetReport
    rank r > 0    doctor -> rendezvous -> send its report -> wait for go -> answer the clock ping -> rounds
                  -> send its pair figures

Phases and what bounds them (``timeout_s``, the ``--timeout`` of the CLI, is how long any one step may wait for a
peer): the rendezvous and every exchange of the rounds run under the process group's timeout; rank 0 waits for
the reports until one timeout after it started gathering, then goes on with the hosts that answered: with a host
missing it runs no rounds (every pair with it would stall) and returns the rules over the hosts that answered with
the missing ranks named. Rank 0 never raises for a peer's failure; it reports it.

A pair ``(a, b)``, ``a < b``: ``a`` drives. Small ping-pongs (warm-up, then ``pings`` timed round trips; one-way
latency is half the lowest: scheduling noise on a busy host only ever adds time, so the minimum is the path's own)
travel through the group's small-message path (NIXL when the engine is on), the bulk
transfer (``bulk_bytes``, each direction, timed by the sender to the receiver's 8-byte acknowledgement) through
Gloo point-to-point.

The environment is read here, once, from ``environ`` (default ``os.environ``): the rank variables the launcher
set, ``TENSORFABRIC_LAB_HOST`` (a lab host's name: lab hosts share one kernel host name) and the NCCL/UCX
variables the doctor judges.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError, TransferError
from tensorfabric.fleet.check import FleetReport, check_fleet
from tensorfabric.fleet.facts import HostReport, host_facts
from tensorfabric.fleet.pairs import PairResult, Thresholds
from tensorfabric.fleet.schedule import PAIR_MODES, Schedule, schedule

if TYPE_CHECKING:
    from tensorfabric.transfer.group import Group

__all__ = ["FleetConfig", "RankDone", "fleet_rank", "local_report"]

LAB_HOST_ENV = "TENSORFABRIC_LAB_HOST"
_ACK_BYTES = 8
_WARMUP_PINGS = 3
_WARMUP_BULK = 1 << 20
RoundHook = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class FleetConfig:
    pairs: str = "all"
    bulk_bytes: int = 8 << 20
    """Bytes of the timed bulk transfer, each direction of each pair."""
    pings: int = 20
    repeats: int = 2
    """Timed bulk transfers per direction; the pair keeps the best. One transfer that a busy host stalls would
    make a healthy link look slow; a slow path is slow every time."""
    timeout_s: float = 120.0
    engine: str = "auto"
    line_rate_bps: float | None = None
    sysfs_root: str = "/"
    thresholds: Thresholds = field(default_factory=Thresholds)

    def __post_init__(self) -> None:
        if self.pairs not in PAIR_MODES:
            raise InputError(f"--pairs: {self.pairs!r} is not one of {', '.join(PAIR_MODES)}")
        if not 1 <= self.bulk_bytes <= 1 << 32:
            raise InputError(f"--bytes: {self.bulk_bytes} must be from 1 byte to 4GiB, e.g. 8MiB")
        if not 1 <= self.repeats <= 100:
            raise InputError(f"--repeats: {self.repeats} must be from 1 to 100")
        if not 1 <= self.pings <= 10_000:
            raise InputError(f"--pings: {self.pings} must be from 1 to 10000")
        if not self.timeout_s > 0:
            raise InputError(f"--timeout: {self.timeout_s!r} must be a positive duration such as 120s")


@dataclass(frozen=True, slots=True)
class RankDone:
    """What a rank other than 0 returns."""

    rank: int
    host: str
    status: str
    """``done`` or ``aborted`` (rank 0 ran no rounds)."""


def local_report(root: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """This host's ``doctor --json`` document, with the versions and host name a live run knows."""
    from tensorfabric.fleet.software import software_versions
    from tensorfabric.host.discovery import discover
    from tensorfabric.host.doctor import run_doctor
    from tensorfabric.host.hostname import resolve_hostname
    from tensorfabric.host.nccl_conf import user_home

    live = os.path.realpath(root) == "/"
    # NCCL's config files as this rank's NCCL would read them (NCCL_CONF_FILE or ~/.nccl.conf, then /etc).
    inv = discover(root, environ=environ, home=user_home() if live else None, cwd=os.getcwd() if live else "/")
    software = software_versions(root, [d.driver for d in inv.rdma_devices if d.driver])
    report = run_doctor(inv, environ=environ, software=software,
                        hostname=resolve_hostname(socket.gethostname()) if live else None)
    return report.to_dict()


def _host_name(environ: Mapping[str, str]) -> str:
    return environ.get(LAB_HOST_ENV) or socket.gethostname()


# -- blobs to rank 0 -----------------------------------------------------------------------------------------
def _wait(work: Any, seconds: float) -> None:
    assert work is not None, "a point-to-point call on a live group returned no Work"
    work.wait(datetime.timedelta(seconds=seconds))


def _send_blob(pg: Any, data: bytes) -> None:
    import torch
    import torch.distributed as dist

    dist.send(torch.tensor([len(data)], dtype=torch.int64), 0, group=pg)
    dist.send(torch.frombuffer(bytearray(data), dtype=torch.uint8), 0, group=pg)


def _gather_blobs(pg: Any, world: int, deadline: float) -> dict[int, bytes]:
    """Rank 0: every rank's blob that arrives before ``deadline`` (monotonic); the others are absent."""
    import torch
    import torch.distributed as dist

    sizes = {r: torch.zeros(1, dtype=torch.int64) for r in range(1, world)}
    works = {r: dist.irecv(sizes[r], r, group=pg) for r in sizes}
    got: dict[int, bytes] = {}
    for r, work in works.items():
        try:
            _wait(work, max(deadline - time.monotonic(), 0.001))
            buf = torch.empty(int(sizes[r][0]), dtype=torch.uint8)
            _wait(dist.irecv(buf, r, group=pg), max(deadline - time.monotonic(), 1.0))
        except RuntimeError:
            continue  # late, dead or hung: named by the caller
        got[r] = buf.numpy().tobytes()
    return got


def _status(pg: Any, ranks: list[int], go: bool) -> None:
    import torch
    import torch.distributed as dist

    for r in ranks:
        dist.send(torch.tensor([1 if go else 0], dtype=torch.int64), r, group=pg)


def _wait_status(pg: Any, timeout_s: float) -> bool:
    import torch
    import torch.distributed as dist

    flag = torch.zeros(1, dtype=torch.int64)
    try:
        # Rank 0 may spend a whole timeout gathering before it answers: wait for two.
        _wait(dist.irecv(flag, 0, group=pg), 2 * timeout_s)
    except RuntimeError as exc:
        raise TransferError(f"rank 0 sent no go/abort within {2 * timeout_s:g} s: {exc}", op="fleet-plan",
                            peer=0) from exc
    return bool(flag[0])


# -- clock --------------------------------------------------------------------------------------------------
def _clock_offsets(group: Group, ranks: list[int]) -> dict[int, float]:
    import torch

    out = {}
    buf = torch.zeros(1, dtype=torch.float64)
    for r in ranks:
        t0 = time.time()
        group.send(torch.tensor([t0], dtype=torch.float64), r)
        group.recv(buf, r)
        t1 = time.time()
        out[r] = float(buf[0]) - (t0 + t1) / 2
    return out


def _answer_clock(group: Group) -> None:
    import torch

    buf = torch.zeros(1, dtype=torch.float64)
    group.recv(buf, 0)
    group.send(torch.tensor([time.time()], dtype=torch.float64), 0)


# -- one pair -----------------------------------------------------------------------------------------------
def _bulk(group: Group, peer: int, sending: bool, data: Any, ack: Any) -> float | None:
    """One timed bulk transfer; the sender returns bits per second, the receiver None."""
    if sending:
        t0 = time.perf_counter()
        group.send(data, peer)
        group.recv(ack, peer)
        return float(data.numel() * 8) / max(time.perf_counter() - t0, 1e-9)
    group.recv(data, peer)
    group.send(ack, peer)
    return None


def _latency(group: Group, peer: int, driver: bool, config: FleetConfig) -> float | None:
    """One-way latency to ``peer`` (the driver's figure; the other side returns None)."""
    import torch

    small = torch.zeros(1, dtype=torch.float64)
    rtts = []
    for i in range(_WARMUP_PINGS + config.pings):
        if driver:
            t0 = time.perf_counter()
            group.send(small, peer)
            group.recv(small, peer)
            if i >= _WARMUP_PINGS:
                rtts.append(time.perf_counter() - t0)
        else:
            group.recv(small, peer)
            group.send(small, peer)
    return min(rtts) / 2 if driver else None


def _bandwidth(group: Group, peer: int, driver: bool, config: FleetConfig) -> tuple[float, float] | None:
    """(driver -> peer, peer -> driver) bits per second, on the driver; None on the other side."""
    import torch

    ack = torch.zeros(_ACK_BYTES, dtype=torch.uint8)
    warm = torch.zeros(min(_WARMUP_BULK, config.bulk_bytes), dtype=torch.uint8)
    data = torch.zeros(config.bulk_bytes, dtype=torch.uint8)
    _bulk(group, peer, driver, warm, ack)
    _bulk(group, peer, not driver, warm, ack)
    forward = backward = 0.0
    for _ in range(config.repeats):
        forward = max(forward, _bulk(group, peer, driver, data, ack) or 0.0)
        backward = max(backward, _bulk(group, peer, not driver, data, ack) or 0.0)
    report = torch.tensor([backward], dtype=torch.float64)
    if not driver:
        group.send(report, peer)
        return None
    group.recv(report, peer)
    return forward, float(report[0])


def _latency_phase(group: Group, pairs: tuple[tuple[int, int], ...], config: FleetConfig) -> float | None:
    """The round's pairs one after another; this rank's figure when it drives a pair."""
    me, latency = group.rank, None
    for a, b in pairs:
        if me in (a, b):
            latency = _latency(group, b if me == a else a, me == a, config)
        group.barrier()
    return latency


def _rounds(group: Group, sched: Schedule, config: FleetConfig, on_round: RoundHook | None
            ) -> tuple[list[dict[str, Any]], list[float], str | None]:
    """This rank's driven pairs (by rank), each round's seconds, and the error that stopped the rounds.

    A round is three phases. Latency: the round's pairs ping-pong one after another (a barrier between), so no round
    trip waits behind another pair's traffic through the same switch, or, in a lab or on a busy host, for a CPU that
    other pairs hold; it costs pings x round trip per pair. Bandwidth: every pair of the round at once. Latency
    again, and a pair keeps its lower figure: a host that stalls for a few milliseconds once (a scheduler hiccup)
    must not make a link look late, while a late path is late both times."""
    mine: list[dict[str, Any]] = []
    seconds: list[float] = []
    me = group.rank
    for index in range(len(sched.rounds)):
        t0 = time.monotonic()
        peer = sched.partner(index, me)
        try:
            first = _latency_phase(group, sched.rounds[index], config)
            rates = _bandwidth(group, peer, me < peer, config) if peer is not None else None
            group.barrier()
            second = _latency_phase(group, sched.rounds[index], config)
            latency = min(first, second) if first is not None and second is not None else None
        except TransferError as exc:
            if me != 0:
                raise
            return mine, seconds, f"round {index + 1} of {len(sched.rounds)}: {exc}"
        if peer is not None and rates is not None:
            mine.append({"a": me, "b": peer, "round": index, "latency_s": latency, "bandwidth_ab_bps": rates[0],
                         "bandwidth_ba_bps": rates[1]})
        seconds.append(time.monotonic() - t0)
        if on_round is not None:
            on_round(index + 1, len(sched.rounds))
    return mine, seconds, None


# -- the rank -----------------------------------------------------------------------------------------------
def _facts(blob: bytes, rank: int) -> HostReport:
    doc = json.loads(blob)
    facts = host_facts(doc, source=f"rank {rank}", name=doc.get("fleet_host"))
    return replace(facts, host=str(doc.get("fleet_host") or facts.host),
                   clock_offset_s=doc.get("clock_offset_s"))


def _unique_names(names: dict[int, str]) -> dict[int, str]:
    counts: dict[str, int] = {}
    for name in names.values():
        counts[name] = counts.get(name, 0) + 1
    return {r: (f"{n}/rank{r}" if counts[n] > 1 else n) for r, n in names.items()}


def fleet_rank(rank: int, config: FleetConfig, environ: Mapping[str, str] | None = None,
               on_round: RoundHook | None = None) -> FleetReport | RankDone:
    """Run this rank's part (see the module docstring). Rank 0 returns the :class:`FleetReport`."""
    from tensorfabric.transfer.group import init

    env = os.environ if environ is None else environ
    t_start = time.monotonic()
    timings: dict[str, float] = {}
    name = _host_name(env)
    report = {**local_report(config.sysfs_root, env), "fleet_host": name, "rank": rank}
    timings["doctor_s"] = time.monotonic() - t_start
    t = time.monotonic()
    import torch.distributed  # noqa: F401 -- timed on its own: on a slow filesystem it dwarfs the rendezvous

    timings["import_s"] = time.monotonic() - t
    t = time.monotonic()
    try:
        group = init("gloo", timeout_s=config.timeout_s, environ=env, engine=config.engine, name="fleet")
    except TransferError as exc:
        if rank != 0:
            raise
        return check_fleet([_facts(json.dumps(report).encode(), 0)], error=f"rendezvous: {exc}",
                           missing=("the other ranks (the rendezvous did not complete)",), timings=timings,
                           line_rate_bps=config.line_rate_bps, thresholds=config.thresholds)
    timings["rendezvous_s"] = time.monotonic() - t
    try:
        return _run(group, rank, name, report, config, timings, on_round, t_start)
    finally:
        group.destroy()


def _run(group: Group, rank: int, name: str, report: dict[str, Any], config: FleetConfig,
         timings: dict[str, float], on_round: RoundHook | None, t_start: float) -> FleetReport | RankDone:
    world, pg = group.size, group.pg
    sched = schedule(world, config.pairs)
    if rank != 0:
        _send_blob(pg, json.dumps(report).encode())
        if not _wait_status(pg, config.timeout_s):
            return RankDone(rank, name, "aborted")
        _answer_clock(group)
        mine, _, _ = _rounds(group, sched, config, None)
        _send_blob(pg, json.dumps(mine).encode())
        return RankDone(rank, name, "done")
    t = time.monotonic()
    blobs = _gather_blobs(pg, world, time.monotonic() + config.timeout_s) if world > 1 else {}
    blobs[0] = json.dumps(report).encode()
    timings["reports_s"] = time.monotonic() - t
    hosts = {r: _facts(b, r) for r, b in sorted(blobs.items())}
    names = _unique_names({r: h.host for r, h in hosts.items()})
    hosts = {r: replace(h, host=names[r]) for r, h in hosts.items()}
    missing = [r for r in range(world) if r not in blobs]
    if missing:
        _status(pg, [r for r in hosts if r != 0], go=False)
        answered = ", ".join(h.host for h in hosts.values())
        why = (f"{len(missing)} of {world} ranks did not answer within {config.timeout_s:g} s: "
                 f"{', '.join(f'rank {r}' for r in missing)}; no pair rounds ran (answered: {answered})")
        timings["total_s"] = time.monotonic() - t_start
        return check_fleet(list(hosts.values()), missing=[f"rank {r}" for r in missing], error=why,
                           timings=timings, schedule=sched, line_rate_bps=config.line_rate_bps,
                           thresholds=config.thresholds, engine=group.transport)
    _status(pg, list(range(1, world)), go=True)
    t = time.monotonic()
    offsets = _clock_offsets(group, list(range(1, world)))
    hosts = {r: replace(h, clock_offset_s=offsets.get(r, 0.0)) for r, h in hosts.items()}
    timings["clock_s"] = time.monotonic() - t
    t = time.monotonic()
    mine, seconds, stopped = _rounds(group, sched, config, on_round)
    error: str | None = stopped
    timings["rounds_s"] = time.monotonic() - t
    timings.update({f"round{i + 1}_s": s for i, s in enumerate(seconds)})
    records = list(mine)
    if error is None and world > 1:
        t = time.monotonic()
        results = _gather_blobs(pg, world, time.monotonic() + config.timeout_s)
        for blob in results.values():
            records += json.loads(blob)
        late = [r for r in range(1, world) if r not in results]
        if late:
            error = f"pair figures of {', '.join(f'rank {r}' for r in late)} did not arrive"
        timings["results_s"] = time.monotonic() - t
    pairs = [PairResult(names[d["a"]], names[d["b"]], d["latency_s"], d["bandwidth_ab_bps"], d["bandwidth_ba_bps"],
                        d["round"], None, group.transport, config.bulk_bytes)
             for d in sorted(records, key=lambda d: (d["round"], d["a"]))]
    timings["total_s"] = time.monotonic() - t_start
    return check_fleet(list(hosts.values()), pairs=pairs, schedule=sched, error=error, timings=timings,
                       line_rate_bps=config.line_rate_bps, thresholds=config.thresholds, engine=group.transport)
