"""SONiC ``show`` output (sonic-utilities' pfcstat, pfcwd, queuestat and watermarkstat tables).

* ``show pfc counters`` / ``pfcstat -s all`` -- ``Port Rx  PFC0 .. PFC7`` and ``Port Tx`` tables: PFC frames per
  priority; ``--history``: RX pause transitions and total RX pause time (µs) per priority;
* ``show pfcwd stats`` -- ``QUEUE  STATUS  STORM DETECTED/RESTORED  TX OK/DROP ...``: storm state (``N/A`` when
  the watchdog is stopped), detections, restorations, and the packets it dropped;
* ``show queue counters`` (``--all``, ``--trim``, ``--voq``) -- ``Port TxQ Counter/pkts ...`` with multi-ASIC
  ``For namespace asic0:`` and ``Ethernet0 Last cached time was ...`` lines;
* ``show queue watermark``/``persistent-watermark`` and ``show priority-group [persistent-]watermark
  shared|headroom`` / ``drop counters`` -- an ``Egress shared pool occupancy per unicast queue:`` (or ``Ingress
  ...``) title, optionally ``(Namespace asic0)``, then ``Port UC0 ..`` / ``Port PG0 ..`` columns.

Values print with thousands separators (``1,200``); ``N/A`` (an ASIC without the counter, ports of another
namespace) is absent. Queue labels: ``UC3``/``ALL3`` -> ``3``, ``MC10`` -> ``mc10``, ``VOQ3`` -> ``voq3``.
"""

from __future__ import annotations

import re

from tensorfabric.intake import Line
from tensorfabric.telemetry.sources.switch_cli._table import RULE, columns, queue_label, row, snake
from tensorfabric.telemetry.sources.textformat import FORMATS, CounterFormat, Sink, Verdict

__all__ = ["PORT", "switch_labels"]

PORT = re.compile(r"[A-Za-z][\w.|/-]{0,80}?\d(?:[/:.]\d+)*")
"""A port name as switches print it: ``Ethernet0``, ``Ethernet-BP256``, ``Et1/1``, ``testsw|Ethernet0``."""
_PFC_HEADER = re.compile(r"\s*Port (Rx|Tx)(?:\s{2,}PFC\d){1,16}\s*")
_HISTORY_HEADER = re.compile(r"\s*Port\s{2,}Priority\s{2,}RX Pause Transitions\s.*")
_PFCWD_HEADER = re.compile(r"\s*QUEUE\s{2,}STATUS\s{2,}STORM DETECTED/RESTORED\s.*")
_QUEUE_HEADER = re.compile(r"\s*Port\s{2,}(?:TxQ|Voq)\s{2,}(?:Counter/pkts|Trim/pkts)\s.*")
_NAMESPACE = re.compile(r"\s*For namespace ?[\w-]{0,32}:\s*")
_CACHED = re.compile(r"(?:\S{1,80} )?Last cached time(?: for [\w-]{1,32})? was .{0,80}")
_WM_TITLE = re.compile(r"\s*(Egress shared pool occupancy per (unicast|multicast|all) queues?|Ingress shared pool "
                       r"occupancy per PG|Ingress headroom per PG|Ingress PG dropped packets|Egress shared pool "
                       r"occupancy per buffer pool|Ingress shared pool occupancy per buffer pool):"
                       r"(?: \(Namespace [\w-]{1,32}\))?\s*")
_WM_COLUMNS = re.compile(r"\s*Port(?:\s{2,}(?:UC|MC|ALL|PG)\d{1,3}){1,64}\s*")


_SHORT_PORT = re.compile(r"(?:Eth|Et)(\d{1,3}(?:/\d{1,3}){0,2})")


def switch_labels(sink: Sink, port: str) -> dict[str, str]:
    """host = device = the switch; the port in its long form (NX-OS ``Eth1/51`` and EOS ``Et1`` tables name the
    ``Ethernet1/51`` and ``Ethernet1`` other commands and the fabric spec print)."""
    name = sink.context.switch
    short = _SHORT_PORT.fullmatch(port)
    return {"host": name, "device": name, "port": f"Ethernet{short.group(1)}" if short else port}


def _port_row(text: str) -> bool:
    first = text.split(None, 1)[0] if text.strip() else ""
    return PORT.fullmatch(first.rstrip(":")) is not None


# --- show pfc counters ----------------------------------------------------------------------------------------

class _PfcBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.direction = ""
        self.history = False
        self.columns: list[str] = []

    def feed(self, line: Line) -> Verdict:
        text = line.text
        if (m := _PFC_HEADER.fullmatch(text)) is not None:
            self.direction, self.history, self.columns = m.group(1).lower(), False, columns(text)
            return "used"
        if _HISTORY_HEADER.fullmatch(text):
            self.history, self.columns = True, columns(text)
            return "used"
        stripped = text.strip()
        if not stripped:
            return "foreign"
        if RULE.fullmatch(stripped) or _CACHED.fullmatch(stripped):
            return "used"
        if not self.columns or not _port_row(stripped):
            return "foreign"
        cells = row(stripped, len(self.columns))
        if cells is None:
            return "unknown"
        labels = switch_labels(self.sink, cells[0])
        if self.history:
            priority = cells[1].removeprefix("PFC")
            if not priority.isdigit():
                return "unknown"
            where = {**labels, "priority": priority, "direction": "rx"}
            self.sink.put(line, "roce_pfc_pause_transitions_total", cells[2], where, what="RX Pause Transitions")
            self.sink.put(line, "roce_pfc_paused_seconds_total", cells[3], where, scale=1e-6,
                          what="Total RX Pause Time US")
            return "used"
        for name, cell in zip(self.columns[1:], cells[1:], strict=True):
            priority = name.removeprefix("PFC")
            self.sink.put(line, "roce_pfc_pause_frames_total", cell,
                          {**labels, "priority": priority, "direction": self.direction}, what=name)
        return "used"

    def finish(self) -> None:
        return None


# --- show pfcwd stats -----------------------------------------------------------------------------------------

_STATUS = {"stormed": 1.0, "operational": 0.0}


class _PfcwdBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def feed(self, line: Line) -> Verdict:
        stripped = line.text.strip()
        if _PFCWD_HEADER.fullmatch(stripped) or RULE.fullmatch(stripped):
            return "used"
        if not stripped or not _port_row(stripped):
            return "foreign"
        cells = row(stripped, 7)
        port, sep, queue = cells[0].rpartition(":") if cells else ("", "", "")
        if cells is None or not sep or not queue.isdigit():
            return "unknown"
        labels = {**switch_labels(self.sink, port), "queue": queue}
        status = cells[1].lower()
        if status in _STATUS:
            self.sink.put_value(line, "roce_pfcwd_stormed", _STATUS[status], labels)
        elif status != "n/a":
            self.sink.warn(line, f"STATUS {cells[1][:20]!r} is not stormed, operational or N/A")
        # "STORM DETECTED/RESTORED", "TX OK/DROP", "RX OK/DROP"; the LAST columns count since the last storm only
        storms, tx, rx = (self._pair(line, cell) for cell in cells[2:5])
        if storms is not None:
            self.sink.put(line, "roce_pfcwd_storms_detected_total", storms[0], labels, what="STORM DETECTED")
            self.sink.put(line, "roce_pfcwd_storms_restored_total", storms[1], labels, what="STORM RESTORED")
        for direction, counts in (("tx", tx), ("rx", rx)):
            if counts is not None:
                self.sink.generic(line, f"pfcwd_{direction}_ok_packets", counts[0], labels)
                self.sink.put(line, "roce_discards_total", counts[1],
                              {**labels, "direction": direction, "reason": "pfcwd"}, what=f"{direction.upper()} DROP")
        return "used"

    def _pair(self, line: Line, cell: str) -> tuple[str, str] | None:
        left, sep, right = cell.partition("/")
        if not sep:
            self.sink.warn(line, f"{cell[:30]!r} is not two counts such as 1/0")
            return None
        return left, right

    def finish(self) -> None:
        return None


# --- show queue counters --------------------------------------------------------------------------------------

_QUEUE_COLUMNS: dict[str, tuple[str, dict[str, str]]] = {
    "counter/pkts": ("roce_queue_packets_total", {}), "pkts": ("roce_queue_packets_total", {}),
    "packets": ("roce_queue_packets_total", {}),
    "counter/bytes": ("roce_queue_bytes_total", {}), "octets": ("roce_queue_bytes_total", {}),
    "bytes": ("roce_queue_bytes_total", {}),
    "drop/pkts": ("roce_discards_total", {"direction": "tx", "reason": "queue"}),
    "droppkts": ("roce_discards_total", {"direction": "tx", "reason": "queue"}),
    "drops": ("roce_discards_total", {"direction": "tx", "reason": "queue"}),
}


class QueueBlock:
    """``Port TxQ <counters>`` rows (SONiC queuestat; EOS ``show interfaces counters queue`` prints the same shape)."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.columns: list[str] = []

    def feed(self, line: Line) -> Verdict:
        text = line.text
        stripped = text.strip()
        tokens = stripped.split(None, 2)
        if len(tokens) == 3 and tokens[0] == "Port" and tokens[1] in ("TxQ", "Voq"):
            found = columns(text)
            # a header whose double spaces a chat tool collapsed: queue table column names hold no spaces
            self.columns = found if len(found) >= 3 else stripped.split()
            return "used"
        if RULE.fullmatch(stripped) or _NAMESPACE.fullmatch(stripped) or _CACHED.fullmatch(stripped):
            return "used"
        if not stripped or not self.columns or not _port_row(stripped):
            return "foreign"
        cells = row(stripped, len(self.columns))
        queue = queue_label(cells[1]) if cells else None
        if cells is None or queue is None:
            return "unknown"
        labels = {**switch_labels(self.sink, cells[0]), "queue": queue}
        for name, cell in zip(self.columns[2:], cells[2:], strict=True):
            known = _QUEUE_COLUMNS.get(name.lower())
            if known is None:
                dropped = name.lower() in ("drop/bytes", "dropoctets")
                self.sink.generic(line, "queue_dropped_bytes" if dropped else f"queue_{snake(name)}", cell, labels)
            else:
                self.sink.put(line, known[0], cell, {**labels, **known[1]}, what=name)
        return "used"

    def finish(self) -> None:
        return None


# --- watermarks and PG drops ----------------------------------------------------------------------------------

_WM_METRICS = {
    "egress shared pool occupancy per unicast queue": ("roce_queue_watermark_bytes", "queue"),
    "egress shared pool occupancy per multicast queue": ("roce_queue_watermark_bytes", "queue"),
    "egress shared pool occupancy per all queues": ("roce_queue_watermark_bytes", "queue"),
    "ingress shared pool occupancy per pg": ("roce_pg_shared_watermark_bytes", "priority"),
    "ingress headroom per pg": ("roce_pg_headroom_watermark_bytes", "priority"),
    "ingress pg dropped packets": ("roce_discards_total", "priority"),
}


class _WatermarkBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.metric: tuple[str, str] | None = None
        self.columns: list[str] = []
        command = sink.context.command
        self.persistent = "persistent" in command
        if "headroom" in command:
            self.metric = _WM_METRICS["ingress headroom per pg"]
        elif "priority-group" in command and "shared" in command:
            self.metric = _WM_METRICS["ingress shared pool occupancy per pg"]
        elif "drop" in command:
            self.metric = _WM_METRICS["ingress pg dropped packets"]
        elif "queue" in command and "watermark" in command:
            self.metric = _WM_METRICS["egress shared pool occupancy per unicast queue"]

    def feed(self, line: Line) -> Verdict:
        text = line.text
        if (m := _WM_TITLE.fullmatch(text)) is not None:
            self.metric, self.columns = _WM_METRICS.get(m.group(1).lower()), []
            return "used"
        if _WM_COLUMNS.fullmatch(text):
            self.columns = columns(text)
            return "used"
        stripped = text.strip()
        if RULE.fullmatch(stripped) or _NAMESPACE.fullmatch(stripped):
            return "used"
        if not stripped or not _port_row(stripped):
            return "foreign"
        if not self.columns:
            return "unknown"
        cells = row(stripped, len(self.columns))
        if cells is None:
            return "unknown"
        if self.metric is None:
            return "used"  # a buffer-pool table: pools, not ports, and no canonical name
        metric, by = self.metric
        labels = switch_labels(self.sink, cells[0])
        for name, cell in zip(self.columns[1:], cells[1:], strict=True):
            index = queue_label(name) if by == "queue" else name.removeprefix("PG")
            where = {**labels, by: index or name}
            if metric == "roce_discards_total":
                self.sink.put(line, metric, cell, {**where, "direction": "rx", "reason": "pg"}, what=name)
            elif self.persistent:
                self.sink.generic(line, f"persistent_{metric.removeprefix('roce_')}", cell, where)
            else:
                self.sink.put(line, metric, cell, where, what=name)
        return "used"

    def finish(self) -> None:
        return None


def _queue_opens(text: str) -> bool:
    stripped = text.strip()
    return bool(_QUEUE_HEADER.fullmatch(text) or _NAMESPACE.fullmatch(stripped)
                or (_CACHED.fullmatch(stripped) and not stripped.startswith("Last")))


FORMATS.register("sonic-pfc", CounterFormat(
    name="sonic-pfc", label="SONiC show pfc counters", start=_PfcBlock, side="switch",
    opens=lambda text: bool(_PFC_HEADER.fullmatch(text) or _HISTORY_HEADER.fullmatch(text)),
    command=re.compile(r"show pfc counters|\bpfcstat\b"),
    examples=("  Port Rx    PFC0    PFC1 ...",)))
FORMATS.register("sonic-pfcwd", CounterFormat(
    name="sonic-pfcwd", label="SONiC show pfcwd stats", start=_PfcwdBlock, side="switch",
    opens=lambda text: _PFCWD_HEADER.fullmatch(text) is not None,
    command=re.compile(r"pfcwd (?:show )?stats|show pfcwd stat"),
    examples=("      QUEUE    STATUS    STORM DETECTED/RESTORED ...",)))
FORMATS.register("sonic-queue", CounterFormat(
    name="sonic-queue", label="SONiC show queue counters", start=QueueBlock, side="switch", opens=_queue_opens,
    command=re.compile(r"show queue counters?|\bqueuestat\b"),
    examples=("     Port    TxQ    Counter/pkts    Counter/bytes    Drop/pkts    Drop/bytes",)))
FORMATS.register("sonic-watermark", CounterFormat(
    name="sonic-watermark", label="SONiC show queue/priority-group watermark", start=_WatermarkBlock, side="switch",
    opens=lambda text: bool(_WM_TITLE.fullmatch(text) or _WM_COLUMNS.fullmatch(text)),
    command=re.compile(r"show (?:queue|priority-group) (?:persistent-)?watermark|show priority-group drop|"
                       r"\bwatermarkstat\b|\bpg-drop\b"),
    examples=("Egress shared pool occupancy per unicast queue:",)))
