"""Cisco NX-OS ``show`` output.

* ``show interface priority-flow-control`` -- ``Port  Mode Oper(VL bmap)  RxPPP  TxPPP`` rows (``Ethernet1/2  Auto
  On (8)  4088353  1890``, ``Eth1/1  ON  On(8)  4885  3709920``): per-port pause frames and whether PFC is
  operationally on (``Auto Off`` with moving counters is a DCBX mismatch); ``... detail``: per-priority Rx/Tx rows;
* ``show queuing interface`` -- ``Egress Queuing for Ethernet1/51 [System]``, ``| QOS GROUP 5 |`` blocks of
  ``| Tx Pkts | <unicast>| <multicast>|`` rows, ingress drop lines, ``PFC Statistics`` (``TxPPP: 150, RxPPP: 0``
  and the per-COS TxPause/TxCount/RxPause/RxCount table);
* ``show interface counters`` -- ``Port  InOctets  InUcastPkts`` style column pairs;
* ``show interface`` -- the ``N Rx pause`` / ``N Tx pause`` and discard lines of each ``EthernetX is up`` block.

Per-slice statistics (``Per Slice Ingress Statistics``) are the ASIC slice's, not the port's: read, not sampled.
"""

from __future__ import annotations

import re

from tensorfabric.intake import Line
from tensorfabric.telemetry.sources.switch_cli._table import RULE, columns, snake
from tensorfabric.telemetry.sources.switch_cli.sonic import PORT, switch_labels
from tensorfabric.telemetry.sources.textformat import FORMATS, CounterFormat, Sink, Verdict, number

__all__: list[str] = []

_PFC_HEADER = re.compile(r"\s*Port\s+Mode\s+Oper\s?\(VL bmap\)(\s+RxPPP\s+TxPPP)?\s*")
_BARE_PORT = re.compile(r"\s*((?:Ethernet|Eth)\d{1,3}(?:/\d{1,3}){1,2})\s*")
_QUEUING = re.compile(r"\s*(Egress|Ingress) Queuing for (\S{1,64})(?: \[\w{1,32}\])?\s*")
_QOS_GROUP = re.compile(r"\|?\s*(?:(CONTROL|SPAN) )?QOS GROUP (\d{1,2})\s*\|?")
_PPP = re.compile(r"\s*TxPPP:\s*([\d,]{1,24}),\s*RxPPP:\s*([\d,]{1,24})\s*")
_STAT = re.compile(r"\s*([A-Za-z][A-Za-z &/-]{2,60}?)\s+([\d,]{1,24})\s*")
_COUNTERS_HEADER = re.compile(r"\s*Port(?:\s{2,}(?:In|Out)(?:Octets|UcastPkts|McastPkts|BcastPkts)){1,4}\s*")
_INTERFACE = re.compile(r"\s*((?:Ethernet|Eth|port-channel|Po)\d{1,4}(?:/\d{1,3}){0,2}) is (?:up|down)\b.*")
_PAUSE = re.compile(r"\s*([\d,]{1,24}) (Rx|Tx) pause\s*")
_IF_STAT = re.compile(r"([\d,]{1,24}) (input|output) (discard|packets)(?:\s+([\d,]{1,24}) bytes)?")
_UNICAST = re.compile(r"\s*([\d,]{1,24}) unicast packets\b.*")
_ROWS = {"tx pkts": ("roce_queue_packets_total", {}), "tx byts": ("roce_queue_bytes_total", {}),
         "dropped pkts": ("roce_discards_total", {"direction": "tx", "reason": "queue"}),
         "wred/afd & tail drop pkts": ("roce_discards_total", {"direction": "tx", "reason": "queue"}),
         "q depth byts": ("roce_queue_occupancy_bytes", {})}
_PORT_DROPS = ("ingress mmu drop pkts", "ingress overflow drop pkts")
_COUNTER_COLUMNS = {"inoctets": ("roce_bytes_total", "rx"), "outoctets": ("roce_bytes_total", "tx"),
                    "inucastpkts": ("roce_packets_total", "rx"), "outucastpkts": ("roce_packets_total", "tx")}


def _cells(text: str) -> list[str]:
    """The cells of a ``|``-ruled row, without the empty ones its outer rules leave (a collector may have taken
    the first ``|`` off with a timestamp)."""
    cells = [c.strip() for c in text.split("|")]
    while cells and cells[0] == "":
        cells.pop(0)
    while cells and cells[-1] == "":
        cells.pop()
    return cells


def _on_off(word: str) -> float | None:
    word = word.lower()
    return 1.0 if word.startswith("on") else 0.0 if word.startswith("off") else None


# --- show interface priority-flow-control ---------------------------------------------------------------------

class _PfcBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.counters = True

    def feed(self, line: Line) -> Verdict:
        text = line.text
        if (m := _PFC_HEADER.fullmatch(text)) is not None:
            self.counters = m.group(1) is not None
            return "used"
        stripped = text.strip()
        if RULE.fullmatch(stripped):
            return "used"
        tokens = stripped.split()
        if len(tokens) < 3 or PORT.fullmatch(tokens[0]) is None:
            return "foreign"
        labels = switch_labels(self.sink, tokens[0])
        state = _on_off(tokens[2])
        if state is None:
            return "unknown"
        self.sink.put_value(line, "roce_pfc_operational", state, labels)
        if self.counters:
            if len(tokens) < 5:
                return "unknown"
            self.sink.put(line, "roce_pause_ctrl_frames_total", tokens[-2], {**labels, "direction": "rx"},
                          what="RxPPP")
            self.sink.put(line, "roce_pause_ctrl_frames_total", tokens[-1], {**labels, "direction": "tx"},
                          what="TxPPP")
        return "used"

    def finish(self) -> None:
        return None


class _PfcDetailBlock:
    """One interface of ``show interface priority-flow-control detail``."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.port = ""
        self.priorities: list[str] = []

    def feed(self, line: Line) -> Verdict:
        stripped = line.text.strip()
        if (m := _BARE_PORT.fullmatch(stripped)) is not None:
            self.port = m.group(1)
            return "used"
        if not self.port:
            return "foreign"
        labels = switch_labels(self.sink, self.port)
        key, sep, value = stripped.partition(":")
        if sep and key in ("Admin Mode", "Oper Mode", "VL bitmap", "Total Rx PFC Frames", "Total Tx PFC Frames"):
            if key == "Oper Mode" and (state := _on_off(value.strip())) is not None:
                self.sink.put_value(line, "roce_pfc_operational", state, labels)
            elif key.startswith("Total"):
                direction = "rx" if " Rx " in key else "tx"
                self.sink.put(line, "roce_pause_ctrl_frames_total", value, {**labels, "direction": direction},
                              what=key)
            return "used"
        if RULE.fullmatch(stripped):
            return "used"
        cells = _cells(stripped)
        if cells and all(c.startswith("Priority") for c in cells):
            self.priorities = [c.removeprefix("Priority") for c in cells]
            return "used"
        if cells and cells[0] in ("Rx", "Tx") and self.priorities and len(cells) == len(self.priorities) + 1:
            for priority, cell in zip(self.priorities, cells[1:], strict=True):
                self.sink.put(line, "roce_pfc_pause_frames_total", cell,
                              {**labels, "priority": priority, "direction": cells[0].lower()})
            return "used"
        return "foreign"

    def finish(self) -> None:
        return None


# --- show queuing interface -----------------------------------------------------------------------------------

class _QueuingBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.port = ""
        self.group = ""
        self.columns: list[str] = []
        self.mode = ""

    def feed(self, line: Line) -> Verdict:
        stripped = line.text.strip()
        if (m := _QUEUING.fullmatch(stripped)) is not None:
            self.port, self.group, self.columns, self.mode = m.group(2), "", [], m.group(1).lower()
            return "used"
        if not stripped or not self.port:
            return "foreign"
        if RULE.fullmatch(stripped) or stripped.startswith(("slot ", "QoS-Group#", "Min ", "Units")):
            self.mode = "config" if stripped.startswith("QoS-Group#") else self.mode
            return "used"
        if stripped.startswith(("Per Slice", "Per Port", "Port Egress", "Port Ingress", "PFC Statistics")):
            self.mode = "slice" if stripped.startswith("Per Slice") else "port"
            return "used"
        labels = switch_labels(self.sink, self.port)
        if (m := _QOS_GROUP.fullmatch(stripped)) is not None:
            kind = (m.group(1) or "").lower()
            self.group, self.columns, self.mode = f"{kind}{m.group(2)}", [], "qos"
            return "used"
        if (m := _PPP.fullmatch(stripped)) is not None:
            self.sink.put(line, "roce_pause_ctrl_frames_total", m.group(1), {**labels, "direction": "tx"})
            self.sink.put(line, "roce_pause_ctrl_frames_total", m.group(2), {**labels, "direction": "rx"})
            self.mode = "pfc"
            return "used"
        if stripped.startswith(("PFC_COS", "COS ")):
            self.mode = "pfc"
            return "used"
        if "|" in stripped and self.mode == "qos":
            return self._qos_row(line, stripped, labels)
        tokens = stripped.split()
        if self.mode == "pfc" and len(tokens) >= 6 and tokens[0].isdigit():
            self._pfc_row(line, tokens, labels)
            return "used"
        if self.mode == "config" and tokens[0].isdigit():
            return "used"
        if (m := _STAT.fullmatch(stripped)) is not None:
            name = m.group(1).strip()
            if self.mode == "slice":
                return "used"
            if name.lower() in _PORT_DROPS:
                self.sink.put(line, "roce_discards_total", m.group(2), {**labels, "direction": "rx", "reason": "port"},
                              what=name)
            else:
                self.sink.generic(line, snake(name), m.group(2), labels)
            return "used"
        return "foreign"

    def _qos_row(self, line: Line, stripped: str, labels: dict[str, str]) -> Verdict:
        cells = _cells(stripped)
        if cells and all(number(c) is None for c in cells):  # "|  | Unicast | Multicast |": the column names
            self.columns = cells
            return "used"
        if not self.group or len(cells) < 2:
            return "unknown"
        pairs = list(zip(cells[::2], cells[1::2], strict=False)) if not self.columns or len(cells) != len(
            self.columns) + 1 else [(cells[0], c) for c in cells[1:]]
        for at, (name, cell) in enumerate(pairs):
            column = self.columns[at].lower() if len(pairs) == len(self.columns) and self.columns else "unicast"
            queue = self.group if column == "unicast" else (
                f"mc{self.group}" if column == "multicast" else f"{snake(column)}{self.group}")
            known = _ROWS.get(name.lower())
            where = {**labels, "queue": queue}
            if known is None:
                self.sink.generic(line, f"queue_{snake(name)}", cell, where)
            else:
                self.sink.put(line, known[0], cell, {**where, **known[1]}, what=name)
        return "used"

    def _pfc_row(self, line: Line, tokens: list[str], labels: dict[str, str]) -> None:
        # TxPause/TxCount: this switch pausing its peer on the COS; RxPause/RxCount: the peer pausing this port
        cos, group = tokens[0], tokens[1]
        _, tx_count, rx_state, rx_count = tokens[-4:]
        for direction, cell in (("tx", tx_count), ("rx", rx_count)):
            self.sink.put(line, "roce_pfc_pause_frames_total", cell,
                          {**labels, "priority": cos, "direction": direction})
        if group.isdigit() and rx_state in ("Active", "Inactive"):
            self.sink.put_value(line, "roce_queue_paused", 1.0 if rx_state == "Active" else 0.0,
                                {**labels, "queue": group})

    def finish(self) -> None:
        return None


# --- show interface counters / show interface -----------------------------------------------------------------

class _CountersBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.columns: list[str] = []

    def feed(self, line: Line) -> Verdict:
        text = line.text
        if _COUNTERS_HEADER.fullmatch(text):
            self.columns = columns(text)
            return "used"
        stripped = text.strip()
        if RULE.fullmatch(stripped):
            return "used"
        tokens = stripped.split()
        if not tokens or PORT.fullmatch(tokens[0]) is None or not self.columns:
            return "foreign"
        if len(tokens) != len(self.columns):
            return "unknown"
        labels = switch_labels(self.sink, tokens[0])
        for name, cell in zip(self.columns[1:], tokens[1:], strict=True):
            known = _COUNTER_COLUMNS.get(name.lower())
            if known is None:
                self.sink.generic(line, snake(name), cell, labels)
            else:
                self.sink.put(line, known[0], cell, {**labels, "direction": known[1]}, what=name)
        return "used"

    def finish(self) -> None:
        return None


class _InterfaceBlock:
    """The RX/TX counter lines of ``show interface``: unicast packets (the packet count the other tables and
    SONiC's IF_IN_UCAST_PKTS give), bytes, discards and pause frames."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.port = ""
        self.direction = ""

    def feed(self, line: Line) -> Verdict:
        stripped = line.text.strip()
        if (m := _INTERFACE.fullmatch(stripped)) is not None:
            self.port, self.direction = m.group(1), ""
            return "used"
        if not self.port or not stripped:
            return "foreign"
        if stripped in ("RX", "TX"):
            self.direction = stripped.lower()
            return "used"
        labels = switch_labels(self.sink, self.port)
        if (m := _PAUSE.fullmatch(stripped)) is not None:
            self.sink.put(line, "roce_pause_ctrl_frames_total", m.group(1),
                          {**labels, "direction": m.group(2).lower()})
            return "used"
        if self.direction and (m := _UNICAST.fullmatch(stripped)) is not None:
            self.sink.put(line, "roce_packets_total", m.group(1), {**labels, "direction": self.direction})
            return "used"
        found = False
        for m in _IF_STAT.finditer(stripped[:400]):
            direction = "rx" if m.group(2) == "input" else "tx"
            if m.group(3) == "discard":
                self.sink.put(line, "roce_discards_total", m.group(1),
                              {**labels, "direction": direction, "reason": "port"})
            else:
                self.sink.generic(line, f"{m.group(2)}_packets", m.group(1), labels)
                if m.group(4):
                    self.sink.put(line, "roce_bytes_total", m.group(4), {**labels, "direction": direction})
            found = True
        return "used" if found else "foreign"

    def finish(self) -> None:
        return None


FORMATS.register("nxos-pfc", CounterFormat(
    name="nxos-pfc", label="NX-OS show interface priority-flow-control", start=_PfcBlock, side="switch",
    opens=lambda text: _PFC_HEADER.fullmatch(text) is not None,
    command=re.compile(r"show interface(?:s)?(?: \S+)? priority-flow-control(?! detail)"),
    examples=("Port               Mode Oper(VL bmap)  RxPPP      TxPPP",)))
FORMATS.register("nxos-pfc-detail", CounterFormat(
    name="nxos-pfc-detail", label="NX-OS show interface priority-flow-control detail", start=_PfcDetailBlock,
    side="switch", opens=lambda text: _BARE_PORT.fullmatch(text) is not None,
    command=re.compile(r"priority-flow-control detail")))
FORMATS.register("nxos-queuing", CounterFormat(
    name="nxos-queuing", label="NX-OS show queuing interface", start=_QueuingBlock, side="switch",
    opens=lambda text: _QUEUING.fullmatch(text) is not None,
    command=re.compile(r"show queu(?:e)?ing interface"),
    examples=("Egress Queuing for Ethernet1/1 [System]",)))
FORMATS.register("nxos-counters", CounterFormat(
    name="nxos-counters", label="NX-OS show interface counters", start=_CountersBlock, side="switch",
    opens=lambda text: _COUNTERS_HEADER.fullmatch(text) is not None,
    command=re.compile(r"show interface(?:s)? counters(?! queue)")))
FORMATS.register("nxos-interface", CounterFormat(
    name="nxos-interface", label="NX-OS show interface", start=_InterfaceBlock, side="switch",
    opens=lambda text: _INTERFACE.fullmatch(text) is not None))
