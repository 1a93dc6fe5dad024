"""Pairwise data-path figures and how an outlier is told apart: a slow host from a slow link.

Each measured pair carries a one-way latency (half the lowest round trip of small ping-pongs) and the bandwidth
of a bulk transfer in each direction; a pair's bandwidth is its slower direction.

The reference a pair is judged against is the median, over hosts, of each host's *best* pair (fastest bandwidth,
lowest latency). A median over pairs would be fooled in small fleets: with three hosts, two of the three pairs touch
a slow one, so the median pair is slow. A host's best pair is slow only when the host itself is slow, so the
reference holds while fewer than half the hosts are.

* A pair is **slow** below :attr:`Thresholds.bandwidth_fraction` of the reference bandwidth (or of the line rate
  when one is given, below :attr:`Thresholds.line_fraction` of it), **late** above
  :attr:`Thresholds.latency_factor` times the reference latency (and :attr:`Thresholds.latency_floor_s` more).
  Slow is an error; late is a warning: a few hundred microseconds of scheduling on a loaded host can triple a
  round trip without anything being wrong with the path.
* A **host** is the outlier when every one of its pairs (at least two) is slow or late while other hosts have a
  good pair: whatever it talks to, it is slow, so the cause is its NIC, cable, port or configuration.
* A slow or late pair whose hosts are both fine elsewhere is a **link** outlier: that path (a switch port, an ECMP
  route, a cable between them) and not either host.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["HostFigures", "PairResult", "Thresholds", "host_figures", "judge_pairs", "reference"]


@dataclass(frozen=True, slots=True)
class Thresholds:
    bandwidth_fraction: float = 0.5
    """A pair below half the reference is slow. A host shaped to 1/10 of the others lands at 0.1; run-to-run noise of
    TCP on a busy host stays within about +-30 %, so half leaves room on both sides."""
    line_fraction: float = 0.5
    """With ``--line-rate``: a pair below half the configured rate is slow. Gloo moves data over kernel TCP, which
    does not reach a RoCE NIC's line rate; judge against the wire with the NIXL engine on RDMA."""
    latency_factor: float = 5.0
    latency_floor_s: float = 1e-3
    """A pair must also be this much later than the reference. Scheduling on a loaded host adds hundreds of
    microseconds now and then (an 8-host lab on 2 cores showed single pairs at 4-5x a 130 us reference in clean
    runs); a path that adds a millisecond (retransmitting, misrouted or congested) is still caught."""

    def to_dict(self) -> dict[str, float]:
        return {"bandwidth_fraction": self.bandwidth_fraction, "line_fraction": self.line_fraction,
                "latency_factor": self.latency_factor, "latency_floor_s": self.latency_floor_s}


@dataclass(frozen=True, slots=True)
class PairResult:
    a: str
    b: str
    latency_s: float | None = None
    """One-way: half the lowest round trip of small ping-pongs."""
    bandwidth_ab_bps: float | None = None
    bandwidth_ba_bps: float | None = None
    round: int = 0
    error: str | None = None
    engine: str = ""
    """The path the figures travelled: ``gloo/tcp``, ``nixl/...+gloo/tcp``."""
    bytes: int = 0

    @property
    def bandwidth_bps(self) -> float | None:
        known = [v for v in (self.bandwidth_ab_bps, self.bandwidth_ba_bps) if v is not None]
        return min(known) if known else None

    @property
    def measured(self) -> bool:
        return self.error is None and self.bandwidth_bps is not None

    def other(self, host: str) -> str:
        return self.b if host == self.a else self.a

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "round": self.round, "latency_s": self.latency_s,
                "bandwidth_bps": self.bandwidth_bps, "bandwidth_ab_bps": self.bandwidth_ab_bps,
                "bandwidth_ba_bps": self.bandwidth_ba_bps, "bytes": self.bytes, "engine": self.engine,
                "error": self.error}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairResult:
        return cls(str(data["a"]), str(data["b"]), data.get("latency_s"), data.get("bandwidth_ab_bps"),
                   data.get("bandwidth_ba_bps"), int(data.get("round", 0)), data.get("error"),
                   str(data.get("engine", "")), int(data.get("bytes", 0)))


@dataclass(frozen=True, slots=True)
class HostFigures:
    """Per-host aggregate of its measured pairs."""

    host: str
    pairs: int
    best_bps: float | None
    median_bps: float | None
    worst_bps: float | None
    best_latency_s: float | None
    median_latency_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "pairs": self.pairs, "best_bps": self.best_bps, "median_bps": self.median_bps,
                "worst_bps": self.worst_bps, "best_latency_s": self.best_latency_s,
                "median_latency_s": self.median_latency_s}


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def host_figures(pairs: Iterable[PairResult]) -> dict[str, HostFigures]:
    per: dict[str, list[PairResult]] = {}
    for pair in pairs:
        if pair.measured:
            per.setdefault(pair.a, []).append(pair)
            per.setdefault(pair.b, []).append(pair)
    out = {}
    for host, mine in sorted(per.items()):
        bws = [p.bandwidth_bps for p in mine if p.bandwidth_bps is not None]
        lats = [p.latency_s for p in mine if p.latency_s is not None]
        out[host] = HostFigures(host, len(mine), max(bws, default=None), _median(bws), min(bws, default=None),
                                min(lats, default=None), _median(lats))
    return out


def reference(figures: Mapping[str, HostFigures]) -> tuple[float | None, float | None]:
    """(bandwidth, latency) a pair is judged against: the median over hosts of each host's best pair."""
    return (_median([f.best_bps for f in figures.values() if f.best_bps is not None]),
            _median([f.best_latency_s for f in figures.values() if f.best_latency_s is not None]))


@dataclass(frozen=True, slots=True)
class PairVerdict:
    pair: PairResult
    slow: bool
    late: bool

    @property
    def bad(self) -> bool:
        return self.slow or self.late


def judge_pairs(pairs: Sequence[PairResult], thresholds: Thresholds, line_rate_bps: float | None
                ) -> tuple[list[PairVerdict], float | None, float | None]:
    """Each measured pair's verdict, with the reference bandwidth (or line-rate floor) and latency used."""
    figures = host_figures(pairs)
    ref_bw, ref_lat = reference(figures)
    floor = None
    if line_rate_bps:
        floor = thresholds.line_fraction * line_rate_bps
    elif ref_bw is not None and len(figures) > 2:
        floor = thresholds.bandwidth_fraction * ref_bw
    late_at = None
    if ref_lat is not None and len(figures) > 2:
        late_at = max(thresholds.latency_factor * ref_lat, ref_lat + thresholds.latency_floor_s)
    out = []
    for pair in pairs:
        if not pair.measured:
            continue
        bw, lat = pair.bandwidth_bps, pair.latency_s
        out.append(PairVerdict(pair, floor is not None and bw is not None and bw < floor,
                               late_at is not None and lat is not None and lat > late_at))
    return out, floor, late_at
