"""Rules over the pairwise data-path figures: a slow or late host, a slow or late link, a pair that failed.

How a host is told from a link is in :mod:`tensorfabric.fleet.pairs`.
"""

from __future__ import annotations

from collections.abc import Iterable

from tensorfabric.findings import Finding
from tensorfabric.fleet.pairs import PairVerdict, host_figures, judge_pairs
from tensorfabric.fleet.rules.base import FleetContext, host_finding, register
from tensorfabric.units import format_rate

__all__: list[str] = []


def _us(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1e6:.0f} us"


def _rate(bps: float | None) -> str:
    return "?" if bps is None else format_rate(bps)


def _bad_hosts(verdicts: list[PairVerdict], attr: str) -> set[str]:
    """Hosts with at least two measured pairs, all of them bad by ``attr``, while some pair is good."""
    if all(getattr(v, attr) for v in verdicts):
        return set()
    per: dict[str, list[bool]] = {}
    for v in verdicts:
        for host in (v.pair.a, v.pair.b):
            per.setdefault(host, []).append(getattr(v, attr))
    return {h for h, flags in per.items() if len(flags) >= 2 and all(flags)}


@register("fleet.datapath", "pairs")
def datapath(ctx: FleetContext) -> Iterable[Finding]:
    """Pairs below the reference bandwidth or above the reference latency, named as a host or as a link."""
    if not ctx.pairs:
        return
    verdicts, floor, late_at = judge_pairs(ctx.pairs, ctx.thresholds, ctx.line_rate_bps)
    figures = host_figures(ctx.pairs)
    against = (f"half the line rate {_rate(ctx.line_rate_bps)}" if ctx.line_rate_bps
               else f"{ctx.thresholds.bandwidth_fraction:g} x the fleet's reference")
    everywhere = bool(verdicts) and floor is not None and all(v.slow for v in verdicts)
    if everywhere:
        rates = sorted(v.pair.bandwidth_bps or 0.0 for v in verdicts)
        yield Finding("fleet.datapath", "error", "fleet",
                      f"every pair is below {_rate(floor)} ({against}): median {_rate(rates[len(rates) // 2])}",
                      {"hosts": [], "kind": "fleet", "floor_bps": floor, "pairs": len(verdicts)},
                      "the path itself is slow everywhere: check the transport (a TCP fallback, --engine), the "
                      "switch configuration and the --line-rate given")
    slow_hosts = _bad_hosts(verdicts, "slow")
    late_hosts = _bad_hosts(verdicts, "late")
    for host in sorted(slow_hosts | late_hosts):
        fig = figures[host]
        what = []
        if host in slow_hosts:
            what.append(f"best {_rate(fig.best_bps)} against a floor of {_rate(floor)} ({against})")
        if host in late_hosts:
            what.append(f"best one-way latency {_us(fig.best_latency_s)} against {_us(late_at)}")
        yield host_finding("fleet.datapath", host,
                           f"every pair of this host is {'slow' if host in slow_hosts else 'late'} "
                           f"({fig.pairs} pairs): {'; '.join(what)}",
                           "the host is the common factor: check its NIC and link (`ethtool -S` errors, speed, "
                           "cable/optics), its switch port, its qdisc/shaping and CPU load; rerun with --pairs all "
                           "to confirm", severity="error" if host in slow_hosts else "warning",
                           evidence={"figures": fig.to_dict(), "floor_bps": floor, "late_at_s": late_at})
    for v in verdicts:
        if everywhere:
            v = PairVerdict(v.pair, False, v.late)  # the fleet finding said it: not once per pair again
        if not v.bad or v.pair.a in slow_hosts | late_hosts or v.pair.b in slow_hosts | late_hosts:
            continue
        p = v.pair
        what = []
        if v.slow:
            what.append(f"{_rate(p.bandwidth_bps)} against a floor of {_rate(floor)} ({against})")
        if v.late:
            what.append(f"one-way latency {_us(p.latency_s)} against {_us(late_at)}")
        yield Finding("fleet.datapath", "error" if v.slow else "warning", f"link {p.a}—{p.b}",
                      f"this pair is {'slow' if v.slow else 'late'} while both hosts are fine with others: "
                      + "; ".join(what),
                      {"hosts": [p.a, p.b], "kind": "link", "pair": p.to_dict(), "floor_bps": floor,
                       "late_at_s": late_at},
                      "the path between them is the suspect: the switch ports and the route (ECMP member, "
                      "cabling) between these two hosts; `ib_write_bw` between them narrows it down")
    for p in ctx.pairs:
        if p.error is not None:
            yield Finding("fleet.datapath", "error", f"link {p.a}—{p.b}", f"the exchange failed: {p.error}",
                          {"hosts": [p.a, p.b], "kind": "link", "pair": p.to_dict()},
                          "check that the two hosts reach each other on the data network (firewall, routes, MTU)")
