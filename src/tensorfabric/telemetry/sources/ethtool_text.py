"""``ethtool -S`` lines as ``file:`` reads them (format ``ethtool``): the same keys and mappings as ``ethtool-file:``
(:mod:`.ethtool`), one line at a time, with the device a command or heading of the paste names."""

from __future__ import annotations

import re

from tensorfabric.intake import Line
from tensorfabric.telemetry.metrics import GENERIC
from tensorfabric.telemetry.sources.ethtool import cached_mapping, statistic_key
from tensorfabric.telemetry.sources.textformat import FORMATS, CounterFormat, Sink, Verdict, number

__all__: list[str] = []


def _line_pair(text: str) -> tuple[str, str] | None:
    """``(key, value cell)`` of a ``key: value`` statistics line (per-queue prefixes kept in the key), or None."""
    stripped = text.strip()
    key, sep, cell = stripped.partition(":")
    key = key.strip()
    if not sep or len(stripped) > 400:
        return None
    if ":" in cell:  # "[0]: rx_bytes: 5", "rxq0: rx_bytes: 5", "1 [XDP]: xmit_pkts: 41"
        name, _, cell = cell.rpartition(":")
        name = name.strip()
        if not statistic_key(key, name):
            return None
        key = f"{key}: {name}"
    elif not statistic_key(key):
        return None
    if not cell.strip() or " " in cell.strip():
        return None  # "Update: same result with the new driver" is prose
    return key, cell


class _EthtoolBlock:
    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.device = sink.context.device or sink.context.fallback

    def feed(self, line: Line) -> Verdict:
        stripped = line.text.strip()
        if not stripped:
            return "foreign"
        if stripped.endswith("statistics:") and len(stripped) < 40:
            return "used"
        pair = _line_pair(stripped)
        if pair is None:
            return "foreign"
        key, cell = pair
        metric, extra, scale = cached_mapping(key)
        self.sink.put(line, metric, cell, {"device": self.device, "port": "1", **extra}, scale=scale, what=key)
        return "used"

    def finish(self) -> None:
        return None


def _claims(text: str) -> int:
    pair = _line_pair(text)
    if pair is None or number(pair[1]) is None:
        return 0
    return 2 if cached_mapping(pair[0])[0] != GENERIC else 1


FORMATS.register("ethtool", CounterFormat(
    name="ethtool", label="ethtool -S", start=_EthtoolBlock,
    opens=lambda text: text.strip() == "NIC statistics:", claims=_claims,
    command=re.compile(r"\bethtool\s+(?:-S|--statistics)\b"),
    examples=("NIC statistics:", "     rx_prio3_pause: 1180")))
