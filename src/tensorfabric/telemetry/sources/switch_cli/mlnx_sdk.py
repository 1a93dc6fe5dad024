"""Mellanox/NVIDIA Spectrum SDK counter dumps: ``key = value`` lines in per-priority, per-TC and per-PG blocks.

A block header names the port (a logical port id ``0x11900``, with the SONiC name in brackets when the dump script
prints it) and the priority, traffic class or priority group; the keys are the SDK's counter structs' field names
(``sx_port_cntr_prio_t``: ``rx_pause``, ``rx_pause_duration`` (µs), ``rx_pause_transition``, ``rx_octets``,
``rx_frames`` ...; ``sx_port_traffic_cntr_t``: ``tx_frames``, ``tx_octet``, ``tx_no_buffer_discard_uc``,
``tx_wred_discard``; buffer counters: ``rx_buffer_discard``, ``rx_shared_buffer_discard``). These are what the
SAI reads for SONiC's PFC and queue counters, so an SDK dump beside ``pfcstat`` shows where the two disagree.
Unknown keys are kept under the generic family.
"""

from __future__ import annotations

import re

from tensorfabric.intake import Line
from tensorfabric.telemetry.sources.switch_cli.sonic import switch_labels
from tensorfabric.telemetry.sources.textformat import FORMATS, CounterFormat, Sink, Verdict, number

__all__: list[str] = []

_KV = re.compile(r"\s*([a-z][a-z0-9_]{1,63})\s*=\s*(\S{1,40}(?: \(no PMA\))?)\s*")
_PORT = re.compile(r"\b(?:log_port|logical port|local port|port)\s*[:=]?\s*(0x[0-9a-fA-F]{1,8}|\d{1,5})\b",
                   re.IGNORECASE)
_NAME = re.compile(r"\b((?:Ethernet|swp|sw\d+p)\d{1,4}(?:s\d{1,2})?)\b")
_SCOPE = re.compile(r"\b(prio(?:rity)?|tc|traffic[ _]class|pg|priority[ _]group)\s*[:=]?\s*(\d{1,2})\b",
                    re.IGNORECASE)

Entry = tuple[str, dict[str, str], float]
_PRIO: dict[str, Entry] = {
    "rx_pause": ("roce_pfc_pause_frames_total", {"direction": "rx"}, 1.0),
    "tx_pause": ("roce_pfc_pause_frames_total", {"direction": "tx"}, 1.0),
    "rx_pause_duration": ("roce_pfc_paused_seconds_total", {"direction": "rx"}, 1e-6),
    "tx_pause_duration": ("roce_pfc_paused_seconds_total", {"direction": "tx"}, 1e-6),
    "rx_pause_transition": ("roce_pfc_pause_transitions_total", {"direction": "rx"}, 1.0),
    "rx_octets": ("roce_bytes_total", {"direction": "rx"}, 1.0),
    "tx_octets": ("roce_bytes_total", {"direction": "tx"}, 1.0),
    "rx_frames": ("roce_packets_total", {"direction": "rx"}, 1.0),
    "tx_frames": ("roce_packets_total", {"direction": "tx"}, 1.0),
    "rx_discard": ("roce_discards_total", {"direction": "rx", "reason": "pg"}, 1.0),
}
_TC: dict[str, Entry] = {
    "tx_frames": ("roce_queue_packets_total", {}, 1.0),
    "tx_octet": ("roce_queue_bytes_total", {}, 1.0),
    "tx_octets": ("roce_queue_bytes_total", {}, 1.0),
    "tx_no_buffer_discard_uc": ("roce_discards_total", {"direction": "tx", "reason": "queue"}, 1.0),
    "tx_wred_discard": ("roce_discards_total", {"direction": "tx", "reason": "wred"}, 1.0),
    "tc_ecn_marked_packets": ("roce_ecn_marked_packets_total", {}, 1.0),
    "tx_ecn_marked_tc": ("roce_ecn_marked_packets_total", {}, 1.0),
}
_PG: dict[str, Entry] = {
    "rx_buffer_discard": ("roce_discards_total", {"direction": "rx", "reason": "pg"}, 1.0),
    "rx_shared_buffer_discard": ("roce_discards_total", {"direction": "rx", "reason": "pg_shared"}, 1.0),
}
_KNOWN = frozenset(_PRIO) | frozenset(_TC) | frozenset(_PG) | frozenset((
    "rx_uc_frames", "rx_mc_frames", "rx_bc_frames", "tx_uc_frames", "tx_mc_frames", "tx_bc_frames",
    "tx_pause_storm", "tx_pause_storm_warn"))


def _scope(text: str) -> tuple[str, str] | None:
    match = _SCOPE.search(text[:300])
    if match is None:
        return None
    word = match.group(1).lower().replace(" ", "_")
    kind = "prio" if word.startswith("prio") and "group" not in word else "pg" if "g" in word else "tc"
    return kind, match.group(2)


class _SdkBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.port = ""
        self.scope: tuple[str, str] | None = None

    def feed(self, line: Line) -> Verdict:
        stripped = line.text.strip()
        if not stripped:
            return "foreign"
        kv = _KV.fullmatch(stripped)
        if kv is None:
            port = _PORT.search(stripped[:300])
            name = _NAME.search(stripped[:300])
            scope = _scope(stripped)
            if port is None and name is None and scope is None:
                return "foreign"
            if port is not None or name is not None:
                self.port = name.group(1) if name is not None else port.group(1) if port is not None else self.port
            self.scope = scope if scope is not None else (None if port is not None or name is not None
                                                          else self.scope)
            return "used"
        key, cell = kv.group(1), kv.group(2)
        labels = switch_labels(self.sink, self.port)
        if self.scope is None:
            self.sink.generic(line, key, cell, labels)
            return "used"
        kind, index = self.scope
        table = _PRIO if kind == "prio" else _TC if kind == "tc" else _PG
        entry = table.get(key)
        where = {**labels, ("queue" if kind == "tc" else "priority"): index}
        if entry is None:
            self.sink.generic(line, key, cell, where)
            return "used"
        metric, extra, scale = entry
        self.sink.put(line, metric, cell, {**where, **extra}, scale=scale, what=key)
        return "used"

    def finish(self) -> None:
        return None


def _opens(text: str) -> bool:
    stripped = text.strip()
    if "=" in stripped and _KV.fullmatch(stripped):
        return False
    return (_PORT.search(stripped[:300]) is not None or _NAME.search(stripped[:300]) is not None) \
        and _scope(stripped) is not None and len(stripped) < 200


def _claims(text: str) -> int:
    kv = _KV.fullmatch(text)
    if kv is None or number(kv.group(2)) is None:
        return 0
    return 2 if kv.group(1) in _KNOWN else 1


FORMATS.register("mlnx-sdk", CounterFormat(
    name="mlnx-sdk", label="Mellanox SDK counter dump", start=_SdkBlock, side="switch", opens=_opens,
    claims=_claims, command=re.compile(r"\bsx_api_\w+|\bsx_sdk\b|\bsdk_dump\b"),
    examples=("Port 0x11900 (Ethernet12) prio 3:", "rx_pause = 15437")))
