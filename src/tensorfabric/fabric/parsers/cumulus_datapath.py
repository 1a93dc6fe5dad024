"""Cumulus Linux datapath QoS files: classic ``/etc/cumulus/datapath/traffic.conf`` (3.x/4.x) and the
``/etc/cumulus/datapath/qos/qos_features.conf`` that replaced it in 5.x, both ``key = value`` lines.

Read: ``traffic.packet_priority_source_set`` (trust), ``traffic.cos_N.priority_source.dscp|8021p`` (DSCP ->
switch priority N; a DSCP in two lists is a conflict), ``pfc.port_group_list`` groups (``cos_list``,
``port_set``, ``port_buffer_bytes``, ``xoff_size``, ``xon_delta`` = the hysteresis, ``cable_length``),
``ecn_red.port_group_list`` groups (``cos_list``, ``port_set``, ``ecn_enable``, ``min/max_threshold_bytes``,
``probability``), ``link_pause.port_group_list`` port sets, ``priority_group.NAME.cos_list`` with
``priority_group.NAME.weight`` (0 = strict, as the file's own comment says) and 5.x
``default_egress_sched.cos_N.bw_percent``. A group named in a ``port_group_list`` must have its keys: switchd
reads keys by the listed name, so a list naming one group and keys naming another configures nothing, and the
parser refuses it rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric.fabric.deployed import Deployed, EcnProfile, Headroom, PortQos, Trust
from tensorfabric.fabric.parsers._common import Where, device_from_source, parse_float, parse_int

__all__ = ["FORMAT", "SUFFIXES", "parse", "sniff"]

FORMAT = "cumulus-datapath"
SUFFIXES = (".traffic_conf",)
_MARKERS = ("traffic.packet_priority_source_set", "pfc.port_group_list", "ecn_red.port_group_list",
            "default_egress_sched.", "traffic.cos_")
_LINE = re.compile(r"^([A-Za-z0-9_.]+)\s*=\s*(.*?)\s*$")
_PORT = re.compile(r"^([a-z]+\d*s|[a-z]+)(\d+)(?:-(?:[a-z]+\d*s|[a-z]+)?(\d+))?$")
_SOURCES: dict[frozenset[str], Trust] = {
    frozenset({"dscp"}): "dscp", frozenset({"802.1p"}): "pcp", frozenset({"cos"}): "pcp",
    frozenset({"802.1p", "dscp"}): "pcp,dscp", frozenset({"cos", "dscp"}): "pcp,dscp",
}


def sniff(text: str) -> bool:
    head = text[:200_000]
    return any(f"\n{m}" in f"\n{head}" for m in _MARKERS)


def _list(value: str, where: Where) -> list[str]:
    if not (value.startswith("[") and value.endswith("]")):
        raise where.error(f"{value[:40]!r} must be a list such as [3] or [0,1,2]")
    return [item.strip() for item in value[1:-1].split(",") if item.strip()]


def _ints(value: str, where: Where, what: str, hi: int) -> list[int]:
    return [parse_int(item, where, what=what, lo=0, hi=hi) for item in _list(value, where)]


def _ports(value: str, where: Where) -> list[str]:
    names: list[str] = []
    for item in (p.strip() for p in value.split(",")):
        match = _PORT.match(item)
        if match is None:
            raise where.error(f"port {item!r} must look like swp1, swp1-swp4 or swp50s0-swp50s3")
        kind, first, last = match.group(1), int(match.group(2)), match.group(3)
        end = int(last) if last is not None else first
        if end < first or end - first > 4096:
            raise where.error(f"port range {item!r} must run upwards over at most 4096 ports")
        names.extend(f"{kind}{n}" for n in range(first, end + 1))
    return names


def _bool(value: str, where: Where) -> bool:
    if value.lower() not in ("true", "false"):
        raise where.error(f"{value!r} must be true or false")
    return value.lower() == "true"


@dataclass
class _Group:
    keys: dict[str, tuple[str, Where]] = field(default_factory=dict)

    def get(self, key: str) -> tuple[str, Where] | None:
        return self.keys.get(key)


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    values: dict[str, tuple[str, Where]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line) if len(line) < 100_000 else None
        where = Where(source, number, line)
        if match is None:
            raise where.error("expected 'key = value' as in traffic.conf")
        values[match.group(1)] = (match.group(2), where)
    if not any(k.startswith(("traffic.", "pfc.", "ecn_red.", "priority_group.", "default_egress_sched."))
               for k in values):
        raise Where(source).error("no Cumulus datapath QoS keys (traffic.*, pfc.*, ecn_red.*) found")

    trust: Trust | None = None
    if "traffic.packet_priority_source_set" in values:
        value, where = values["traffic.packet_priority_source_set"]
        sources = frozenset(_list(value, where))
        if sources not in _SOURCES:
            raise where.error(f"packet_priority_source_set {value!r} must name dscp and/or 802.1p")
        trust = _SOURCES[sources]
    dscp: dict[int, int] = {}
    seen: dict[int, set[int]] = {}
    for cos in range(8):
        entry = values.get(f"traffic.cos_{cos}.priority_source.dscp")
        if entry is None:
            continue
        for d in _ints(entry[0], entry[1], "dscp", 63):
            dscp[d] = cos
            seen.setdefault(d, set()).add(cos)
    conflicts = {d: frozenset(c) for d, c in seen.items() if len(c) > 1}
    for d in conflicts:
        del dscp[d]  # which list switchd honours is not documented: the class is unknown

    def groups(prefix: str) -> dict[str, _Group]:
        listed = values.get(f"{prefix}.port_group_list")
        if listed is None:
            return {}
        out: dict[str, _Group] = {}
        for name in _list(*listed):
            keys = {k[len(prefix) + len(name) + 2:]: v for k, v in values.items()
                    if k.startswith(f"{prefix}.{name}.")}
            if not keys:
                raise listed[1].error(f"{prefix}.port_group_list names {name!r} but no {prefix}.{name}.* keys "
                                      "exist; switchd reads the keys by that name")
            out[name] = _Group(keys)
        return out

    ports: dict[str, dict[str, object]] = {}
    for group in groups("pfc").values():
        cos_v = group.get("cos_list")
        pset = group.get("port_set")
        if cos_v is None or pset is None:
            raise _error(source, "pfc group needs cos_list and port_set")
        prios = frozenset(_ints(cos_v[0], cos_v[1], "cos_list", 7))
        room = None
        if group.get("xoff_size") is not None:
            xoff = parse_int(group.keys["xoff_size"][0], group.keys["xoff_size"][1], what="xoff_size", lo=0)
            delta_v = group.get("xon_delta")
            delta = parse_int(delta_v[0], delta_v[1], what="xon_delta", lo=0) if delta_v else None
            size_v = group.get("port_buffer_bytes")
            size = parse_int(size_v[0], size_v[1], what="port_buffer_bytes", lo=0) if size_v else 0
            room = Headroom(xoff, max(0, xoff - (delta or 0)), size, hysteresis_bytes=delta)
        cable_v = group.get("cable_length")
        cable = parse_float(cable_v[0], cable_v[1], what="cable_length") if cable_v else None
        for name in _ports(*pset):
            port = ports.setdefault(name, {})
            port["pfc"] = prios
            if room is not None:
                port["headroom"] = dict.fromkeys(prios, room)
            if cable is not None:
                port["cable"] = cable
    for group in groups("ecn_red").values():
        cos_v = group.get("cos_list")
        pset = group.get("port_set")
        if cos_v is None or pset is None:
            raise _error(source, "ecn_red group needs cos_list and port_set")
        lo_v, hi_v = group.get("min_threshold_bytes"), group.get("max_threshold_bytes")
        prob_v, ecn_v = group.get("probability"), group.get("ecn_enable")
        profile = EcnProfile(
            parse_int(lo_v[0], lo_v[1], what="min_threshold_bytes", lo=0) if lo_v else 0,
            parse_int(hi_v[0], hi_v[1], what="max_threshold_bytes", lo=0) if hi_v else 0,
            parse_float(prob_v[0], prob_v[1], what="probability") if prob_v else 100.0,
            _bool(*ecn_v) if ecn_v else False,
        )
        for name in _ports(*pset):
            ecn = ports.setdefault(name, {}).setdefault("ecn", {})
            assert isinstance(ecn, dict)
            ecn.update(dict.fromkeys(_ints(cos_v[0], cos_v[1], "cos_list", 7), profile))
    for group in groups("link_pause").values():
        pset = group.get("port_set")
        if pset is not None:
            for name in _ports(*pset):
                ports.setdefault(name, {})["link_pause"] = True

    strict: set[int] = set()
    weights: dict[int, int] = {}
    pgs = {k.split(".")[1] for k in values if k.startswith("priority_group.") and k.endswith(".cos_list")}
    for pg in sorted(pgs):
        cos_v = values[f"priority_group.{pg}.cos_list"]
        weight_v = values.get(f"priority_group.{pg}.weight")
        if weight_v is None:
            continue
        weight = parse_int(weight_v[0], weight_v[1], what=f"priority_group.{pg}.weight", lo=0, hi=127)
        for cos in _ints(cos_v[0], cos_v[1], "cos_list", 7):
            (strict.add(cos) if weight == 0 else weights.__setitem__(cos, weight))
    for cos in range(8):
        bw = values.get(f"default_egress_sched.cos_{cos}.bw_percent")
        if bw is not None:
            weights[cos] = parse_int(bw[0], bw[1], what="bw_percent", lo=0, hi=100)

    out = tuple(PortQos(
        name=name,
        pfc_priorities=p.get("pfc"),  # type: ignore[arg-type]
        headroom=p.get("headroom"),  # type: ignore[arg-type]
        cable_length_m=p.get("cable"),  # type: ignore[arg-type]
        ecn=p.get("ecn"),  # type: ignore[arg-type]
        link_pause=p.get("link_pause"),  # type: ignore[arg-type]
    ) for name, p in ports.items())
    return Deployed(
        device=device or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=dscp, trust=trust, strict_queues=frozenset(strict) if pgs else None, queue_weights=weights,
        # Ports outside every PFC group have PFC off, but the file lists no such ports: no device default.
        pfc_priorities=None, ports=out,
        dscp_conflicts=conflicts,
    )


def _error(source: str, message: str) -> Exception:
    return Where(source).error(message)
