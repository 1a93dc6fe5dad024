"""Cumulus Linux datapath QoS files: classic ``/etc/cumulus/datapath/traffic.conf`` (3.x/4.x) and the
``/etc/cumulus/datapath/qos/qos_features.conf`` that replaced it in 5.x, both ``key = value`` lines.

Read: ``traffic.packet_priority_source_set`` (trust), ``traffic.cos_N.priority_source.dscp|8021p`` (DSCP ->
switch priority N; a DSCP in two lists is a conflict), ``pfc.port_group_list`` groups (``cos_list``,
``port_set``, ``port_buffer_bytes``, ``xoff_size``, ``xon_delta`` = the hysteresis, ``cable_length``),
``ecn_red.port_group_list`` groups (``cos_list``, ``port_set``, ``ecn_enable``, ``min/max_threshold_bytes``,
``probability``), ``link_pause.port_group_list`` port sets, ``priority_group.NAME.cos_list`` with
``priority_group.NAME.weight`` (0 = strict, as the file's own comment says) and 5.x
``default_egress_sched.cos_N.bw_percent``. A group named in a ``port_group_list`` must have its keys: switchd
reads keys by the listed name, so a list naming one group and keys naming another configures nothing. That is
read as what the switch does (nothing) and reported as a defect of the file, which ``fabric lint`` turns into a
finding; NVIDIA's own RoCE page printed such a file.

``pfc_watchdog.port_group_list`` groups (5.x ``qos_features.conf``) put the PFC watchdog on their ``port_set``; its
timers live in ``/etc/cumulus/switchd.conf`` (``pfc_wd.poll_interval``, ``pfc_wd.robustness``), not here.

A file pasted in part is read for what it holds: DSCP lists that do not cover all 64 DSCPs leave the map unknown
(an unlisted DSCP would otherwise read as priority 0), a group without its ``ecn_enable`` line leaves ECN unknown.
A file is read as whole (a feature it does not configure is off, so a lossless port outside every
``pfc_watchdog`` group has no watchdog) when it holds both the first section of the shipped file,
``traffic.packet_priority_source_set``, and its egress scheduling section, which comes last (4.x
``scheduling.algorithm`` / ``priority_group.NAME.weight``, 5.x ``default_egress_sched.*``): the sections sit in a fixed
order, so an excerpt that holds both holds everything between them. Otherwise a missing watchdog is unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import ConfigDefect, Deployed, EcnProfile, Headroom, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._common import Where, device_from_source, parse_float, parse_int
from tensorfabric.fabric.parsers._read import Reading, bare, markers

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "cumulus-datapath"
NAME = "Cumulus traffic.conf"
SUFFIXES = (".traffic_conf",)
EXPECTED = ("Cumulus datapath 'key = value' lines (traffic.cos_N.priority_source.dscp, pfc.port_group_list, "
            "ecn_red.port_group_list, priority_group.*)")
MARKERS = markers(
    ("traffic.packet_priority_source_set", r"^\s*#?\s*traffic\.packet_priority_source_set\s*="),
    ("traffic.cos_N.priority_source", r"^\s*#?\s*traffic\.cos_\d\.priority_source\."),
    ("pfc.port_group_list", r"^\s*#?\s*pfc\.port_group_list\s*="),
    ("pfc.GROUP.*", r"^\s*#?\s*pfc\.[\w-]+\.(?:cos_list|port_set|xoff_size|xon_delta|port_buffer_bytes)\s*="),
    ("ecn_red.*", r"^\s*#?\s*ecn_red\.[\w.-]+\s*="),
    ("priority_group.*", r"^\s*#?\s*priority_group\.\w+\.(?:cos_list|weight)\s*="),
    ("default_egress_sched.*", r"^\s*default_egress_sched\.cos_\d"),
    ("link_pause.*", r"^\s*#?\s*link_pause\.[\w.-]+\s*="),
    ("pfc_watchdog.*", r"^\s*#?\s*pfc_watchdog\.[\w.-]+\s*="),
)
_LINE = re.compile(r"^([A-Za-z0-9_.-]+)[ \t]*=[ \t]*(.*)$")
_PORT = re.compile(r"^([a-z]+\d*s|[a-z]+)(\d+)(?:-(?:[a-z]+\d*s|[a-z]+)?(\d+))?$")
_PREFIXES = ("traffic.", "pfc.", "ecn_red.", "priority_group.", "default_egress_sched.", "link_pause.", "scheduling.",
             "pfc_watchdog.")
_SOURCES: dict[frozenset[str], Trust] = {
    frozenset({"dscp"}): "dscp", frozenset({"802.1p"}): "pcp", frozenset({"cos"}): "pcp",
    frozenset({"802.1p", "dscp"}): "pcp,dscp", frozenset({"cos", "dscp"}): "pcp,dscp",
}


def _list(value: str, where: Where) -> list[str]:
    if not (value.startswith("[") and value.endswith("]")):
        raise where.error(f"{value[:40]!r} must be a list such as [3] or [0,1,2]")
    return [item.strip() for item in value[1:-1].split(",") if item.strip()]


def _ints(value: str, where: Where, what: str, hi: int) -> list[int]:
    return [parse_int(item, where, what=what, lo=0, hi=hi) for item in _list(value, where)]


def _ports(value: str, where: Where) -> list[str]:
    names: list[str] = []
    for item in (p.strip() for p in value.split(",")):
        if item == "allports":
            names.append("*")
            continue
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


_WATCHDOG = Watchdog(enabled=True)
"""What a pfc_watchdog group says: on; the action and timers are switchd.conf's (not in this file)."""


@dataclass
class _Group:
    keys: dict[str, tuple[str, Where]] = field(default_factory=dict)

    def get(self, key: str) -> tuple[str, Where] | None:
        return self.keys.get(key)


class _Keys:
    """The ``key = value`` lines of the file, and which of them a rule has read."""

    def __init__(self, r: Reading) -> None:
        self.r = r
        self.values: dict[str, tuple[str, Where]] = {}
        self.numbers: dict[str, int] = {}
        self.used: set[str] = set()
        self.defects: list[ConfigDefect] = []
        for line in r.content():
            text = line.text.strip()
            if line.kind != "text" or not text or text.startswith("#"):
                continue
            hash_at = text.find(" #")  # datapath.conf writes "... = 50.0  # all priority groups"
            text = text[:hash_at].rstrip() if hash_at > 0 else text
            match = _LINE.match(text)
            if match is None or not match.group(1).startswith(_PREFIXES):
                continue
            self.values[match.group(1)] = (match.group(2).strip(), Where(r.source, line.number, text))
            self.numbers[match.group(1)] = line.number

    def take(self, key: str) -> tuple[str, Where] | None:
        found = self.values.get(key)
        if found is not None:
            self.used.add(key)
        return found

    def groups(self, prefix: str) -> dict[str, _Group]:
        """The groups ``prefix.port_group_list`` names, each with its ``prefix.NAME.*`` keys."""
        listed = self.take(f"{prefix}.port_group_list")
        if listed is None:
            return {}
        out: dict[str, _Group] = {}
        try:
            names = _list(*listed)
        except ParseError as exc:
            self.r.warn(listed[1].line, bare(exc))
            return {}
        for name in names:
            keys = {k[len(prefix) + len(name) + 2:]: v for k, v in self.values.items()
                    if k.startswith(f"{prefix}.{name}.")}
            if not keys:
                self._unkeyed(prefix, name, names, listed[1])
                continue
            self.used.update(f"{prefix}.{name}.{k}" for k in keys)
            out[name] = _Group(keys)
        return out

    def _unkeyed(self, prefix: str, name: str, names: list[str], where: Where) -> None:
        """A listed group without keys: unknown when no key of the feature is in the text, else a defect (the
        keys name another group, and switchd reads them by the listed name)."""
        others = sorted({k.split(".")[1] for k in self.values if k.startswith(f"{prefix}.") and k.count(".") >= 2
                         and k.split(".")[1] not in (*names, "port_group_list")})
        if not others:
            # Its keys may lie outside the excerpt: unknown, not a defect.
            self.r.warn(where.line, f"{prefix}.port_group_list names {name!r} but no {prefix}.{name}.* keys are in "
                                    "this text; that group is unknown")
            return
        self.defects.append(ConfigDefect(where.line, f"{prefix}.port_group_list names {name!r} but no "
                            f"{prefix}.{name}.* keys exist (the keys name {', '.join(repr(o) for o in others)}); "
                            f"switchd reads the keys by the listed name, so this {prefix} group configures nothing",
                            f"rename the keys to {prefix}.{name}.* or list {others[0]} in {prefix}.port_group_list"))
        self.used.update(k for k in self.values if k.startswith(f"{prefix}.") and k.split(".")[1] in others)


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    keys = _Keys(r)
    trust = _trust(keys)
    dscp, conflicts = _dscp(keys)
    ports: dict[str, dict[str, object]] = {}
    for name, group in keys.groups("pfc").items():
        with r.statement(keys.numbers.get("pfc.port_group_list")):
            _pfc_group(name, group, ports, r)
    for name, group in keys.groups("ecn_red").items():
        with r.statement(keys.numbers.get("ecn_red.port_group_list")):
            _ecn_group(name, group, ports, r)
    for feature, attr, value in (("link_pause", "link_pause", True), ("pfc_watchdog", "watchdog", _WATCHDOG)):
        for group in keys.groups(feature).values():
            pset = group.get("port_set")
            if pset is not None:
                with r.statement(pset[1].line):
                    for name in _ports(*pset):
                        ports.setdefault(name, {})[attr] = value
    strict, weights, sched_known = _scheduling(keys)
    for key in keys.used:
        r.use(keys.numbers.get(key))

    default = ports.pop("*", None)
    out = tuple(PortQos(
        name=name,
        pfc_priorities=p.get("pfc"),  # type: ignore[arg-type]
        headroom=p.get("headroom"),  # type: ignore[arg-type]
        cable_length_m=p.get("cable"),  # type: ignore[arg-type]
        ecn=p.get("ecn"),  # type: ignore[arg-type]
        link_pause=p.get("link_pause"),  # type: ignore[arg-type]
        watchdog=p.get("watchdog"),  # type: ignore[arg-type]
    ) for name, p in ports.items())
    values = keys.values
    scheduling = "scheduling.algorithm" in values or any(
        k.startswith("default_egress_sched.") or (k.startswith("priority_group.") and k.endswith(".weight"))
        for k in values)
    return Deployed(
        device=device or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=dscp, trust=trust, strict_queues=frozenset(strict) if sched_known else None,
        queue_weights=weights,
        # Ports outside every PFC group have PFC off, but the file lists no such ports: no device default
        # (except "allports", which is every port).
        pfc_priorities=default.get("pfc") if default else None,  # type: ignore[arg-type]
        ecn=default.get("ecn") if default else None,  # type: ignore[arg-type]
        headroom=default.get("headroom", {}) if default else {},  # type: ignore[arg-type]
        watchdog=default.get("watchdog") if default else None,  # type: ignore[arg-type]
        ports=out, dscp_conflicts=conflicts, defects=tuple(keys.defects),
        complete="traffic.packet_priority_source_set" in values and scheduling,
    )


def _trust(keys: _Keys) -> Trust | None:
    source_set = keys.take("traffic.packet_priority_source_set")
    if source_set is None:
        return None
    with keys.r.statement(source_set[1].line):
        sources = frozenset(_list(*source_set))
        if sources not in _SOURCES:
            raise source_set[1].error(f"packet_priority_source_set {source_set[0]!r} must name dscp and/or 802.1p")
        return _SOURCES[sources]
    return None  # the statement was refused (a warning): trust unknown


def _dscp(keys: _Keys) -> tuple[dict[int, int], dict[int, frozenset[int]]]:
    """The DSCP map of the ``traffic.cos_N.priority_source.dscp`` lists, and the DSCPs two lists claim."""
    dscp: dict[int, int] = {}
    seen: dict[int, set[int]] = {}
    for cos in range(8):
        entry = keys.take(f"traffic.cos_{cos}.priority_source.dscp")
        if entry is None:
            continue
        with keys.r.statement(entry[1].line):
            for d in _ints(entry[0], entry[1], "dscp", 63):
                dscp[d] = cos
                seen.setdefault(d, set()).add(cos)
    conflicts = {d: frozenset(c) for d, c in seen.items() if len(c) > 1}
    for d in conflicts:
        del dscp[d]  # which list switchd honours is not documented: the class is unknown
    if seen and len(seen) < 64:
        keys.r.warn(None, f"the traffic.cos_N.priority_source.dscp lists name {len(seen)} of 64 DSCPs (a part of the "
                          "file?); the DSCP map is left unknown")
        dscp = {}
    return dscp, conflicts


def _scheduling(keys: _Keys) -> tuple[set[int], dict[int, int], bool]:
    """Strict CoS (priority groups of weight 0), weights, and whether every priority group's weight is known."""
    strict: set[int] = set()
    weights: dict[int, int] = {}
    pgs = {k.split(".")[1] for k in keys.values if k.startswith("priority_group.") and k.endswith(".cos_list")}
    sched_known = bool(pgs)
    for pg in sorted(pgs):
        cos_v = keys.take(f"priority_group.{pg}.cos_list")
        weight_v = keys.take(f"priority_group.{pg}.weight")
        if cos_v is None or weight_v is None:
            sched_known = sched_known and weight_v is not None
            continue
        with keys.r.statement(weight_v[1].line):
            weight = parse_int(weight_v[0], weight_v[1], what=f"priority_group.{pg}.weight", lo=0, hi=127)
            for cos in _ints(cos_v[0], cos_v[1], "cos_list", 7):
                (strict.add(cos) if weight == 0 else weights.__setitem__(cos, weight))
    for cos in range(8):
        bw = keys.take(f"default_egress_sched.cos_{cos}.bw_percent")
        if bw is not None:
            with keys.r.statement(bw[1].line):
                weights[cos] = parse_int(bw[0], bw[1], what="bw_percent", lo=0, hi=100)
    return strict, weights, sched_known


def _pfc_group(name: str, group: _Group, ports: dict[str, dict[str, object]], r: Reading) -> None:
    cos_v = group.get("cos_list")
    pset = group.get("port_set")
    if cos_v is None or pset is None:
        r.warn(None, f"pfc group {name!r} lacks cos_list or port_set; its PFC is unknown")
        return
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
    for port_name in _ports(*pset):
        port = ports.setdefault(port_name, {})
        port["pfc"] = prios
        if room is not None:
            port["headroom"] = dict.fromkeys(prios, room)
        if cable is not None:
            port["cable"] = cable


def _ecn_group(name: str, group: _Group, ports: dict[str, dict[str, object]], r: Reading) -> None:
    cos_v = group.get("cos_list")
    pset = group.get("port_set")
    lo_v, hi_v = group.get("min_threshold_bytes"), group.get("max_threshold_bytes")
    prob_v, ecn_v = group.get("probability"), group.get("ecn_enable")
    if cos_v is None or pset is None or ecn_v is None or lo_v is None or hi_v is None:
        # Without ecn_enable or a threshold the file does not say how packets are marked: unknown, not off.
        r.warn(None, f"ecn_red group {name!r} lacks cos_list, port_set, ecn_enable or a threshold; its ECN is "
                     "unknown")
        return
    profile = EcnProfile(
        parse_int(lo_v[0], lo_v[1], what="min_threshold_bytes", lo=0),
        parse_int(hi_v[0], hi_v[1], what="max_threshold_bytes", lo=0),
        parse_float(prob_v[0], prob_v[1], what="probability") if prob_v else 100.0,
        _bool(*ecn_v),
    )
    for port_name in _ports(*pset):
        ecn = ports.setdefault(port_name, {}).setdefault("ecn", {})
        assert isinstance(ecn, dict)
        ecn.update(dict.fromkeys(_ints(cos_v[0], cos_v[1], "cos_list", 7), profile))
