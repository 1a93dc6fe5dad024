"""Where the ranks of a ``tensorfabric bench`` sweep run, and the body each one runs.

:func:`run_benchmark` checks the sweep fits in this host's memory, launches it wherever
:func:`~tensorfabric.transfer.launch.placement` put the ranks and returns rank 0's
:class:`~tensorfabric.transfer.bench_report.BenchReport`. The caller supplies how rows and bars reach people
(``emit``, ``bars``): both must be module-level functions, since a spawned rank 0 receives them pickled.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError
from tensorfabric.host.nccl_tests_table import header_lines, row_line
from tensorfabric.transfer.bench import BenchConfig, BenchResult, BenchRow, rank_bytes, run_bench, sizes
from tensorfabric.transfer.bench_report import BenchReport

if TYPE_CHECKING:
    from tensorfabric.transfer.launch import Placement

__all__ = ["Bars", "Emit", "bench_rank", "check_memory", "run_benchmark", "sweep"]

Bars = Callable[[str, int], AbstractContextManager[Callable[[float], None] | None]]
"""``bars(description, steps)``: a context yielding ``advance(n)`` (a progress bar on a terminal)."""
Emit = Callable[[str], None]
"""Writes one or more lines of the nccl-tests table, as soon as they are known."""


def bench_rank(rank: int, config: BenchConfig, bars: Bars | None, timeout_s: float, engine: str = "auto",
               require: str = "warn", emit: Emit | None = None) -> BenchResult | None:
    """Body of one rank. With ``emit`` rank 0 writes the header and each row as it is measured (an interrupted
    sweep keeps its rows); the footer is the caller's. Rank 0 returns the result, the others None."""
    from tensorfabric.transfer.group import init

    group = init(timeout_s=timeout_s, engine=engine, require_transport=require)
    try:
        if group.rank != 0:
            run_bench(group, config)
            return None
        on_row: Callable[[BenchRow], None] | None = None
        if emit is not None:
            bare = BenchResult(config.op, group.size, group.backend, config.dtype, config.codec or "none",
                               transport=group.transport, engine=group.engine)
            emit("\n".join(header_lines(bare, config)))

            def on_row(row: BenchRow) -> None:
                emit(row_line(row))
        steps = len(sizes(config.min_bytes, config.max_bytes, config.factor))
        with (nullcontext(None) if bars is None else bars(f"{config.op} x{group.size}", steps)) as advance:
            return run_bench(group, config, advance, on_row)
    finally:
        group.destroy()


def check_memory(per_rank: int, local_ranks: int, config: BenchConfig, meminfo: str = "/proc/meminfo") -> None:
    """InputError before any rank starts when the sweep cannot fit in this host's available memory."""
    from tensorfabric.units import format_size

    try:
        with open(meminfo) as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return  # not Linux, or an unreadable meminfo: nothing to check against
    if per_rank * local_ranks > available:
        raise InputError(f"--max {format_size(config.max_bytes)}: {config.op} needs about {format_size(per_rank)} "
                         "per rank, "
                         f"{format_size(per_rank * local_ranks)} for {local_ranks} rank(s) on this host, but only "
                         f"{format_size(available)} of memory is available; lower --max")


def sweep(config: BenchConfig, where: Placement, timeout_s: float, engine: str = "auto", require: str = "warn",
          bars: Bars | None = None, emit: Emit | None = None) -> BenchResult | None:
    """Rank 0's result wherever the ranks run (None on the other ranks of a launched job)."""
    from tensorfabric.transfer.launch import launch

    # Lab hosts are namespaces of this machine: their ranks share its memory, as local ranks do.
    check_memory(rank_bytes(config, where.ranks), where.local_ranks, config)
    lab = where.kind == "lab"
    # Inside a namespace rank 0 has no terminal: it draws no bars, and its rows come back with its result.
    args = (config, None if lab else bars, timeout_s, engine, require, None if lab else emit)
    result: BenchResult | None = launch(bench_rank, where, args=args,
                                        timeout_s=timeout_s * 4 + (120 if lab else 60)).get(0)
    return result


def run_benchmark(config: BenchConfig, where: Placement, *, timeout_s: float, engine: str = "auto",
                  require: str = "warn", baseline: bool = False, bars: Bars | None = None,
                  emit: Emit | None = None) -> BenchReport | None:
    """The sweep's report (None on a rank other than 0 of a launched job). ``baseline``: with a codec, also
    sweep uncompressed on the same ranks (a plot's overlay). ``emit``: stream the table's header and rows as
    they are measured (not from lab hosts); the report says whether it did."""
    streamed = emit is not None and where.kind != "lab"
    result = sweep(config, where, timeout_s, engine, require, bars, emit if streamed else None)
    if result is None:
        return None
    base = None
    if baseline and config.codec is not None:
        base = sweep(replace(config, codec=None), where, timeout_s, engine, require, bars)
        if base is None:
            return None
    return BenchReport(result=result, config=config, baseline=base, streamed=streamed)
