"""The text forms operators paste for RDMA counters, read by ``rdma-file:PATH[@DEV/PORT]``.

* ``rdma statistic show`` -- one line per link: ``link mlx5_0/1 rx_write_requests 0 out_of_buffer 135 ...``;
* ``rdma -p statistic show`` -- the same tokens, one ``name value`` per indented line under ``link DEV/PORT``
  (iproute2 prints each counter after a newline and indent in pretty mode);
* ``show_counters``-style dumps -- a header naming ``DEV port N`` (or ``DEV/N``) followed by ``name: value``
  lines;
* ``grep -r . hw_counters`` (or ``counters``) -- ``PATH:VALUE`` lines; the device and port come from a
  ``.../infiniband/DEV/ports/N/...`` path when the grep was run high enough, else from ``@DEV/PORT``.

Command lines pasted with the output (``$ rdma statistic show``) are skipped. Parsing is linear: lines are
split with ``str`` methods, and the only regex is anchored and bounded.
"""

from __future__ import annotations

import re

from tensorfabric.errors import ParseError
from tensorfabric.telemetry.sources.base import to_number

__all__ = ["Link", "parse_rdma_text"]

Link = tuple[str, str, dict[str, float]]

_HEADER = re.compile(r"(?:^|\s)([A-Za-z][\w.-]{0,63})(?:/(\d{1,3})|\s+port\s+(\d{1,3}))\b")
_COMMANDS = ("rdma ", "grep ", "show_counters", "cat ", "for ")


def _is_command(line: str) -> bool:
    """A pasted prompt line: ``$ rdma statistic show``, ``root@h0:~# grep -r . hw_counters``."""
    head, sep, rest = line.partition("$ ") if "$ " in line[:80] else line.partition("# ")
    return bool(sep) and len(head) < 80 and rest.lstrip().startswith(_COMMANDS)


class _Links:
    def __init__(self, default: tuple[str, str]) -> None:
        self.default = default
        self.order: list[tuple[str, str]] = []
        self.values: dict[tuple[str, str], dict[str, float]] = {}
        self.current: tuple[str, str] | None = None

    def put(self, link: tuple[str, str] | None, name: str, value: float) -> None:
        key = link or self.current or self.default
        if key not in self.values:
            self.order.append(key)
            self.values[key] = {}
        self.values[key][name] = value

    def result(self) -> list[Link]:
        return [(dev, port, self.values[(dev, port)]) for dev, port in self.order]


def _link(token: str) -> tuple[str, str] | None:
    dev, sep, port = token.partition("/")
    return (dev, port) if sep and dev and port.isdigit() else None


def _path_link(path: str) -> tuple[tuple[str, str] | None, str]:
    """(device/port from the path if it names them, counter name) for ``.../DEV/ports/N/hw_counters/NAME``."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    name = parts[-1] if parts else ""
    if "ports" in parts:
        at = len(parts) - 1 - parts[::-1].index("ports")
        if 0 < at and at + 1 < len(parts) and parts[at + 1].isdigit():
            return (parts[at - 1], parts[at + 1]), name
    return None, name


def parse_rdma_text(text: str, *, source: str, default: tuple[str, str]) -> tuple[list[Link], list[str]]:
    """[(device, port, {counter: value})] plus one error per unreadable line; ParseError if nothing is a counter.

    ``default`` is the (device, port) for counters whose text does not say where they were read.
    """
    links = _Links(default)
    errors: list[str] = []
    found = 0
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or _is_command(line):
            continue
        tokens = line.split()
        if tokens[0] == "link" and len(tokens) >= 2 and (link := _link(tokens[1])) is not None:
            links.current = link
            pairs = tokens[2:]
            if len(pairs) % 2:
                errors.append(f"{source}:{number}: odd number of 'name value' tokens after link {tokens[1]}")
                pairs = pairs[:-1]
            for name, value_text in zip(pairs[::2], pairs[1::2], strict=True):
                found += _put(links, None, name, value_text, errors, f"{source}:{number}")
            continue
        path, sep, value_text = line.rpartition(":")
        if sep and "/" in path and " " not in path.strip():  # grep -r output
            link, name = _path_link(path.strip())
            found += _put(links, link, name, value_text, errors, f"{source}:{number}")
            continue
        if sep and path and not value_text.strip():  # a header such as "mlx5_0 port 1 hw_counters:"
            header = _HEADER.search(path[:200])
            if header is not None:
                links.current = (header.group(1), header.group(2) or header.group(3))
            continue
        if sep and path and " " not in path.strip():  # show_counters: "name: value"
            found += _put(links, None, path.strip(), value_text, errors, f"{source}:{number}")
            continue
        if len(tokens) == 2 and links.current is not None:  # pretty form: "name value" under "link DEV/PORT"
            found += _put(links, None, tokens[0], tokens[1], errors, f"{source}:{number}")
            continue
        errors.append(f"{source}:{number}: not an rdma counter line: {line[:60]!r}")
    if not found:
        raise ParseError("no RDMA counters found; expected `rdma statistic show` (one-line or -p), show_counters "
                         "output or `grep -r . hw_counters` lines", source=source, excerpt=text[:80])
    return links.result(), errors


def _put(links: _Links, link: tuple[str, str] | None, name: str, value_text: str, errors: list[str],
         where: str) -> int:
    value = to_number(value_text)
    if value is None or value < 0 or not name or len(name) > 128:
        errors.append(f"{where}: {name[:60]!r}: not a counter value: {value_text.strip()[:40]!r}")
        return 0
    links.put(link, name, value)
    return 1
