"""Prometheus / OpenMetrics exposition text, as ``curl host:port/metrics`` prints it and ``file:`` reads it.

Families of the exporters operators run next to RDMA NICs are mapped to canonical names, with device and port from
their labels (``device``, ``ifName``, ``hca``, ``port``; ``priority`` and ``direction`` where given):

* hw_counters / counters exported as ``<prefix><counter>_total`` -- ``rdma_`` (rdma_exporter), ``mlx5_``,
  ``infiniband_``, or no prefix with the device in ``ifName``; IB PMA data counters there are 4-byte words, as in
  sysfs;
* node_exporter's infiniband collector (``node_infiniband_port_data_received_bytes_total`` ..., already bytes) and
  ethtool collector (``node_ethtool_received_prio3_pause``: ``received``/``transmitted`` spell ``rx``/``tx``);
* rdma_exporter's PFC families (``rdma_roce_pfc_pause_frames_total{direction,priority}``, the duration in µs);
* the canonical names themselves (a paste of this project's own exporter).

Every other family is passed through under the generic family with its name, bounded by the source's
:class:`~.generic.GenericBudget`. ``_created``, histogram/summary series and ``*_info`` gauges are read and dropped;
``NaN`` values are absent. The line scanner is a single left-to-right pass (label values may hold any character).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tensorfabric.intake import Line
from tensorfabric.telemetry.metrics import GENERIC, METRICS
from tensorfabric.telemetry.sources.ethtool import mapping as ethtool_mapping
from tensorfabric.telemetry.sources.hwcounters import HW_COUNTERS, PMA_COUNTERS
from tensorfabric.telemetry.sources.textformat import FORMATS, CounterFormat, Sink, Verdict, number

__all__ = ["parse_sample"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,199}")
_COMMENT = re.compile(r"# (HELP|TYPE|UNIT|EOF)(?: ([a-zA-Z_:][a-zA-Z0-9_:]{0,199}))?(?: (.*))?")
_PREFIXES = ("node_infiniband_", "node_amazonefa_", "node_ethtool_", "rdma_", "mlx5_", "infiniband_", "efa_",
             "ethtool_")
_SKIP_SUFFIXES = ("_created", "_bucket", "_sum", "_count", "_info")
_DEVICE_LABELS = ("device", "ifName", "ifname", "hca", "ibdev", "dev", "interface", "netdev")
_HOST_LABELS = ("host", "hostname", "nodename", "node", "instance")

Entry = tuple[str, dict[str, str], float]
_RDMA: dict[str, Entry] = {**PMA_COUNTERS, **HW_COUNTERS}
# node_exporter's infiniband collector renames the sysfs counters and converts data words to bytes
_NODE_IB: dict[str, Entry] = {
    "port_data_received_bytes": ("roce_bytes_total", {"direction": "rx"}, 1.0),
    "port_data_transmitted_bytes": ("roce_bytes_total", {"direction": "tx"}, 1.0),
    "port_packets_received": ("roce_packets_total", {"direction": "rx"}, 1.0),
    "port_packets_transmitted": ("roce_packets_total", {"direction": "tx"}, 1.0),
    "port_discards_transmitted": ("roce_discards_total", {"direction": "tx", "reason": "xmit"}, 1.0),
    "port_errors_received": ("roce_discards_total", {"direction": "rx", "reason": "rcv_errors"}, 1.0),
    "excessive_buffer_overrun_errors": ("roce_discards_total", {"direction": "rx", "reason": "buffer_overrun"}, 1.0),
    "link_downed": ("roce_link_down_events_total", {}, 1.0),
    "symbol_error": ("roce_phy_symbol_errors_total", {}, 1.0),
}
_PFC: dict[str, Entry] = {
    "roce_pfc_pause_frames": ("roce_pfc_pause_frames_total", {}, 1.0),
    "roce_pfc_pause_duration": ("roce_pfc_paused_seconds_total", {}, 1e-6),
    "roce_pfc_pause_transitions": ("roce_pfc_pause_transitions_total", {}, 1.0),
}
_LIFESPAN = ("lifespan_milliseconds", "lifespan_ms", "lifespan")


def _unescape(value: str) -> str:
    return value.replace("\\n", "\n").replace('\\"', '"').replace("\\\\", "\\")


def parse_sample(text: str) -> tuple[str, dict[str, str], str] | None:
    """``(name, labels, value cell)`` of one exposition sample line, None when the line is not one."""
    line = text.strip()
    if not line or line[0] == "#" or len(line) > 16384:
        return None
    brace = line.find("{")
    space = line.find(" ")
    if brace < 0 or (0 <= space < brace):
        name, _, rest = line.partition(" ")
        labels: dict[str, str] = {}
    else:
        name, rest = line[:brace], ""
        labels = {}
        i = brace + 1
        while i < len(line):
            while i < len(line) and line[i] in " ,":
                i += 1
            if i < len(line) and line[i] == "}":
                rest = line[i + 1:]
                break
            eq = line.find("=", i)
            if eq < 0 or eq + 1 >= len(line) or line[eq + 1] != '"':
                return None
            key = line[i:eq].strip()
            j = eq + 2
            chunk: list[str] = []
            while j < len(line) and line[j] != '"':
                if line[j] == "\\" and j + 1 < len(line):
                    chunk.append(line[j:j + 2])
                    j += 2
                    continue
                chunk.append(line[j])
                j += 1
            if j >= len(line):
                return None
            labels[key] = _unescape("".join(chunk))
            i = j + 1
        else:
            return None
    if _NAME.fullmatch(name) is None:
        return None
    fields = rest.split()
    if not fields or len(fields) > 3:  # value, then an optional timestamp (and an OpenMetrics exemplar marker)
        return None
    return name, labels, fields[0]


def _where(labels: Mapping[str, str], fallback: str) -> dict[str, str]:
    out = {"device": next((labels[k] for k in _DEVICE_LABELS if labels.get(k)), fallback),
           "port": labels.get("port", "")}
    host = next((labels[k] for k in _HOST_LABELS if labels.get(k)), "")
    if host:
        out["host"] = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    for key in ("priority", "direction", "queue"):
        if labels.get(key):
            out[key] = labels[key]
    if "prio" in labels and "priority" not in out:
        out["priority"] = labels["prio"]
    return out


def _canonical(name: str, labels: Mapping[str, str]) -> Entry | None:
    if name in METRICS and name != GENERIC:
        extra = {k: v for k, v in labels.items() if k in METRICS[name].labels and k not in ("host", "device", "port")}
        return name, extra, 1.0
    prefix = next((p for p in _PREFIXES if name.startswith(p)), "")
    bare = name[len(prefix):]
    counter = bare.removesuffix("_total")
    if prefix == "node_infiniband_":
        return _NODE_IB.get(counter)
    if prefix in ("node_ethtool_", "ethtool_"):
        key = counter
        for long, short in (("received_", "rx_"), ("transmitted_", "tx_")):
            if key.startswith(long):
                key = short + key[len(long):]
        metric, extra, scale = ethtool_mapping(key)
        if metric == GENERIC:
            return None
        return metric, {**extra, "port": labels.get("port") or "1"}, scale
    if counter in _PFC:
        return _PFC[counter]
    if counter in _LIFESPAN:
        return ("roce_hw_counters_lifespan_seconds", {}, 1e-3)
    if counter == "port_info" and "link_layer" in labels:
        return ("roce_port_info", {"link_layer": labels["link_layer"]}, 1.0)
    entry = _RDMA.get(counter)
    if entry is not None and (prefix or bare.endswith("_total")):
        return entry
    return None


class _PromBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.fallback = sink.context.device or sink.context.fallback

    def feed(self, line: Line) -> Verdict:
        text = line.text.strip()
        if not text:
            return "foreign"
        if text.startswith("#"):
            return "used" if _COMMENT.fullmatch(text[:4096]) else "foreign"
        parsed = parse_sample(text)
        if parsed is None:
            return "foreign"
        name, labels, cell = parsed
        if name.endswith(_SKIP_SUFFIXES) and name != "rdma_port_info":
            return "used"
        if cell in ("NaN", "+Inf", "-Inf"):
            return "used"
        where = _where(labels, self.fallback)
        entry = _canonical(name, labels)
        if entry is None:
            extra = {"queue": labels["queue"]} if labels.get("queue") else {}
            self.sink.generic(line, name, cell, {**{k: v for k, v in where.items()
                                                  if k in ("host", "device", "port")}, **extra})
            return "used"
        metric, fixed, scale = entry
        allowed = METRICS[metric].labels
        kept = {k: v for k, v in where.items() if k in allowed and v}
        self.sink.put(line, metric, cell, {**kept, **fixed}, scale=scale, what=name)
        return "used"

    def finish(self) -> None:
        return None


def _opens(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith(("# TYPE ", "# HELP ")) and _COMMENT.fullmatch(stripped[:4096]) is not None


def _claims(text: str) -> int:
    parsed = parse_sample(text)
    if parsed is None or number(parsed[2]) is None and parsed[2] not in ("NaN", "+Inf", "-Inf"):
        return 0
    name, labels, _ = parsed
    if not labels and not name.startswith(_PREFIXES) and not name.endswith("_total"):
        return 0  # "np_cnp_sent 12" is a hw_counters column, not an exposition line
    return 2 if _canonical(name, labels) is not None else 1


FORMATS.register("prometheus", CounterFormat(
    name="prometheus", label="Prometheus text", start=_PromBlock, opens=_opens, claims=_claims,
    command=re.compile(r"\b(?:curl|wget)\b.*/metrics\b|\bpromtool\b"),
    examples=('rdma_np_cnp_sent_total{device="mlx5_0",port="1"} 12',)))
