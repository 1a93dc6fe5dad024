"""The line rate nccl-tests bus bandwidth is judged against, and the report's figures against it.

``--line-rate 8x400G`` or the sum of the host's active RoCE ports (sysfs ``ports/N/rate``); busbw at the largest
size as a fraction of it (nccl-tests' busbw is per rank, and a ring collective spreads one NIC per GPU); the
one-line summary per table and the ``--json`` form of the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError
from tensorfabric.host.records import HostInventory
from tensorfabric.units import format_rate, format_size, parse_rate

if TYPE_CHECKING:  # the reader imports this module; the records are only annotations here
    from tensorfabric.host.nccl_tests import NcclTestsReport, PerfTable

__all__ = ["BITS_PER_GB", "LineRate", "fraction_of_line_rate", "line_rate_flag", "parse_line_rate", "port_rate_bps",
           "report_dict", "resolve_line_rate", "summary_line"]

BITS_PER_GB = 8e9


@dataclass(frozen=True, slots=True)
class LineRate:
    """The network rate per node that busbw is compared with."""

    bps: float
    source: str
    """``--line-rate 8x400G`` or ``sysfs: mlx5_0:1 400 Gb/sec + ...``."""

    def to_dict(self) -> dict[str, Any]:
        return {"bps": self.bps, "text": format_rate(self.bps), "source": self.source}


_TIMES = re.compile(r"\s*(\d{1,4})\s*[x*×]\s*(\S.*)")
_SYSFS_RATE = re.compile(r"\s*(\d{1,6}(?:\.\d{1,6})?) Gb/sec")


def parse_line_rate(text: str) -> float:
    """``400G``, ``100gbit``, ``8x400G`` (eight NICs a node): bits per second; InputError otherwise."""
    match = _TIMES.fullmatch(text)
    if match is None:
        return parse_rate(text, what="line rate")
    count = int(match[1])
    if count < 1:
        raise InputError(f"line rate: {text!r} must count at least one NIC, e.g. '8x400G'")
    return count * parse_rate(match[2], what="line rate")


def port_rate_bps(rate: str) -> float | None:
    """``400 Gb/sec (4X NDR)`` (sysfs ``ports/N/rate``) in bits per second."""
    match = _SYSFS_RATE.match(rate)
    return float(match[1]) * 1e9 if match else None


def line_rate_flag(text: str) -> LineRate:
    """``--line-rate TEXT`` as a :class:`LineRate`; InputError naming the accepted forms."""
    return LineRate(parse_line_rate(text), f"--line-rate {text}")


def resolve_line_rate(inventory: HostInventory | None, given: LineRate | None) -> LineRate | None:
    """``--line-rate`` when given, else the sum of this host's active RoCE ports (a ring collective spreads over
    one NIC per GPU), else None."""
    if given is not None or inventory is None:
        return given
    found = [(p.name, bps) for p in inventory.roce_ports if p.active and (bps := port_rate_bps(p.rate))]
    if not found:
        return None
    return LineRate(sum(b for _, b in found), "sysfs: " + " + ".join(f"{n} {format_rate(b)}" for n, b in found))


def report_dict(report: NcclTestsReport, line_rate: LineRate | None) -> dict[str, Any]:
    """``--json`` key ``nccl_tests``: the report, the line rate used and each table's fraction of it."""
    out = report.to_dict()
    out["line_rate"] = line_rate.to_dict() if line_rate else None
    for table, data in zip(report.tables, out["tables"], strict=True):
        fraction = fraction_of_line_rate(table, line_rate)
        data["fraction_of_line_rate"] = round(fraction, 4) if fraction is not None else None
    return out


def fraction_of_line_rate(table: PerfTable, line_rate: LineRate | None) -> float | None:
    busbw = table.busbw_at_largest
    if line_rate is None or busbw is None:
        return None
    return busbw * BITS_PER_GB / line_rate.bps


def summary_line(table: PerfTable, line_rate: LineRate | None) -> str:
    """One line per table for people: ``all_reduce_perf (16 ranks, 2 hosts): busbw 371.95 GB/s at 8GiB ...``."""
    who = ", ".join(x for x in (f"{table.ranks} rank{'s' if table.ranks > 1 else ''}" if table.ranks else "",
                                f"{len(table.hosts)} hosts" if len(table.hosts) > 1 else
                                (table.hosts[0] if table.hosts else "")) if x)
    who = "; ".join(x for x in (who, f"from {table.origin}" if table.origin else "") if x)
    head = f"nccl-tests {table.title}" + (f" ({who})" if who else "")
    largest, busbw = table.largest_size, table.busbw_at_largest
    if largest is None or busbw is None:
        avg = f"avg bus bandwidth {table.avg_busbw:g} GB/s" if table.avg_busbw is not None else "no result rows"
        return f"{head}: {avg}"
    parts = [f"busbw {busbw:.2f} GB/s at {format_size(largest)}"]
    fraction = fraction_of_line_rate(table, line_rate)
    if table.scope in ("single-node", "single-rank"):
        parts[0] += " (one node: not the network)" if table.scope == "single-node" else " (one rank)"
    elif fraction is not None and line_rate is not None:
        parts[0] += f" = {fraction:.2f} of {format_rate(line_rate.bps)}"
    peak = table.peak
    if peak is not None and peak.size != largest:
        parts.append(f"peak {peak.busbw:.2f} GB/s at {format_size(peak.size)}")
    if table.avg_busbw is not None:
        parts.append(f"avg {table.avg_busbw:g} GB/s")
    wrong = table.wrong_rows
    parts.append(f"#wrong at {', '.join(format_size(r.size) for r in wrong)}" if wrong else "no wrong results")
    return f"{head}: {'; '.join(parts)}"
