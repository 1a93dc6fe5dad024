"""What nccl-tests output says (``--nccl-tests``): wrong results are errors; busbw at the largest size, for a ring
collective across nodes, is judged against the line rate (``--line-rate``, else this host's RoCE ports)."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register
from tensorfabric.host.nccl_tests import (
    BANDWIDTH_BOUND_BYTES,
    LINE_RATE_FLOOR,
    RING_COLLECTIVES,
    LineRate,
    NcclTestsReport,
    PerfTable,
    Placement,
    fraction_of_line_rate,
)
from tensorfabric.units import format_rate, format_size

_RING_HINT = ("run all_reduce_perf across two or more nodes with NCCL_ALGO=Ring and -e 8G (NVIDIA/nccl-tests#290: "
              "expect 46-48 GB/s per 400 Gb/s NIC)")


@register("nccl_tests")
def nccl_tests(ctx: DoctorContext) -> Iterator[Finding]:
    report = ctx.nccl_tests
    if report is None:
        return
    if report.independent_runs:
        yield Finding("nccl-tests.independent-runs", "warning", f"nccl-tests {report.source}",
                      "several processes each ran their own test (rank 0 more than once, or tables interleaved): the "
                      "binary was built without MPI, so mpirun/srun started independent single-rank runs and no "
                      "figure here measured the network", {"tables": len(report.tables)},
                      "rebuild with `make MPI=1 MPI_HOME=...` and rerun (NVIDIA/nccl-tests#107, #182)")
    if not any(t.rows for t in report.tables):
        yield Finding("nccl-tests.no-rows", "warning", f"nccl-tests {report.source}",
                      "the output has nccl-tests lines but no result rows: the run failed or the paste was cut",
                      {"read": report.read.summary()}, "paste the whole output from '# nccl-tests version' to "
                      "'# Collective test concluded'")
    for index, table in enumerate(report.tables, start=1):
        yield from _table(ctx, report, table, index)


def _subject(report: NcclTestsReport, table: PerfTable, index: int) -> str:
    where = f" {table.origin}" if table.origin else ""
    return f"nccl-tests {report.source} table {index} {table.title}{where}"


def _table(ctx: DoctorContext, report: NcclTestsReport, table: PerfTable, index: int) -> Iterator[Finding]:
    subject = _subject(report, table, index)
    evidence = {k: v for k, v in table.to_dict().items() if k != "rows"}
    wrong = table.wrong_rows
    if wrong:
        sizes = ", ".join(f"{r.size} ({_wrong_text(r.out_of_place)} out-of-place, {_wrong_text(r.in_place)} "
                          f"in-place; line {r.line})" for r in wrong)
        yield Finding("nccl-tests.wrong-results", "error", subject,
                      f"results failed the data check at size {sizes}: corrupted data on the path", evidence,
                      "rerun at those sizes with NCCL_DEBUG=WARN; check NIC/GPU firmware, PCIe ACS and relaxed "
                      "ordering, and bisect the NCCL version (NVIDIA/nccl#2001)")
    elif table.out_of_bounds:
        yield Finding("nccl-tests.wrong-results", "error", subject,
                      f"the footer counts {table.out_of_bounds} out-of-bounds value(s) (FAILED); no row shows which "
                      "size", evidence, "paste the whole table to see the failing size")
    if table.avg_check == "FAILED":
        yield Finding("nccl-tests.min-bw-failed", "warning", subject,
                      f"the average bus bandwidth {table.avg_busbw:g} GB/s is below 0.9 x NCCL_TESTS_MIN_BW (the "
                      "footer says FAILED)", evidence, "compare the busbw at the largest size, not the average over "
                      "every size, against what the fabric should give")
    if table.cut_short and table.sweep is not None:
        yield Finding("nccl-tests.cut-short", "warning", subject,
                      f"the run was set to reach {format_size(table.sweep[0])} but the table stops at "
                      f"{format_size(table.largest_size or 0)}: the paste is cut or the run failed part-way, so the "
                      "busbw at the largest size shown is not the sweep's", evidence,
                      "paste the whole output (up to '# Avg bus bandwidth'); if the run died, look for "
                      "'NCCL WARN' or 'Test failure' lines")
    yield from _line_rate(ctx.nccl_tests_line_rate, table, subject, evidence)


def _wrong_text(placement: Placement | None) -> str:
    return "N/A" if placement is None or placement.wrong is None else str(placement.wrong)


def _line_rate(line_rate: LineRate | None, table: PerfTable, subject: str,
               evidence: dict[str, object]) -> Iterator[Finding]:
    largest, busbw = table.largest_size, table.busbw_at_largest
    if largest is None or busbw is None:
        return
    if table.scope == "single-rank":
        yield Finding("nccl-tests.single-rank", "info", subject,
                      "one rank: busbw is 0 by definition (all_reduce's factor 2(n-1)/n) and nothing crossed a link",
                      evidence, _RING_HINT)
        return
    if table.scope == "single-node":
        yield Finding("nccl-tests.single-node", "info", subject,
                      f"every rank ran on {table.hosts[0]}: busbw {busbw:.2f} GB/s measures NVLink/xGMI/PCIe, not "
                      "the network", evidence, _RING_HINT)
        return
    if largest < BANDWIDTH_BOUND_BYTES:
        yield Finding("nccl-tests.not-bandwidth-bound", "info", subject,
                      f"the largest size is {format_size(largest)}: below {format_size(BANDWIDTH_BOUND_BYTES)} "
                      "busbw still rises with size, so it is no measure of the link", evidence,
                      "sweep to -e 8G (at least 1G) to reach the bandwidth-bound regime")
        return
    fraction = fraction_of_line_rate(table, line_rate)
    if line_rate is None or fraction is None:
        yield Finding("nccl-tests.no-line-rate", "info", subject,
                      f"busbw {busbw:.2f} GB/s at {format_size(largest)} not compared: no --line-rate given and no "
                      "active RoCE port with a known rate on this host", evidence,
                      "pass --line-rate with the node's NIC rate, e.g. --line-rate 8x400G")
        return
    facts = {**evidence, "line_rate": line_rate.to_dict(), "fraction_of_line_rate": round(fraction, 3),
             "floor": LINE_RATE_FLOOR}
    rate = format_rate(line_rate.bps)
    scope = "" if table.scope == "multi-node" else " (scope unknown: no device list; on one node this is no network)"
    if table.collective not in RING_COLLECTIVES:
        return
    if fraction < LINE_RATE_FLOOR:
        yield Finding("nccl-tests.below-line-rate", "warning", subject,
                      f"busbw {busbw:.2f} GB/s at {format_size(largest)} is {fraction:.2f} of the {rate} line rate "
                      f"({line_rate.source}), below {LINE_RATE_FLOOR}{scope}", facts,
                      "check GPUDirect RDMA (GDR in the NCCL log), the NICs NCCL used (NCCL_IB_HCA), PFC pause and "
                      "ECN counters, and that --line-rate counts the NICs one node's ranks use; " + _RING_HINT)
    elif fraction > 1.1:
        yield Finding("nccl-tests.above-line-rate", "info", subject,
                      f"busbw {busbw:.2f} GB/s at {format_size(largest)} is {fraction:.2f} x the {rate} line rate "
                      f"({line_rate.source}): the line rate counts fewer NICs than a node used, or NCCL's tree/NVLS "
                      f"algorithms on few nodes (busbw is a ring-equivalent figure){scope}", facts, _RING_HINT)
