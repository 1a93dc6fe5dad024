"""nccl-tests and rccl-tests ``*_perf`` output (``doctor --nccl-tests FILE``): per table and size the algbw and busbw
of the out-of-place and in-place runs and ``#wrong``, the footer's average, and the busbw at the largest size as a
fraction of the line rate.

What the tools print (NVIDIA/nccl-tests ``src/util.cu`` @ a0b82b2 and the older ``src/common.cu``; ROCm/rccl-tests
``src/common.cu``)::

    # nccl-tests version 2.19.6 nccl-headers=22903 nccl-library=22903
    # Collective test starting: all_reduce_perf
    #  Rank  0 Group  0 Pid  48210 on    gpu-a17 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
    #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
      8589934592    2147483648     float     sum      -1    43390  197.97  371.19      0    43302  198.37  371.95      0
    # Avg bus bandwidth    : 118.416

A row is read by its shape, not by column position (:mod:`tensorfabric.host.nccl_tests_rows`), so the header is
optional and every era's columns read the same. Tables are told apart by headers, footers, collector origins,
``|``-joined side-by-side pastes, and sizes that start over (a second run pasted below the first, or two runs a
binary built without ``MPI=1`` interleaved).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from tensorfabric.host.nccl_tests_rate import (
    LineRate,
    fraction_of_line_rate,
    line_rate_flag,
    parse_line_rate,
    report_dict,
    resolve_line_rate,
    summary_line,
)
from tensorfabric.host.nccl_tests_rows import (
    Header,
    Placement,
    SizeResult,
    decode_nccl_code,
    name_collective,
    parse_header,
    parse_row,
    row_start,
)
from tensorfabric.intake import Line, ReadReport, Tally, normalise

__all__ = ["BANDWIDTH_BOUND_BYTES", "LINE_RATE_FLOOR", "RING_COLLECTIVES", "LineRate", "NcclTestsReport", "PerfTable",
           "Placement", "SizeResult", "fraction_of_line_rate", "line_rate_flag", "parse_line_rate", "parse_nccl_tests",
           "report_dict", "resolve_line_rate", "summary_line"]

"""nccl-tests prints GB/s with GB = 1e9 bytes (``baseBw = bytes / 1.0E9 / sec``); line rates are bits per second."""
BANDWIDTH_BOUND_BYTES = 1 << 30
"""Below 1 GiB per operation latency and protocol switches (LL/LL128/Simple) still shape busbw; at and above it a
ring collective runs in its bandwidth-bound regime, where NVIDIA's own guidance reads the figure (sweeps to 8G/16G)."""
LINE_RATE_FLOOR = 0.8
"""busbw at >= 1 GiB below 0.8 of the line rate is a finding. A healthy RoCE/IB ring reaches 0.92-0.96 of it: the
maintainers expect 46-48 GB/s per 400 Gb/s NIC (NVIDIA/nccl-tests#290), a GB300 CX-8 RoCE run reached 387 GB/s on
4x800G (NVIDIA/aicr#1413); RoCEv2 framing costs about 2 % at MTU 4096. The failures land far below: 231/400 GB/s with
8x400G (NVIDIA/nccl#2409), 180 -> 10 GB/s without GPUDirect (NVIDIA/nccl#1676). 0.8 keeps margin for run-to-run
spread above it and catches those below it."""
RING_COLLECTIVES = frozenset({"all_reduce", "all_gather", "reduce_scatter"})
"""Collectives whose busbw equals the bottleneck link's bandwidth (doc/PERFORMANCE.md). alltoall's busbw counts
intra-node traffic too (2x the NIC rate on 2 nodes, NVIDIA/nccl-tests#130); broadcast, reduce and sendrecv use a
subset of the NICs: their fraction is reported, never judged."""
Scope = Literal["multi-node", "single-node", "single-rank", "unknown"]

_VERSION = re.compile(r"#? *nccl-tests version (\S{1,40})")
_RCCL_VERSION = re.compile(r"#? *rccl-tests: Version (\S{1,80})")
_NCCL_CODE = re.compile(r"nccl-library=(\d{4,6})")
_NCCL_VERSION = re.compile(r"NCCL version (\d{1,2}\.\d{1,3}\.\d{1,3})")
_STARTING = re.compile(r"#? *Collective test (starting|concluded): ?(\S{1,128})")
_PERF_NAME = re.compile(r"(?:^|[\s/=])([a-z][a-z_]{1,40}_perf)(?:_mpi)?(?=$|[\s,;:.)`'\"=])")
_INVOKED = re.compile(r"(?:^|[\s/])([a-z][a-z_]{1,40}_perf)(?:_mpi)? +-[a-zA-Z]")
_DEVICE = re.compile(r"#? *Rank +(\d{1,6}) +(?:Group +\d{1,6} +)?Pid +\d{1,10} +on +(\S{1,253}) +device +\d{1,4}")
_PARAMS = re.compile(r"#? *nThread \d{1,6} nGpus \d{1,4} minBytes \d{1,20} maxBytes (\d{1,20}) step: (\d{1,20})"
                     r"\((factor|bytes)\)")
_REDUCED = re.compile(r"#? *Reducing maxBytes to (\d{1,20})")
_OOB = re.compile(r"#? *Out of bounds values *: *(\d{1,12}) *(OK|FAILED)?")
_AVG = re.compile(r"#? *Avg bus bandwidth *: *([0-9][0-9.eE+-]{0,30}|nan|-?inf) *(OK|FAILED)?")
_KNOWN_COMMENTS = ("Using devices", "Blocking Enabled", "Parallel Init Enabled", "Per-Iteration Report",
                   "Errors with asterisks", "Testing ", "GPU memory usage", "Writing JSON",
                   "skipping json", "error:", "Initializing", "Setting up")


@dataclass(frozen=True, slots=True)
class PerfTable:
    """One ``*_perf`` table: a run of one test binary, as one rank printed it."""

    rows: tuple[SizeResult, ...]
    test: str = ""
    """The binary (``all_reduce_perf``) when the paste names it, else ""."""
    collective: str = ""
    """``all_reduce`` ...: from the name, or inferred from the columns (see ``named``); "" when neither tells."""
    named: bool = False
    ranks: int | None = None
    """Ranks in the device list (``#  Rank  N ... on HOST``), when pasted."""
    hosts: tuple[str, ...] = ()
    avg_busbw: float | None = None
    """The footer's ``Avg bus bandwidth``: the mean over every row, out-of-place and in-place."""
    avg_check: str | None = None
    """``OK``/``FAILED`` after the average when ``NCCL_TESTS_MIN_BW`` was set."""
    out_of_bounds: int | None = None
    origin: str = ""
    """The host, rank or side-by-side column (``column 2``) the table came from."""
    first_line: int = 0
    sweep: tuple[int, int, bool] | None = None
    """``(maxBytes, step, by factor)`` from the ``nThread ...`` line, when pasted."""

    @property
    def cut_short(self) -> bool:
        """The table stops before the sweep's last size: the paste is cut or the run failed part-way."""
        largest = self.largest_size
        if self.sweep is None or largest is None:
            return False
        most, step, factor = self.sweep
        following = largest * step if factor else largest + step
        return step > (1 if factor else 0) and largest > 0 and following <= most

    @property
    def largest_size(self) -> int | None:
        return max((r.size for r in self.rows), default=None)

    @property
    def busbw_at_largest(self) -> float | None:
        """The best busbw (out-of-place or in-place, over the types/ops measured) at the largest size."""
        largest = self.largest_size
        return max((r.busbw for r in self.rows if r.size == largest), default=None)

    @property
    def peak(self) -> SizeResult | None:
        return max(self.rows, key=lambda r: r.busbw, default=None)

    @property
    def wrong_rows(self) -> tuple[SizeResult, ...]:
        return tuple(r for r in self.rows if r.wrong)

    @property
    def scope(self) -> Scope:
        if self.ranks == 1:
            return "single-rank"
        if len(self.hosts) == 1:
            return "single-node"
        return "multi-node" if len(self.hosts) > 1 else "unknown"

    @property
    def title(self) -> str:
        return self.test or (f"{self.collective} (inferred)" if self.collective else "nccl-tests table")

    def to_dict(self) -> dict[str, Any]:
        peak = self.peak
        return {"test": self.test, "collective": self.collective, "collective_from": "name" if self.named else
                "columns" if self.collective else None, "ranks": self.ranks, "hosts": list(self.hosts),
                "scope": self.scope, "origin": self.origin, "first_line": self.first_line,
                "largest_size": self.largest_size, "busbw_at_largest": self.busbw_at_largest,
                "peak_busbw": peak.busbw if peak else None, "peak_size": peak.size if peak else None,
                "avg_busbw": self.avg_busbw, "avg_check": self.avg_check, "out_of_bounds": self.out_of_bounds,
                "wrong_sizes": [r.size for r in self.wrong_rows], "cut_short": self.cut_short,
                "rows": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True, slots=True)
class NcclTestsReport:
    source: str
    tables: tuple[PerfTable, ...]
    read: ReadReport
    version: str | None = None
    """nccl-tests' or rccl-tests' own version, when printed."""
    nccl_version: str | None = None
    independent_runs: bool = False
    """Several processes each ran their own test (rank 0 twice, interleaved tables): a binary built without
    ``MPI=1`` started by mpirun/srun (NVIDIA/nccl-tests#107, #182)."""

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "version": self.version, "nccl_version": self.nccl_version,
                "independent_runs": self.independent_runs, "tables": [t.to_dict() for t in self.tables],
                "read": self.read.to_dict()}


@dataclass(slots=True)
class _Table:
    origin: str
    first_line: int
    test: str
    ranks: int
    hosts: tuple[str, ...]
    sweep: tuple[int, int, bool] | None
    rows: list[SizeResult] = field(default_factory=list)
    last: dict[tuple[str, str, int | None], int] = field(default_factory=dict)
    avg: tuple[float, str | None] | None = None
    oob: int | None = None

    def after(self, row: SizeResult) -> int | None:
        """How far past this table's last size of the row's type/op the row is (None: it cannot follow). Sizes only
        grow within a run; ``-d all``/``-o all`` start them over for each type or op, which keys keep apart."""
        previous = self.last.get(row.key)
        if previous is None:
            return 1 << 62
        return row.size - previous if previous <= row.size else None

    def add(self, row: SizeResult) -> None:
        self.rows.append(row)
        self.last[row.key] = row.size

    def freeze(self) -> PerfTable:
        collective, named = name_collective(self.test, self.rows)
        avg, check = self.avg if self.avg else (None, None)
        return PerfTable(tuple(self.rows), self.test, collective, named, self.ranks or None, self.hosts, avg, check,
                         self.oob, self.origin, self.first_line, self.sweep)


@dataclass(slots=True)
class _Stream:
    """What one origin (host, rank, side-by-side column) printed, read in order."""

    origin: str
    header: Header | None = None
    order: tuple[str, ...] = ("out-of-place", "in-place")
    test: str = ""
    ranks: dict[int, str] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    sweep: tuple[int, int, bool] | None = None
    duplicate_rank: bool = False
    open: list[_Table] = field(default_factory=list)
    done: list[_Table] = field(default_factory=list)
    interleaved: bool = False

    def close(self) -> None:
        self.done.extend(t for t in self.open if t.rows or t.avg or t.oob is not None)
        self.open = []

    def new_run(self) -> None:
        self.close()
        self.header, self.ranks, self.hosts, self.sweep = None, {}, [], None

    def table(self, line: Line) -> _Table:
        table = _Table(self.origin, line.number, self.test, len(self.ranks), tuple(self.hosts), self.sweep)
        self.open.append(table)
        return table

    def place(self, row: SizeResult, line: Line) -> None:
        # the closest successor wins, a repeated size (nccl-tests prints 0-byte rows twice) only when nothing else
        # follows: two interleaved runs then fall apart into their own tables
        fits = [(gap == 0, gap, i) for i, t in enumerate(self.open) if (gap := t.after(row)) is not None]
        if not fits:
            self.table(line).add(row)
            return
        index = min(fits)[2]
        self.interleaved |= any(t.rows for t in self.open[index + 1:])
        self.open[index].add(row)

    def footer(self, line: Line) -> _Table:
        """The open table a footer line belongs to: the first without that footer yet (interleaved runs print
        theirs one after the other), else a row-less table for a footer pasted alone."""
        is_avg = _AVG.match(line.text.strip()) is not None
        for table in self.open:
            if (table.avg is None) if is_avg else (table.oob is None):
                return table
        return self.table(line)


def parse_nccl_tests(data: str | bytes, *, source: str = "<input>") -> NcclTestsReport:
    """Read nccl-tests/rccl-tests output as pasted; ParseError when nothing in it is nccl-tests output."""
    text = normalise(data, source=source, what="nccl-tests output (all_reduce_perf ...)")
    tally = Tally(text, "nccl-tests output")
    reader = _Reader(tally)
    for line in text.lines:
        if line.kind != "blank":
            reader.feed(line)
    tally.require("nccl-tests/rccl-tests *_perf output: rows of size, count, type, time, algbw, busbw "
                  "(e.g. '  8589934592  2147483648  float  sum  -1  43390  197.97  371.19  0 ...')")
    tables = reader.tables()
    tally.sections = max(1, len(tables))
    return NcclTestsReport(source, tables, tally.report(), reader.version, reader.nccl_version,
                           reader.independent_runs)


class _Reader:
    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.streams: dict[str, _Stream] = {}
        self.version: str | None = None
        self.nccl_version: str | None = None
        self.last_name = ""

    @property
    def independent_runs(self) -> bool:
        return any(s.interleaved or s.duplicate_rank for s in self.streams.values())

    def tables(self) -> tuple[PerfTable, ...]:
        out: list[_Table] = []
        for stream in self.streams.values():
            stream.close()
            out.extend(stream.done)
        return tuple(t.freeze() for t in sorted(out, key=lambda t: (t.first_line, t.origin)))

    def feed(self, line: Line) -> None:
        parts = line.text.split("|") if "|" in line.text and line.kind == "text" else [line.text]
        for column, part in enumerate(parts):
            if part.strip():
                origin = f"{line.origin} column {column + 1}".strip() if len(parts) > 1 else line.origin
                self._part(Line(line.number, part, line.kind, line.origin), origin)

    def _stream(self, origin: str) -> _Stream:
        stream = self.streams.get(origin)
        if stream is None:
            stream = self.streams[origin] = _Stream(origin, test=self.last_name)
        return stream

    def _part(self, line: Line, origin: str, *, again: bool = True) -> None:
        text = line.text.strip()
        if line.kind == "command":
            # intake reads "# nccl-tests version ..." as a root prompt ("nccl-tests" looks like a program)
            if not self._marker(line, text, origin):
                self._name(line, text, origin, command=True)
        elif row_start(text):
            self._row(line, origin)
        elif self._marker(line, text, origin) or self._name(line, text, origin, command=False):
            return
        elif again and (rest := _leftover(text)) is not None:
            # a second ambiguous prefix ("host: 3: row") that intake, taking one, left on the line
            self._part(Line(line.number, rest, line.kind, line.origin), origin, again=False)
        elif text.startswith("#") and text.strip("#").strip():
            self.tally.not_understood(line)

    def _row(self, line: Line, origin: str) -> None:
        stream = self._stream(origin)
        row, problem = parse_row(line, stream.header, stream.order)
        if row is None:
            self.tally.not_understood(line)
            self.tally.warn(line, f"nccl-tests row not read: {problem}")
            return
        self.tally.use(line)
        if problem:
            self.tally.warn(line, problem)
        stream.place(row, line)

    def _name(self, line: Line, text: str, origin: str, *, command: bool) -> bool:
        """A command, an invocation quoted in prose (``all_reduce_perf -b 8 ...``) or a ``==== x_perf ====``
        separator names the test that follows; a build log's ``Linking ... all_reduce_perf`` does not."""
        if "_perf" not in text:
            return False
        if command:
            found = _PERF_NAME.search(text)
        elif line.kind == "heading":
            found = _PERF_NAME.fullmatch(text.strip("=# "))
        else:
            found = _INVOKED.search(text)
        if found is None:
            return False
        self.last_name = found[1]
        self._stream(origin).test = found[1]
        for stream in self.streams.values():
            if command:
                stream.new_run()
            if command or not stream.test:
                stream.test = found[1]
        self.tally.use(line)
        return True

    def _marker(self, line: Line, text: str, origin: str) -> bool:
        """A line of nccl-tests' own besides rows: header, device list, footer, version, placement banner."""
        stream = self._stream(origin)
        if (header := parse_header(text)) is not None:
            stream.close()
            stream.header = header
        elif _banner(text):
            stream.order = tuple(w for w in text.replace("#", " ").split() if w in _PLACEMENT_WORDS)
        elif (m := _DEVICE.match(text)) is not None:
            rank = int(m[1])
            stream.duplicate_rank |= rank in stream.ranks
            stream.ranks[rank] = m[2]
            if m[2] not in stream.hosts:
                stream.hosts.append(m[2])
        elif (m := _AVG.match(text)) is not None:
            self._avg(line, stream, m)
        elif (m := _OOB.match(text)) is not None:
            stream.footer(line).oob = int(m[1])
        elif (m := _STARTING.match(text)) is not None:
            self._starting(stream, m[1], m[2])
        elif (m := _PARAMS.match(text)) is not None:
            if stream.ranks or stream.open:
                stream.new_run()
            stream.sweep = (int(m[1]), int(m[2]), m[3] == "factor")
        elif (m := _REDUCED.match(text)) is not None:
            # nccl-tests lowers maxBytes to what GPU memory holds and says so
            stream.sweep = (int(m[1]), *stream.sweep[1:]) if stream.sweep else None
        elif (m := _VERSION.match(text) or _RCCL_VERSION.match(text)) is not None:
            self.version = self.version or m[1].rstrip(",")
            code = _NCCL_CODE.search(text)
            self.nccl_version = self.nccl_version or (decode_nccl_code(code[1]) if code else None)
        elif (m := _NCCL_VERSION.search(text)) is not None and "NCCL INFO" not in text[:60]:
            self.nccl_version = self.nccl_version or m[1]
        elif not text.lstrip("#").lstrip().startswith(_KNOWN_COMMENTS) and not _units_line(text):
            return False
        self.tally.use(line)
        return True

    def _avg(self, line: Line, stream: _Stream, m: re.Match[str]) -> None:
        try:
            value = float(m[1])
        except ValueError:
            self.tally.warn(line, f"Avg bus bandwidth {m[1]!r} is not a number")
            return
        stream.footer(line).avg = (value, m[2])
        if all(t.avg is not None for t in stream.open):
            stream.close()

    def _starting(self, stream: _Stream, which: str, name: str) -> None:
        name = name.removesuffix("_mpi")
        if which == "starting":
            stream.new_run()
            stream.test = self.last_name = name
            return
        for table in [*stream.open, *reversed(stream.done)]:
            if not table.test:
                table.test = name


_PLACEMENT_WORDS = ("out-of-place", "in-place")


def _banner(text: str) -> bool:
    """``#   out-of-place   in-place`` (``(+ per-iteration)`` after each with ``-I``) above the column header."""
    words = text.replace("#", " ").replace("(+ per-iteration)", " ").split()
    return bool(words) and all(w in _PLACEMENT_WORDS for w in words)


_LEFTOVER = re.compile(r"(?:[^\s:#]{1,64}: ?){1,4}")


def _leftover(text: str) -> str | None:
    match = _LEFTOVER.match(text)
    if match is None or text.startswith("rccl-tests:"):
        return None
    rest = text[match.end():].strip()
    return rest if rest[:1] == "#" or row_start(rest) or rest.startswith(("rccl-tests:", "Rank")) else None


def _units_line(text: str) -> bool:
    words = text.lstrip("#").split()
    return words[:2] == ["(B)", "(elements)"]
