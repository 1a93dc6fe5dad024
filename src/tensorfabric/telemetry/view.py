"""The terminal view of ``tensorfabric monitor``: a one-line header, the top ports by paused share, then the active
alerts. A part with nothing to show is one line, not an empty table (a single dump has no paused share yet)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import paused_fractions
from tensorfabric.telemetry.window import Window, subject_of

__all__ = ["alerts_table", "collapse", "render_view", "top_paused"]


def top_paused(window: Window, limit: int = 10) -> list[tuple[str, str, float]]:
    """(subject, direction, paused share of the last interval), largest first."""
    rows = [(subject_of(labels, "priority"), direction, fraction)
            for direction in ("rx", "tx") for labels, fraction in paused_fractions(window, direction)]
    return sorted(rows, key=lambda r: (-r[2], r[0], r[1]))[:limit]


_ORDER = {"critical": 0, "warning": 1, "info": 2}


def collapse(alerts: tuple[Alert, ...] | list[Alert]) -> list[tuple[Alert, int]]:
    """One row per detector and device, at the highest severity (a storm on one NIC raised per priority and per
    direction is one problem to a person), with how many alerts it stands for."""
    groups: dict[tuple[str, str], list[Alert]] = {}
    for a in alerts:
        groups.setdefault((a.detector, a.subject.split(" ", 1)[0]), []).append(a)
    rows = [(min(group, key=lambda a: (_ORDER[a.severity], a.subject)), len(group)) for group in groups.values()]
    return sorted(rows, key=lambda row: (_ORDER[row[0].severity], row[0].detector, row[0].subject))


def alerts_table(alerts: tuple[Alert, ...] | list[Alert]) -> Table:
    rows = collapse(alerts)
    table = Table(title=f"Alerts ({len(rows)})")
    for column in ("severity", "detector", "subject", "recommendation"):
        table.add_column(column, overflow="fold")
    colour = {"critical": "red", "warning": "yellow", "info": "cyan"}
    for a, count in rows:
        subject = a.subject if count == 1 else f"{a.subject} (+{count - 1} more on {a.subject.split(' ', 1)[0]})"
        table.add_row(f"[{colour[a.severity]}]{a.severity}[/]", a.detector, subject,
                      a.recommendation.split(": ")[0].split(". ")[0])
    return table


def render_view(window: Window, alerts: tuple[Alert, ...], *, errors: dict[str, tuple[str, ...]],
                title: str) -> Group:
    # the header is a line of its own: as a table title it wrapped inside a narrow table
    parts: list[RenderableType] = [Text(title)]
    paused = top_paused(window)
    if paused:
        ports = Table()
        for column, justify in (("port", "left"), ("direction", "left"), ("paused", "right")):
            ports.add_column(column, justify=justify)  # type: ignore[arg-type]
        for subject, direction, fraction in paused:
            style = "red" if fraction >= 0.5 else "yellow" if fraction >= 0.05 else ""
            ports.add_row(subject, direction, f"[{style}]{fraction:7.2%}[/]" if style else f"{fraction:7.2%}")
        parts.append(ports)
    else:
        parts.append(Text("no paused share yet: it needs PFC pause-time counters read in two polls"))
    parts.append(alerts_table(alerts) if alerts else Text("no alerts"))
    if errors:
        failed = Table(title="Source errors")
        failed.add_column("source", overflow="fold")
        failed.add_column("error", overflow="fold")
        for name, messages in sorted(errors.items()):
            for message in messages[:3]:
                failed.add_row(name, message)
        parts.append(failed)
    return Group(*parts)
