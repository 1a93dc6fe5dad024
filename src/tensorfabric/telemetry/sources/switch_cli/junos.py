"""Junos ``show interfaces extensive`` (QFX/MX/PTX): one block per ``Physical interface: et-0/0/0, Enabled, ...``.

Read from each interface: ``Traffic statistics`` bytes and packets, the ``Drops`` of ``Input errors`` and ``Output
errors``, the ``Queue counters`` rows (queued, transmitted, dropped per queue) labelled with the forwarding class
the ``Queue number: Mapped forwarding classes`` table maps each queue to (the queue number when the paste has no
map), the ``MAC statistics`` receive/transmit columns (``MAC control frames``: pause frames of any kind; ``MAC
pause frames``: 802.3x; ``CRC/Align errors``), and QFX ``MAC Priority Flow Control Statistics`` rows
(``Priority : 3  <rx>  <tx>``). IPv6-transit, LSI and STP-dropped statistics repeat the traffic lines' shape and
are skipped.
"""

from __future__ import annotations

import re

from tensorfabric.intake import Line
from tensorfabric.telemetry.sources.switch_cli._table import snake
from tensorfabric.telemetry.sources.switch_cli.sonic import switch_labels
from tensorfabric.telemetry.sources.textformat import FORMATS, CounterFormat, Sink, Verdict

__all__: list[str] = []

_PHYSICAL = re.compile(r"\s*Physical interface: ([^,\s]{1,64}),.*")
_TRAFFIC = re.compile(r"\s*(Input|Output)\s+(bytes|packets)\s*:\s*(\d{1,24})(?:\s.*)?")
_DROPS = re.compile(r"\bDrops: (\d{1,24})")
_QUEUE_ROW = re.compile(r"\s*(\d{1,3})\s+(\d{1,24})\s+(\d{1,24})\s+(\d{1,24})\s*")
_MAP_ROW = re.compile(r"\s*(\d{1,3})\s+([A-Za-z][\w.-]{0,63})\s*")
_MAC_ROW = re.compile(r"\s*([A-Za-z][A-Za-z0-9 /-]{1,40}?)\s{2,}(\d{1,24})(?:\s+(\d{1,24}))?\s*")
_PFC_ROW = re.compile(r"\s*Priority\s*:\s*(\d)\s+(\d{1,24})\s+(\d{1,24})\s*")
_SECTIONS = (("Traffic statistics:", "traffic"), ("Input errors:", "input"), ("Output errors:", "output"),
             ("Queue counters:", "queues"), ("Queue number:", "map"), ("MAC statistics:", "mac"),
             ("MAC Priority Flow Control Statistics:", "pfc"), ("IPv6 transit statistics:", "other"),
             ("Label-switched interface", "other"), ("Dropped traffic statistics", "other"),
             ("Filter statistics:", "other"), ("PCS statistics", "other"), ("CoS information:", "other"),
             ("Egress queues:", "other"), ("Logical interface", "other"), ("Packet Forwarding Engine", "other"))
_MAC: dict[str, tuple[str, dict[str, str]]] = {
    "mac control frames": ("roce_pause_ctrl_frames_total", {}),
    "mac pause frames": ("roce_pfc_pause_frames_total", {"priority": "global"}),
    "crc/align errors": ("roce_phy_crc_errors_total", {}),
}


class _InterfaceBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.port = ""
        self.section = ""
        self.queues: list[tuple[Line, str, str, str, str]] = []
        self.classes: dict[str, str] = {}

    def feed(self, line: Line) -> Verdict:
        stripped = line.text.strip()
        if (m := _PHYSICAL.fullmatch(stripped)) is not None:
            self.finish()
            self.port, self.section = m.group(1), ""
            return "used"
        if not self.port or not stripped:
            return "foreign"
        for title, section in _SECTIONS:
            if stripped.startswith(title):
                self.section = section
                return "used"
        labels = switch_labels(self.sink, self.port)
        if self.section == "traffic" and (m := _TRAFFIC.fullmatch(stripped)) is not None:
            metric = "roce_bytes_total" if m.group(2) == "bytes" else "roce_packets_total"
            direction = "rx" if m.group(1) == "Input" else "tx"
            self.sink.put(line, metric, m.group(3), {**labels, "direction": direction})
            return "used"
        if self.section in ("input", "output") and (m := _DROPS.search(stripped[:400])) is not None:
            direction = "rx" if self.section == "input" else "tx"
            self.sink.put(line, "roce_discards_total", m.group(1), {**labels, "direction": direction, "reason": "port"},
                          what="Drops")
            return "used"
        if self.section == "queues" and (m := _QUEUE_ROW.fullmatch(stripped)) is not None:
            self.queues.append((line, m.group(1), m.group(2), m.group(3), m.group(4)))
            return "used"
        if self.section == "map" and (m := _MAP_ROW.fullmatch(stripped)) is not None:
            self.classes[m.group(1)] = m.group(2)
            return "used"
        if self.section == "pfc" and (m := _PFC_ROW.fullmatch(stripped)) is not None:
            for direction, cell in (("rx", m.group(2)), ("tx", m.group(3))):
                self.sink.put(line, "roce_pfc_pause_frames_total", cell,
                              {**labels, "priority": m.group(1), "direction": direction})
            return "used"
        if self.section == "mac" and (m := _MAC_ROW.fullmatch(stripped)) is not None:
            self._mac(line, m.group(1).strip(), m.group(2), m.group(3), labels)
            return "used"
        return "foreign"

    def _mac(self, line: Line, name: str, rx: str, tx: str | None, labels: dict[str, str]) -> None:
        known = _MAC.get(name.lower())
        for direction, cell in (("rx", rx), ("tx", tx)):
            if cell is None:
                continue
            if known is None:
                self.sink.generic(line, f"mac_{snake(name)}_{direction}", cell, labels)
            elif known[0] == "roce_phy_crc_errors_total":
                if direction == "rx":
                    self.sink.put(line, known[0], cell, labels, what=name)
            else:
                self.sink.put(line, known[0], cell, {**labels, **known[1], "direction": direction}, what=name)

    def finish(self) -> None:
        """Queue rows print before the map that names their forwarding classes: emit them at the interface's end."""
        if not self.port:
            return
        labels = switch_labels(self.sink, self.port)
        for line, queue, queued, transmitted, dropped in self.queues:
            where = {**labels, "queue": self.classes.get(queue, queue)}
            self.sink.generic(line, "queued_packets", queued, where)
            self.sink.put(line, "roce_queue_packets_total", transmitted, where, what="Transmitted packets")
            self.sink.put(line, "roce_discards_total", dropped, {**where, "direction": "tx", "reason": "queue"},
                          what="Dropped packets")
        self.queues, self.classes = [], {}


FORMATS.register("junos-extensive", CounterFormat(
    name="junos-extensive", label="Junos show interfaces extensive", start=_InterfaceBlock, side="switch",
    opens=lambda text: _PHYSICAL.fullmatch(text) is not None,
    command=re.compile(r"show interfaces? (?:\S+ )?extensive"),
    examples=("Physical interface: et-0/0/0, Enabled, Physical link is Up",)))
