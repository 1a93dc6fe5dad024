"""SONiC ``config_db.json`` fragment for one switch: maps, PFC, ECN/WRED, schedulers, static headroom, watchdog.

Load it with ``sonic-cfggen -j FILE --write-to-db`` (or ``config load``). Headroom is rendered in
*traditional* mode, a static ``BUFFER_PROFILE`` per port computed from the spec (speed, cable length, MTU,
ASIC), because the dynamic model's own result depends on image-specific tables this file cannot see.
Every DSCP is mapped explicitly so nothing falls back to the stock ``AZURE`` map, which sends DSCP 26 to
lossy TC 1 (sonic-buildimage ``qos_config.j2``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields as dataclass_fields
from json.encoder import encode_basestring_ascii
from typing import Any

from tensorfabric import roce
from tensorfabric.fabric.deployed import EcnProfile, Headroom
from tensorfabric.fabric.plan import PortPlan, SwitchPlan
from tensorfabric.fabric.renderers._escape import json_text
from tensorfabric.fabric.renderers._text import metres, number, speed_label

__all__ = ["EXTENSION", "TARGET", "render"]

TARGET = "sonic"
EXTENSION = "json"
SHARES = True  # render(plan, memo): alike devices of one render share their common part
_MAP = "ROCE"
_PRIORITIES = range(8)
_Table = dict[str, dict[str, str]]


def _ints(table: dict[int, int]) -> dict[str, str]:
    return {str(k): str(v) for k, v in sorted(table.items())}


def _csv(values: tuple[int, ...] | list[int]) -> str:
    return ",".join(str(v) for v in sorted(values))


def _dumps(table: dict[str, Any], indent: str = "", memo: dict[Any, str] | None = None) -> str:
    """``json.dumps(table, indent=2)`` for nested dicts of strings: the standard encoder falls back to pure Python
    whenever ``indent`` is set, which made it most of a large fabric's render. Anything else is a TypeError.

    ``memo`` keeps the text of each flat table by content: every port repeats the same queue, PG and QoS-map entries.
    """
    if not table:
        return "{}"
    memo = {} if memo is None else memo
    inner = indent + "  "
    parts = []
    for key, value in table.items():
        if key.__class__ is not str:
            raise TypeError(key)
        if value.__class__ is str:
            parts.append(f"{inner}{encode_basestring_ascii(key)}: {encode_basestring_ascii(value)}")
        elif value.__class__ is dict:
            try:
                seen: Any = (inner, tuple(value.items()))
                text = memo.get(seen)
            except TypeError:  # a table of tables: not kept
                seen, text = None, None
            if text is None:
                text = _dumps(value, inner, memo)
                if seen is not None:
                    memo[seen] = text
            parts.append(f"{inner}{encode_basestring_ascii(key)}: {text}")
        else:
            raise TypeError(value)
    return "{\n" + ",\n".join(parts) + "\n" + indent + "}"


def _wred(profile: EcnProfile) -> dict[str, str]:
    out = {"ecn": "ecn_all" if profile.ecn else "ecn_none"}
    for colour in ("green", "yellow", "red"):
        out[f"wred_{colour}_enable"] = "true"
        out[f"{colour}_min_threshold"] = str(profile.kmin_bytes)
        out[f"{colour}_max_threshold"] = str(profile.kmax_bytes)
        out[f"{colour}_drop_probability"] = number(profile.pmax_percent)
    return out


def _queues(plan: SwitchPlan, wred_names: dict[EcnProfile, str]) -> tuple[_Table, _Table]:
    """The SCHEDULER and QUEUE tables: each port's queues get their scheduler and, when lossless, the WRED profile."""
    schedulers: _Table = {}
    queues: _Table = {}
    for port in plan.ports:
        for prio in _PRIORITIES:
            entry = {}
            if prio in plan.strict:
                schedulers["scheduler.strict"] = {"type": "STRICT"}
                entry["scheduler"] = "scheduler.strict"
            elif prio in plan.ets:
                name = f"scheduler.dwrr{plan.ets[prio]}"
                schedulers[name] = {"type": "DWRR", "weight": str(plan.ets[prio])}
                entry["scheduler"] = name
            if prio in plan.lossless and port.lossless and port.ecn in wred_names:
                entry["wred_profile"] = wred_names[port.ecn]
            if entry:
                queues[f"{port.name}|{prio}"] = entry
    return dict(sorted(schedulers.items())), queues


def _buffers(plan: SwitchPlan) -> tuple[_Table, _Table]:
    """The BUFFER_PROFILE and BUFFER_PG tables: one lossless profile per distinct headroom, named as SONiC's
    buffer manager names its own (speed and cable length), with a suffix where two ports of that name differ."""
    profiles: dict[str, tuple[Headroom, int | None, int]] = {}
    pgs: _Table = {}
    for port in plan.ports:
        if port.headroom is None or not port.lossless:
            continue
        cable = metres(port.cable_length_m) if port.cable_length_m is not None else "default"
        base = f"pg_lossless_{int(port.speed_bps // 1_000_000)}_{cable}_profile"
        name = base
        wanted = (port.headroom, port.xon_offset, port.dynamic_th)
        while name in profiles and profiles[name] != wanted:
            name = f"{base}_{port.mtu}" if name == base else f"{name}_"
        profiles[name] = wanted
        for prio in plan.lossless:
            pgs[f"{port.name}|{prio}"] = {"profile": name}
    buffer_profiles: _Table = {}
    for name, (room, xon_offset, dynamic_th) in profiles.items():
        fields = {"pool": "ingress_lossless_pool", "xon": str(room.xon_bytes), "xoff": str(room.xoff_bytes),
                  "size": str(room.size_bytes), "dynamic_th": str(dynamic_th)}
        if xon_offset is not None:
            fields["xon_offset"] = str(xon_offset)  # Broadcom SKUs carry it in the profile
        buffer_profiles[name] = fields
    return buffer_profiles, pgs


def render(plan: SwitchPlan, memo: dict[tuple[Any, ...], list[str]] | None = None) -> str:
    """The switch's CONFIG_DB fragment. ``memo``, shared over one fabric's switches, keeps every table after PORT
    (the only tables that name the switch or its peers) by the rest of the plan: the leaves of a large fabric
    differ in little else than their name and the hosts cabled to them."""
    head: dict[str, Any] = {"DEVICE_METADATA": {"localhost": {"hostname": json_text(plan.name, "switches name")}}}
    head["PORT"] = {json_text(p.name, f"switches[{plan.name}].ports"): {
        "speed": str(int(p.speed_bps // 1_000_000)), "mtu": str(p.mtu),
        "description": json_text(p.peer, "link peer")} for p in plan.ports}
    try:
        if memo is None:
            rest = _parts(_tables(plan), {})
        else:
            key = _rest_key(plan)
            rest = memo.get(key) or memo.setdefault(key, _parts(_tables(plan), {}))
        return "{\n" + ",\n".join(_parts(head, {}) + rest) + "\n}\n"
    except TypeError:  # a value _dumps does not write (or a key that cannot be hashed): the standard encoder
        return json.dumps(head | _tables(plan), indent=2) + "\n"


_PLAN_FIELDS = tuple(f.name for f in dataclass_fields(SwitchPlan) if f.name not in ("name", "ports"))
_PORT_FIELDS = tuple(f.name for f in dataclass_fields(PortPlan) if f.name != "peer")


def _rest_key(plan: SwitchPlan) -> tuple[Any, ...]:
    """Every field ``_tables`` may read, as one hashable value: the plan's and each port's fields but the names
    and peers, mappings as item tuples, each scalar with its type (``400`` and ``400.0`` are equal keys, but
    ``str()`` writes them apart)."""
    top = tuple(tuple(v.items()) if isinstance(v, Mapping) else v
                for v in (getattr(plan, name) for name in _PLAN_FIELDS))
    ports = tuple(tuple(getattr(port, name) for name in _PORT_FIELDS) for port in plan.ports)
    return top, tuple(map(type, top)), ports, tuple(tuple(map(type, port)) for port in ports)


def _parts(tables: dict[str, Any], memo: dict[Any, str]) -> list[str]:
    """The top-level members of ``_dumps(tables)``, one string each, so documents can be put together from them."""
    return [f"  {encode_basestring_ascii(key)}: {_dumps(value, '  ', memo) if value.__class__ is dict else _bad(value)}"
            for key, value in tables.items()]


def _bad(value: Any) -> str:
    raise TypeError(value)


def _tables(plan: SwitchPlan) -> dict[str, Any]:
    """Every table after PORT; reads neither the switch's name nor its ports' peers."""
    lossless = plan.lossless
    db: dict[str, Any] = {}
    if plan.trust == "dscp":
        db["DSCP_TO_TC_MAP"] = {_MAP: _ints({d: plan.dscp_to_priority.get(d, 0) for d in range(64)})}
    else:
        db["DOT1P_TO_TC_MAP"] = {_MAP: _ints({p: p for p in _PRIORITIES})}
    db["TC_TO_PRIORITY_GROUP_MAP"] = {_MAP: _ints({p: p if p in lossless else 0 for p in _PRIORITIES})}
    db["TC_TO_QUEUE_MAP"] = {_MAP: _ints({p: p for p in _PRIORITIES})}
    db["MAP_PFC_PRIORITY_TO_QUEUE"] = {_MAP: _ints({p: p for p in lossless})}

    wd_on = plan.watchdog.enabled
    port_qos: dict[str, dict[str, str]] = {}
    for port in plan.ports:
        entry = {"dscp_to_tc_map" if plan.trust == "dscp" else "dot1p_to_tc_map": _MAP,
                 "tc_to_pg_map": _MAP, "tc_to_queue_map": _MAP, "pfc_to_queue_map": _MAP,
                 "pfc_enable": _csv(lossless) if port.lossless else ""}
        entry["pfcwd_sw_enable"] = _csv(lossless) if port.lossless and wd_on else ""
        port_qos[port.name] = entry
    db["PORT_QOS_MAP"] = port_qos

    wred_names: dict[EcnProfile, str] = {}
    for speed, profile in plan.ecn_profiles().items():
        if plan.ecn_enabled:
            wred_names.setdefault(profile, f"ROCE_LOSSLESS_{speed_label(speed)}")
    db["WRED_PROFILE"] = {name: _wred(profile) for profile, name in wred_names.items()}

    db["SCHEDULER"], db["QUEUE"] = _queues(plan, wred_names)
    db["BUFFER_PROFILE"], db["BUFFER_PG"] = _buffers(plan)
    db["CABLE_LENGTH"] = {"AZURE": {p.name: metres(p.cable_length_m) for p in plan.ports
                                    if p.cable_length_m is not None}}
    wd = plan.watchdog
    pfc_wd: dict[str, dict[str, str]] = {"GLOBAL": {"POLL_INTERVAL": number(wd.polling_ms or roce.PFCWD_POLL_MS)}}
    if wd_on:
        for port in plan.ports:
            if port.lossless:
                pfc_wd[port.name] = {"action": wd.action or roce.PFCWD_ACTION,
                                     "detection_time": number(wd.detection_ms or roce.PFCWD_DETECTION_MS),
                                     "restoration_time": number(wd.restoration_ms or roce.PFCWD_RESTORATION_MS)}
    db["PFC_WD"] = pfc_wd
    return db
