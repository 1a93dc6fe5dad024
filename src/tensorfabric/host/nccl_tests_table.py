"""The nccl-tests ``*_perf`` table, written: what ``tensorfabric bench`` prints, so one reader reads both.

The same columns, widths and footer as nccl-tests' ``-c 1`` output (``# Out of bounds values``, ``# Avg bus
bandwidth``), which ``host/nccl_tests.py`` parses back. Rows and results are read through protocols: the
transfer layer's bench records fit them, and host does not import transfer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["PerfResult", "PerfRow", "SweepConfig", "footer_lines", "format_table", "header_lines", "row_line"]


class PerfRow(Protocol):
    @property
    def size(self) -> int: ...
    @property
    def count(self) -> int: ...
    @property
    def type(self) -> str: ...
    @property
    def redop(self) -> str: ...
    @property
    def root(self) -> int: ...
    @property
    def time_us(self) -> float: ...
    @property
    def algbw(self) -> float: ...
    @property
    def busbw(self) -> float: ...
    @property
    def wrong(self) -> int | None: ...
    @property
    def wire_bytes(self) -> int | None: ...
    @property
    def max_error(self) -> float | None: ...


class PerfResult(Protocol):
    @property
    def op(self) -> str: ...
    @property
    def nranks(self) -> int: ...
    @property
    def backend(self) -> str: ...
    @property
    def engine(self) -> str: ...
    @property
    def transport(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def codec(self) -> str: ...
    @property
    def rows(self) -> Sequence[PerfRow]: ...
    @property
    def wrong(self) -> int: ...
    @property
    def avg_busbw(self) -> float: ...


class SweepConfig(Protocol):
    @property
    def min_bytes(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def factor(self) -> int: ...
    @property
    def warmup(self) -> int: ...
    @property
    def iters(self) -> int: ...


def header_lines(result: PerfResult, config: SweepConfig | None) -> list[str]:
    lines = [
        f"# tensorfabric bench: {result.op}  nranks {result.nranks}  backend {result.backend}"
        f"  engine {result.engine}" + (f"  transport {result.transport}" if result.transport else "")
        + f"  dtype {result.dtype}  codec {result.codec}",
    ]
    if config is not None:
        lines.append(f"# minBytes {config.min_bytes} maxBytes {config.max_bytes} step: {config.factor}(factor) "
                     f"warmup iters: {config.warmup} iters: {config.iters} validation: 1")
    codec = result.codec != "none"
    # A compressing codec adds what went on the wire and the worst element error; nccl-tests has no such columns.
    extra = f"  {'wire':>12}  {'maxerr':>9}" if codec else ""
    extra_units = f"  {'(B)':>12}  {'':>9}" if codec else ""
    lines += [
        "#",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>9}  {'algbw':>7}  "
        f"{'busbw':>7}  {'#wrong':>6}{extra}",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>9}  {'(GB/s)':>7}  "
        f"{'(GB/s)':>7}  {'':>6}{extra_units}",
    ]
    return lines


def row_line(r: PerfRow) -> str:
    line = (f"  {r.size:>10}  {r.count:>12}  {r.type:>8}  {r.redop:>6}  {r.root:>6}  {r.time_us:>9.1f}  "
            f"{r.algbw:>7.3f}  {r.busbw:>7.3f}  {'N/A' if r.wrong is None else r.wrong:>6}")
    if r.wire_bytes is not None:
        line += f"  {r.wire_bytes:>12}  {'N/A' if r.max_error is None else format(r.max_error, '9.2e'):>9}"
    return line


def footer_lines(result: PerfResult) -> list[str]:
    checked = all(r.wrong is not None for r in result.rows)
    verdict = f"{result.wrong} {'OK' if result.wrong == 0 else 'FAILED'}" if checked else "N/A (not checked: -c 0)"
    return [f"# Out of bounds values : {verdict}",
            f"# Avg bus bandwidth    : {result.avg_busbw:.3f}", "#"]


def format_table(result: PerfResult, config: SweepConfig | None = None) -> str:
    """The result as nccl-tests prints it: header (with the sweep when ``config`` is given), one row per size,
    the out-of-bounds verdict and the average bus bandwidth."""
    return "\n".join([*header_lines(result, config), *(row_line(r) for r in result.rows), *footer_lines(result)])
