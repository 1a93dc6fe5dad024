"""Arista EOS ``show`` output.

* ``show priority-flow-control counters`` -- ``Port  RxPfc  TxPfc`` rows (PFC frames summed over priorities), or
  with a ``Priority`` column, per priority;
* ``show interfaces counters queue [detail]`` -- ``Port  TxQ  Pkts  Octets  DropPkts  DropOctets`` rows (``Et1  UC3
  ...``; the ``Counter/pkts`` spelling is SONiC's table and read by it); traffic classes ``TC3`` are queue ``3``.
"""

from __future__ import annotations

import re

from tensorfabric.intake import Line
from tensorfabric.telemetry.sources.switch_cli._table import RULE
from tensorfabric.telemetry.sources.switch_cli.sonic import PORT, QueueBlock, switch_labels
from tensorfabric.telemetry.sources.textformat import FORMATS, CounterFormat, Sink, Verdict

__all__: list[str] = []

_PFC_HEADER = re.compile(r"\s*Port(\s+Priority)?\s+RxPfc\s+TxPfc\s*", re.IGNORECASE)
# SONiC's Counter/pkts spelling is read by the SONiC format; these are EOS's column names
_QUEUE_HEADER = re.compile(r"\s*Port\s+TxQ(?:\s+(?:Pkts|Octets|Packets|Bytes|DropPkts|DropOctets|Drops|"
                           r"Counter/pkts|Counter/bytes|Drop/pkts|Drop/bytes)){2,6}\s*", re.IGNORECASE)


class _PfcBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.by_priority = False

    def feed(self, line: Line) -> Verdict:
        if (m := _PFC_HEADER.fullmatch(line.text)) is not None:
            self.by_priority = m.group(1) is not None
            return "used"
        stripped = line.text.strip()
        if RULE.fullmatch(stripped):
            return "used"
        tokens = stripped.split()
        if not tokens or PORT.fullmatch(tokens[0]) is None:
            return "foreign"
        width = 4 if self.by_priority else 3
        if len(tokens) != width or (self.by_priority and not tokens[1].isdigit()):
            return "unknown"
        labels = switch_labels(self.sink, tokens[0])
        for direction, cell in (("rx", tokens[-2]), ("tx", tokens[-1])):
            if self.by_priority:
                self.sink.put(line, "roce_pfc_pause_frames_total", cell,
                              {**labels, "priority": tokens[1], "direction": direction})
            else:
                self.sink.put(line, "roce_pause_ctrl_frames_total", cell, {**labels, "direction": direction})
        return "used"

    def finish(self) -> None:
        return None


FORMATS.register("eos-pfc", CounterFormat(
    name="eos-pfc", label="EOS show priority-flow-control counters", start=_PfcBlock, side="switch",
    opens=lambda text: _PFC_HEADER.fullmatch(text) is not None,
    command=re.compile(r"show priority-flow-control counters"),
    examples=("Port        RxPfc       TxPfc",)))
FORMATS.register("eos-queue", CounterFormat(
    name="eos-queue", label="EOS show interfaces counters queue", start=QueueBlock, side="switch",
    opens=lambda text: _QUEUE_HEADER.fullmatch(text) is not None,
    command=re.compile(r"show interfaces?(?: \S+)? counters queue"),
    examples=("Port       TxQ      Pkts      Octets      DropPkts      DropOctets",)))
