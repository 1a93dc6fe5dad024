"""What every reader of pasted counter text shares: the format record the ``file:`` source sniffs with, the context
a block of lines is read in, and the sink that turns cells into Samples.

A format is registered in :data:`FORMATS` (one module per format family registers its entries on import), never
chosen by an if-ladder. It says which lines *open* a block of it (a table header, ``NIC statistics:``), which lines
it can *claim* without a header (for sniffing a headless paste), which commands announce it, and how to start a
:class:`BlockReader`. The reader is fed one :class:`~tensorfabric.intake.Line` at a time and answers whether it used
the line, recognised but could not read it, or does not know it at all.

Values: ``1,200`` is 1200 (SONiC and NX-OS print thousands separators); ``N/A``, ``N/A (no PMA)`` and a lone ``-``
mean the counter is not available, so no Sample is made (never a 0); anything else that is not a finite number is
a warning naming the line, and the rest of the line is still read.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from tensorfabric.intake import Line, Tally
from tensorfabric.registry import Registry
from tensorfabric.samples import Sample, new_sample
from tensorfabric.telemetry.metrics import GENERIC, METRICS
from tensorfabric.telemetry.sources.generic import GenericBudget

__all__ = ["ABSENT", "FORMATS", "BlockReader", "Context", "CounterFormat", "Sink", "Store", "Verdict", "number"]

Verdict = Literal["used", "unknown", "foreign"]
"""``used``: a fact (or the format's own structure) came from the line; ``unknown``: the line is this format's but
no rule reads it (listed as not understood); ``foreign``: not this format's (prose, another tool's output)."""


class _Absent:
    """A counter the tool printed as not available (``N/A``): not a number, and not an error either."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT = _Absent()

# thousands separators only in groups of three, so "1,2" is not 12; no quantified part overlaps the next one
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_ABSENT_WORDS = ("N/A", "n/a", "NA", "-", "--", "N.A.")


def number(text: str) -> float | _Absent | None:
    """A counter cell as a float, :data:`ABSENT` for ``N/A``-like cells, None for anything else."""
    cell = text.strip()
    if not cell or len(cell) > 64:
        return None
    if cell in _ABSENT_WORDS or cell.startswith("N/A"):
        return ABSENT
    if "," in cell:
        if _GROUPED.fullmatch(cell) is None:
            return None
        cell = cell.replace(",", "")
    try:
        value = float(cell)
    except ValueError:
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return value


@dataclass(frozen=True, slots=True)
class Context:
    """Where a block of lines was printed, as far as the paste says."""

    source: str
    """The source name (``file:PATH``); every Sample carries it."""
    time: float
    host: str
    """Host label for NIC-side formats: the host a prompt or collector prefix named, else the monitor's host."""
    switch: str
    """Device label for switch-side formats: the switch a prompt named, else the file's stem."""
    command: str = ""
    """The command (or the title of the heading) the block was printed under ("" when none)."""
    device: str = ""
    """A device the command or a heading names (``ethtool -S eth2``, ``show_counters mlx5_0``)."""
    port: str = ""
    """A port the command names (``rdma statistic show link mlx5_0/1``)."""
    fallback: str = ""
    """The device label for a NIC block nothing names: the file's stem, numbered when several blocks are nameless."""


class Store:
    """Samples of one read, keyed by series (a paste that shows a counter twice keeps the later value)."""

    def __init__(self, tally: Tally, budget: GenericBudget) -> None:
        self.tally = tally
        self.budget = budget
        self.samples: dict[tuple[str, tuple[tuple[str, str], ...]], Sample] = {}
        self.absent = 0
        """Cells printed as not available (``N/A``): read, and deliberately not made into samples."""


class Sink:
    """Where one block's readings go: the shared :class:`Store`, with the block's :class:`Context` bound."""

    def __init__(self, store: Store, context: Context) -> None:
        self.store = store
        self.context = context

    def warn(self, line: Line, message: str) -> None:
        self.store.tally.warn(line, message)

    def put(self, line: Line, metric: str, cell: str, labels: Mapping[str, str], *, scale: float = 1.0,
            what: str = "") -> bool:
        """A Sample from a printed cell; False (with a warning naming the line) when the cell is not a number.

        ``N/A`` cells count as read (True) but make no Sample: the counter is not available, which is not 0.
        """
        value = number(cell)
        if value is ABSENT:
            self.store.absent += 1
            return True
        if value is None:
            self.warn(line, f"{what or metric}: {cell.strip()[:40]!r} is not a number")
            return False
        assert isinstance(value, float)
        return self.put_value(line, metric, value * scale, labels, what=what)

    def put_value(self, line: Line, metric: str, value: float, labels: Mapping[str, str], *, what: str = "") -> bool:
        spec = METRICS[metric]
        if value < 0 and spec.kind == "counter":
            self.warn(line, f"{what or metric}: negative counter value {value:g} (counters never go below 0)")
            return False
        full = {"host": self.context.host, **{k: v for k, v in labels.items() if v != ""}}
        if metric == GENERIC and not self.store.budget.admits(full.get("name", ""), full.get("host", ""),
                                                              full.get("device", ""), full.get("port", ""),
                                                              full.get("queue", "")):
            return True
        sample = new_sample(self.context.time, metric, spec.kind, value, full, self.context.source)
        self.store.samples[sample.series] = sample
        return True

    def generic(self, line: Line, name: str, cell: str, labels: Mapping[str, str]) -> bool:
        """A counter without a canonical name, under the generic family with its raw name.

        The generic family is labelled by name and queue only: a direction becomes a suffix of the name and a
        priority the queue ``prio<N>``, so two such counters never land on one series.
        """
        where = dict(labels)
        direction = where.pop("direction", "")
        priority = where.pop("priority", "")
        if priority and not where.get("queue"):
            where["queue"] = f"prio{priority}"
        full = f"{name}_{direction}" if direction and not name.endswith(f"_{direction}") else name
        return self.put(line, GENERIC, cell, {**where, "name": full}, what=name)


class BlockReader(Protocol):
    """Reads one block of a format, line by line."""

    def feed(self, line: Line) -> Verdict:
        """Read one content line (blank lines are fed too, and their verdict is ignored)."""
        ...

    def finish(self) -> None:
        """The block ended: emit what was held back (values whose labels the block's end decides)."""
        ...


Opener = Callable[[str], bool]
Claim = Callable[[str], int]


def _never(_: str) -> bool:
    return False


def _nothing(_: str) -> int:
    return 0


@dataclass(frozen=True, slots=True)
class CounterFormat:
    """One text form of counters, as the ``file:`` source sniffs and reads it."""

    name: str
    label: str
    """What the read report calls it (``SONiC show pfc counters``)."""
    start: Callable[[Sink], BlockReader]
    opens: Opener = _never
    """A line that starts a block of this format (a header only this format prints)."""
    claims: Claim = _nothing
    """0 when the line is not this format's; 1 when its shape fits; 2 when it also names a counter this format
    knows (sniffing a block that has no header and no command)."""
    command: re.Pattern[str] | None = None
    """Commands (searched in the prompt line's command) whose output is this format."""
    side: Literal["nic", "switch"] = "nic"
    """``switch`` formats label samples with the switch (device = host = switch name) and the printed port."""
    examples: tuple[str, ...] = field(default=())
    """What the format looks like, for the message when nothing in a file is recognised."""


FORMATS: Registry[CounterFormat] = Registry("counter text format", modules=(
    "tensorfabric.telemetry.sources.prom_text",
    "tensorfabric.telemetry.sources.switch_cli.sonic",
    "tensorfabric.telemetry.sources.switch_cli.nxos",
    "tensorfabric.telemetry.sources.switch_cli.eos",
    "tensorfabric.telemetry.sources.switch_cli.junos",
    "tensorfabric.telemetry.sources.switch_cli.mlnx_sdk",
    "tensorfabric.telemetry.sources.rdma_text",
    "tensorfabric.telemetry.sources.ethtool_text",
))
"""Every counter text form ``file:`` reads, in sniffing order (earlier wins a tie)."""
