"""``rdma-json:PATH`` / ``rdma:`` / ``rdma-file:PATH[@DEV/PORT]`` -- RDMA port counters as operators capture them.

``rdma -j statistic show`` (iproute2) is a list with one object per link: ``ifname``, ``port`` and the
counters, flat (iproute2 prints them at the top level) or under a ``counters`` object; both are accepted.
``rdma-file:`` reads that JSON or any of the text forms in rdma_text.py. Counter names are those of
hw_counters and counters/ (hwcounters.py); other names go to the generic family.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tensorfabric.errors import InputError, ParseError
from tensorfabric.jsonload import load_json
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources.base import Reading, SourceContext, capture_or_run
from tensorfabric.telemetry.sources.generic import GenericBudget
from tensorfabric.telemetry.sources.hwcounters import HW_COUNTERS, PMA_COUNTERS, samples_for
from tensorfabric.telemetry.sources.rdma_text import parse_rdma_text

_BOTH = {**PMA_COUNTERS, **HW_COUNTERS}

__all__ = ["RdmaSource", "parse_rdma_json"]


def parse_rdma_json(text: str, *, source: str = "<rdma>") -> tuple[list[tuple[str, str, dict[str, float]]], list[str]]:
    """[(device, port, {counter: value})] plus one error per non-numeric counter; ParseError if not the format."""
    data: Any = load_json(text, what="a JSON list of links as `rdma -j statistic show` prints", source=source)
    if not isinstance(data, list):
        raise ParseError("expected a JSON list of links as `rdma -j statistic show` prints", source=source,
                         excerpt=text[:80])
    links: list[tuple[str, str, dict[str, float]]] = []
    errors: list[str] = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict) or not isinstance(entry.get("ifname"), str) or "port" not in entry:
            errors.append(f"{source}: entry {index} has no ifname/port: {str(entry)[:60]!r}")
            continue
        counters = entry.get("counters", entry)
        if not isinstance(counters, dict):
            errors.append(f"{source}: entry {index}: counters is not an object")
            continue
        values: dict[str, float] = {}
        for name, value in counters.items():
            if name in ("ifname", "ifindex", "port", "counters"):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                errors.append(f"{source}: {entry['ifname']}/{entry['port']} {name}: not a counter: {value!r}"[:160])
                continue
            values[str(name)] = float(value)
        links.append((entry["ifname"], str(entry["port"]), values))
    return links, errors


def _is_json(text: str) -> bool:
    try:
        load_json(text, what="JSON", source="")
    except ParseError:
        return False
    return True


class RdmaSource:
    def __init__(self, name: str, ctx: SourceContext, path: Path | None, *, text_forms: bool = False,
                 default: tuple[str, str] = ("", "")) -> None:
        self.name = name
        self._ctx = ctx
        self._path = path
        self._text_forms = text_forms
        self._default = default
        self._budget = GenericBudget(ctx.counters, name)

    def read(self) -> Reading:
        text = capture_or_run(self.name, self._path, self._ctx, ["rdma", "-j", "statistic", "show"])
        now = self._ctx.clock()
        # a pasted "[user@host ~]$ rdma statistic show" starts with "[" too: JSON only when it parses as JSON
        if self._text_forms and not (text.lstrip().startswith("[") and _is_json(text)):
            links, errors = parse_rdma_text(text, source=self.name, default=self._default)
        else:
            links, errors = parse_rdma_json(text, source=self.name)
        samples: list[Sample] = []
        for device, port, values in links:
            labels = {"host": self._ctx.host, "device": device, "port": port}
            samples += samples_for(values, _BOTH, time=now, labels=labels, source=self.name, budget=self._budget)
        self._budget.report(errors)
        return Reading(tuple(samples), tuple(errors))


def open_file(arg: str, ctx: SourceContext) -> RdmaSource:
    path = Path(arg)
    if not arg or not path.is_file():
        raise InputError(f"rdma-json:{arg}: {arg!r} is not a file (expected saved `rdma -j statistic show` output)")
    return RdmaSource(f"rdma-json:{arg}", ctx, path)


def open_text_file(arg: str, ctx: SourceContext) -> RdmaSource:
    """``rdma-file:PATH[@DEV/PORT]``: any rdma text form or the JSON; ``@DEV/PORT`` for dumps that do not say
    (a ``grep`` run inside ``hw_counters/``); without it such counters carry the file's stem as device."""
    path_text, _, where = arg.partition("@")
    path = Path(path_text)
    if not path_text or not path.is_file():
        raise InputError(f"rdma-file:{arg}: {path_text!r} is not a file (expected saved `rdma statistic show`, "
                         "show_counters or `grep -r . hw_counters` output)")
    device, sep, port = where.partition("/")
    if where and (not sep or not device or not port.isdigit()):
        raise InputError(f"rdma-file:{arg}: {where!r} is not DEV/PORT such as mlx5_0/1")
    return RdmaSource(f"rdma-file:{arg}", ctx, path, text_forms=True, default=(device or path.stem, port))


def open_live(arg: str, ctx: SourceContext) -> RdmaSource:
    if arg:
        raise InputError(f"rdma:{arg}: the live rdma source takes no argument; write 'rdma:'")
    return RdmaSource("rdma:", ctx, None)
