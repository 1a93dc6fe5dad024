"""The text forms operators paste for RDMA counters, read by ``rdma-file:PATH[@DEV/PORT]`` and by ``file:``.

* ``rdma statistic show`` -- one line per link: ``link mlx5_0/1 rx_write_requests 0 out_of_buffer 135 ...``;
* ``rdma -p statistic show`` -- the same tokens, one ``name value`` per indented line under ``link DEV/PORT``
  (iproute2 prints each counter after a newline and indent in pretty mode);
* ``show_counters``-style dumps -- a header naming ``DEV port N`` (or ``DEV/N``) followed by ``name: value``
  lines; EFA's ``name : value`` is the same with a space before the colon;
* ``grep -r . hw_counters`` (or ``counters``) -- ``PATH:VALUE`` lines; the device and port come from a
  ``.../infiniband/DEV/ports/N/...`` path when the grep was run high enough, else from ``@DEV/PORT``;
* hw_counters printed by a shell loop (``for f in hw_counters/*; do printf "%-30s %s\\n" ...``) -- ``name  value``
  columns.

``N/A`` and ``N/A (no PMA)`` (a counter the device does not implement) are read as absent, never as 0 and never as
an error. Command lines pasted with the output (``$ rdma statistic show``) are skipped. Parsing is linear: lines are
split with ``str`` methods, and the only regexes are anchored and bounded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tensorfabric.errors import ParseError
from tensorfabric.intake import Line
from tensorfabric.telemetry.sources.base import to_number
from tensorfabric.telemetry.sources.hwcounters import HW_COUNTERS, PMA_COUNTERS
from tensorfabric.telemetry.sources.textformat import FORMATS, CounterFormat, Sink, Verdict, number

__all__ = ["EFA_COUNTERS", "Link", "parse_rdma_text"]

Link = tuple[str, str, dict[str, float]]

_HEADER = re.compile(r"(?:^|\s)([A-Za-z][\w.-]{0,63})(?:/(\d{1,3})|\s+port\s+(\d{1,3}))\b")
_COMMANDS = ("rdma ", "grep ", "show_counters", "cat ", "for ")
_NAME = re.compile(r"[A-Za-z][\w.]{0,127}")
_TABLE = {**PMA_COUNTERS, **HW_COUNTERS}

EFA_COUNTERS = frozenset((
    "tx_bytes", "tx_pkts", "rx_bytes", "rx_pkts", "rx_drops", "send_bytes", "send_wrs", "recv_bytes", "recv_wrs",
    "rdma_read_wrs", "rdma_read_bytes", "rdma_read_wr_err", "rdma_read_resp_bytes", "rdma_write_wrs",
    "rdma_write_bytes", "rdma_write_wr_err", "rdma_write_recv_bytes", "retrans_bytes", "retrans_pkts",
    "retrans_timeout_events", "impaired_remote_conn_events", "unresponsive_remote_events", "lifespan"))
"""AWS EFA hw_counters (drivers/infiniband/hw/efa/efa_verbs.c): EFA is not RoCE, so none of them is given a RoCE
name; they are read into the generic family under their own names."""
_KNOWN = frozenset(_TABLE) | EFA_COUNTERS | frozenset((
    "port_xmit_wait", "port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors", "local_link_integrity_errors",
    "link_error_recovery", "VL15_dropped", "port_rcv_constraint_errors", "port_xmit_constraint_errors",
    "port_multicast_rcv_packets", "port_multicast_xmit_packets", "port_unicast_rcv_packets",
    "port_unicast_xmit_packets", "unicast_rcv_packets", "unicast_xmit_packets", "multicast_rcv_packets",
    "multicast_xmit_packets", "rnr_nak_retry_err", "resp_local_length_error", "rx_icrc_encapsulated"))


def _is_command(line: str) -> bool:
    """A pasted prompt line: ``$ rdma statistic show``, ``root@h0:~# grep -r . hw_counters``."""
    head, sep, rest = line.partition("$ ") if "$ " in line[:80] else line.partition("# ")
    return bool(sep) and len(head) < 80 and rest.lstrip().startswith(_COMMANDS)


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


@dataclass(frozen=True, slots=True)
class _Parsed:
    kind: str
    """``link`` (sets the link; may carry pairs), ``header`` (sets the link), ``path`` (grep), ``pair``."""
    link: tuple[str, str] | None
    pairs: tuple[tuple[str, str], ...] = ()
    odd: bool = False


def _parse(line: str) -> _Parsed | None:
    """What one line of any rdma text form says, or None when it is none of them."""
    stripped = line.strip()
    tokens = stripped.split()
    if not tokens:
        return None
    if tokens[0] == "link" and len(tokens) >= 2 and (link := _link(tokens[1])) is not None:
        rest = tokens[2:]
        pairs = tuple(zip(rest[::2], rest[1::2], strict=False))
        return _Parsed("link", link, pairs, odd=len(rest) % 2 == 1)
    path, sep, value = stripped.rpartition(":")
    path = path.strip()
    if sep and path and " " not in path:
        if "/" in path:
            link, name = _path_link(path)
            return _Parsed("path", link, ((name, value),)) if name else None
        if value.strip():
            return _Parsed("pair", None, ((path, value),))
    if sep and path and not value.strip():  # a header such as "mlx5_0 port 1 hw_counters:"
        header = _HEADER.search(path[:200])
        if header is not None:
            return _Parsed("header", (header.group(1), header.group(2) or header.group(3)))
        return None
    if len(tokens) >= 2 and _NAME.fullmatch(tokens[0]) and (len(tokens) == 2 or tokens[1].startswith("N/A")):
        return _Parsed("pair", None, ((tokens[0], " ".join(tokens[1:])),))
    return None


def parse_rdma_text(text: str, *, source: str, default: tuple[str, str]) -> tuple[list[Link], list[str]]:
    """[(device, port, {counter: value})] plus one error per unreadable line; ParseError if nothing is a counter.

    ``default`` is the (device, port) for counters whose text does not say where they were read. ``N/A`` values
    are skipped: the counter is not available.
    """
    order: list[tuple[str, str]] = []
    values: dict[tuple[str, str], dict[str, float]] = {}
    current: tuple[str, str] | None = None
    errors: list[str] = []
    found = 0
    for number_, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.strip()
        if not line or _is_command(line):
            continue
        parsed = _parse(line)
        where = f"{source}:{number_}"
        if parsed is None:
            errors.append(f"{where}: not an rdma counter line: {line[:60]!r}")
            continue
        if parsed.kind in ("link", "header"):
            current = parsed.link
        if parsed.odd:
            errors.append(f"{where}: odd number of 'name value' tokens after link {parsed.link}")
        key = parsed.link if parsed.kind == "path" and parsed.link is not None else current or default
        for name, value_text in parsed.pairs:
            value = to_number(value_text)
            if value_text.strip().startswith("N/A"):
                continue
            if value is None or value < 0 or not name or len(name) > 128:
                errors.append(f"{where}: {name[:60]!r}: not a counter value: {value_text.strip()[:40]!r}")
                continue
            if key not in values:
                order.append(key)
                values[key] = {}
            values[key][name] = value
            found += 1
    if not found:
        raise ParseError("no RDMA counters found; expected `rdma statistic show` (one-line or -p), show_counters "
                         "output or `grep -r . hw_counters` lines", source=source, excerpt=text[:80])
    return [(dev, port, values[(dev, port)]) for dev, port in order], errors


# --- the file: format ---------------------------------------------------------------------------------------------

class _RdmaBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        ctx = sink.context
        self.default = (ctx.device or ctx.fallback, ctx.port or "1")
        self.current: tuple[str, str] | None = None

    def feed(self, line: Line) -> Verdict:
        parsed = _parse(line.text)
        if parsed is None:
            return "foreign"
        if parsed.kind in ("link", "header"):
            self.current = parsed.link
        if parsed.odd:
            self.sink.warn(line, f"odd number of 'name value' tokens after link {parsed.link[0]}/{parsed.link[1]}"
                           if parsed.link else "odd number of 'name value' tokens")
        where = parsed.link if parsed.kind == "path" and parsed.link is not None else self.current or self.default
        if parsed.kind == "pair" and parsed.pairs[0][0] not in _KNOWN and number(parsed.pairs[0][1]) is None:
            return "foreign"  # "Update: same result" is prose, not a counter
        for name, cell in parsed.pairs:
            self._put(line, where, name, cell)
        return "used"

    def _put(self, line: Line, where: tuple[str, str], name: str, cell: str) -> None:
        labels = {"device": where[0], "port": where[1]}
        entry = _TABLE.get(name)
        if entry is None:
            self.sink.generic(line, name, cell, labels)
            return
        metric, extra, scale = entry
        self.sink.put(line, metric, cell, {**labels, **extra}, scale=scale, what=name)

    def finish(self) -> None:
        return None


def _opens(line: str) -> bool:
    stripped = line.strip()
    if stripped.startswith("link "):
        parsed = _parse(stripped)
        return parsed is not None and parsed.kind == "link"
    if stripped.endswith(":") and " port " in stripped[:200]:
        parsed = _parse(stripped)
        return parsed is not None and parsed.kind == "header"
    return False


def _claims(line: str) -> int:
    parsed = _parse(line)
    if parsed is None or not parsed.pairs:
        return 0
    name, cell = parsed.pairs[0]
    if number(cell) is None:
        return 0
    if parsed.kind == "path":
        return 2 if "counters/" in line else 1
    if name in _KNOWN:
        return 2
    # an unknown "name: value" is as much ethtool's as ours; "name  value" columns are ours when the name reads
    # like a counter ("slot  1" in a switch banner does not)
    return 0 if ":" in line or "_" not in name else 1


FORMATS.register("rdma-text", CounterFormat(
    name="rdma-text", label="RDMA counters (rdma statistic / hw_counters)", start=_RdmaBlock, opens=_opens,
    claims=_claims,
    command=re.compile(r"\brdma\b.*\bstat|show_counters|hw_counters|/sys/class/infiniband/|\bperfquery\b"),
    examples=("link mlx5_0/1 out_of_buffer 0 np_cnp_sent 12", "np_cnp_sent  12",
              "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/np_cnp_sent:12")))
