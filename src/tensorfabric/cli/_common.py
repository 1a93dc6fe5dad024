"""Shared CLI plumbing: unit-aware parameter types, JSON output, tables and progress bars."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

import click

from tensorfabric import units
from tensorfabric.errors import InputError
from tensorfabric.findings import Finding, sort_key
from tensorfabric.jsonable import json_default

if TYPE_CHECKING:  # rich is imported where output is drawn: verbs that write files or JSON never load it
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "DURATION",
    "LENGTH",
    "RATE",
    "SIZE",
    "UnitType",
    "choice_error",
    "console",
    "emit_json",
    "findings_table",
    "progress",
    "render_findings",
]


class UnitType(click.ParamType):  # type: ignore[type-arg]
    """A click parameter that parses with one of :mod:`tensorfabric.units`' parsers."""

    def __init__(self, name: str, parse: Callable[[str], Any]) -> None:
        self.name = name
        self._parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        try:
            return self._parse(value)
        except InputError as exc:
            self.fail(str(exc), param, ctx)


SIZE = UnitType("size", units.parse_size)
RATE = UnitType("rate", units.parse_rate)
DURATION = UnitType("duration", units.parse_duration)
LENGTH = UnitType("length", units.parse_length)


def choice_error(what: str, value: str, accepted: Sequence[str]) -> InputError:
    return InputError(f"{what}: {value!r} is not one of {', '.join(accepted)}")


PIPE_WIDTH = 10_000
"""Console width when output is not a terminal (a CI log, ``| tee``, ``ssh host cmd``): wide enough that no table
cell is folded, so a rule id, a command in the fix column or a sysfs path can be pasted back whole."""


def console(stream: TextIO | None = None) -> Console:
    """A rich console on stdout (or ``stream``) for human output; unbounded width when it is not a terminal."""
    from rich.console import Console

    out = stream or sys.stdout
    isatty = getattr(out, "isatty", None)
    wide = None if callable(isatty) and isatty() else PIPE_WIDTH
    return Console(file=out, highlight=False, soft_wrap=False, width=wide)


def emit_json(obj: Any, stream: TextIO | None = None) -> None:
    """Machine output: one JSON document on stdout."""
    out = stream or sys.stdout
    out.write(json.dumps(obj, indent=2, sort_keys=False, default=json_default) + "\n")
    out.flush()


def findings_table(findings: Sequence[Finding], title: str = "Findings") -> Table:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for col in ("severity", "rule", "subject", "message", "fix"):
        table.add_column(col, overflow="fold")
    colour = {"error": "red", "warning": "yellow", "info": "cyan"}
    for f in sorted(findings, key=sort_key):
        table.add_row(f"[{colour[f.severity]}]{f.severity}[/]", f.rule, f.subject, f.message, f.fix)
    return table


def render_findings(findings: Sequence[Finding], *, as_json: bool, extra: Mapping[str, Any] | None = None,
                    title: str = "Findings") -> None:
    if as_json:
        emit_json({"findings": [f.to_dict() for f in sorted(findings, key=sort_key)], **(extra or {})})
        return
    con = console()
    if findings:
        con.print(findings_table(findings, title=title))
    else:
        con.print("[green]no findings[/]")


@contextmanager
def progress(description: str, total: float | None, *, enabled: bool | None = None) -> Iterator[
        Callable[[float], None]]:
    """A progress bar (drawn on stderr) while stdout is a terminal; silent otherwise.

    Yields ``advance(n)``.
    """
    show = sys.stdout.isatty() if enabled is None else enabled
    if not show:
        def ignore(n: float = 1.0) -> None:
            return None

        yield ignore
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(),
               TextColumn("{task.completed:.0f}/{task.total:.0f}"), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(n: float = 1.0) -> None:
            bar.advance(task, n)

        yield advance
