"""``netdev:[IF,IF...]`` -- Linux interface and tc qdisc statistics through ``ip -s -j link`` and ``tc -s -j qdisc``.

Reading through iproute2's JSON instead of /sys/class/net means the same code works inside a network namespace
(the runner prefixes ``ip netns exec NS``), which is how ``lab:NAME`` polls every lab host.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorfabric.errors import ParseError
from tensorfabric.jsonload import load_json
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources.base import Reading, SourceContext

__all__ = ["NetdevSource", "link_samples", "open_source", "qdisc_samples"]

_LINK_FIELDS = {"bytes": "netdev_bytes_total", "packets": "netdev_packets_total",
                "errors": "netdev_errors_total", "dropped": "netdev_dropped_total"}
_QDISC_FIELDS = {"bytes": ("netdev_qdisc_bytes_total", "counter"), "drops": ("netdev_qdisc_drops_total", "counter"),
                 "overlimits": ("netdev_qdisc_overlimits_total", "counter"),
                 "backlog": ("netdev_qdisc_backlog_bytes", "gauge")}


def _json_list(text: str, source: str, what: str) -> list[Any]:
    data = load_json(text, what=f"{what} output (a JSON list)", source=source)
    if not isinstance(data, list):
        raise ParseError(f"{what} output must be a JSON list", source=source, excerpt=text[:80])
    return data


def link_samples(text: str, *, time: float, host: str, source: str, only: Sequence[str] = (),
                 errors: list[str]) -> list[Sample]:
    """Samples from ``ip -s -j link show`` output (``stats64`` per interface; loopback skipped)."""
    out: list[Sample] = []
    for entry in _json_list(text, source, "ip -s -j link"):
        if not isinstance(entry, dict) or not isinstance(entry.get("ifname"), str):
            errors.append(f"{source}: link entry without ifname")
            continue
        name = entry["ifname"]
        if name == "lo" or (only and name not in only):
            continue
        stats = entry.get("stats64") or entry.get("stats") or {}
        for direction in ("rx", "tx"):
            block = stats.get(direction, {}) if isinstance(stats, dict) else {}
            for field, metric in _LINK_FIELDS.items():
                value = block.get(field) if isinstance(block, dict) else None
                if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                    out.append(Sample(time, metric, "counter", float(value),
                                      {"host": host, "device": name, "port": name, "direction": direction}, source))
                elif value is not None:
                    errors.append(f"{source}: {name} {direction}_{field}: not a counter: {value!r}"[:160])
    return out


def qdisc_samples(text: str, *, time: float, host: str, source: str, only: Sequence[str] = (),
                  errors: list[str]) -> list[Sample]:
    """Samples from ``tc -s -j qdisc show``; ``queue`` is ``kind:handle`` so nested qdiscs stay apart."""
    out: list[Sample] = []
    for entry in _json_list(text, source, "tc -s -j qdisc"):
        if not isinstance(entry, dict) or not isinstance(entry.get("dev"), str):
            errors.append(f"{source}: qdisc entry without dev")
            continue
        dev = entry["dev"]
        if dev == "lo" or (only and dev not in only) or entry.get("kind") == "noqueue":
            continue
        labels = {"host": host, "device": dev, "port": dev, "queue": f"{entry.get('kind')}:{entry.get('handle')}"}
        for field, (metric, kind) in _QDISC_FIELDS.items():
            value = entry.get(field)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                out.append(Sample(time, metric, "counter" if kind == "counter" else "gauge", float(value), labels,
                                  source))
    return out


class NetdevSource:
    def __init__(self, name: str, ctx: SourceContext, interfaces: Sequence[str] = ()) -> None:
        self.name = name
        self._ctx = ctx
        self._only = tuple(interfaces)

    def read(self) -> Reading:
        errors: list[str] = []
        links = self._ctx.run(["ip", "-s", "-j", "link", "show"])
        now = self._ctx.clock()
        samples = link_samples(links, time=now, host=self._ctx.host, source=self.name, only=self._only,
                               errors=errors)
        try:
            qdiscs = self._ctx.run(["tc", "-s", "-j", "qdisc", "show"])
            samples += qdisc_samples(qdiscs, time=now, host=self._ctx.host, source=self.name, only=self._only,
                                     errors=errors)
        except ParseError as exc:
            errors.append(str(exc))
        return Reading(tuple(samples), tuple(errors))


def open_source(arg: str, ctx: SourceContext) -> NetdevSource:
    interfaces = tuple(i for i in arg.split(",") if i)
    return NetdevSource(f"netdev:{arg}", ctx, interfaces)
