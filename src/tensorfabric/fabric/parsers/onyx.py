"""NVIDIA (Mellanox) Onyx / MLNX-OS running-config (the QoS/PFC subset) into a :class:`Deployed`.

Onyx prints every interface setting as a one-line command that names its ports (``interface ethernet
1/1-1/16 traffic-class 3 congestion-control ecn minimum-absolute 150 maximum-absolute 1500``), with ``##``
section comments and three-space indentation in ``show running-config``. Read per port: ``qos trust L2|L3|both``
(L2 = PCP, the default; L3 = DSCP), ``traffic-class T congestion-control ecn|red minimum-absolute KB
maximum-absolute KB`` (or ``minimum-relative``/``maximum-relative`` percent), ``traffic-class T dcb ets strict`` /
``wrr W``, ``traffic-class T bind switch-priority P``, ``dcb priority-flow-control mode on [force]``, ``mtu``,
``no switchport force`` (routed), ``pfc-wd`` / ``dcb priority-flow-control watch-dog enable``, ``qos rewrite``.
The same settings typed in an interface's own mode (``interface ethernet 1/1`` alone, then indented lines or lines
at its ``(config interface ethernet 1/1) #`` prompt) are read the same way.
Globally: ``dcb priority-flow-control enable [force]`` and ``dcb priority-flow-control priority N enable``,
``traffic pool NAME type lossless|lossy`` with ``map switch-priority N`` (a priority in a lossy pool has no
lossless buffer), ``hostname``, and the Onyx 3.8.2 ``roce`` / ``roce lossless`` / ``roce lossy`` one-liners.

Onyx has one DSCP table and prints no line for it unless changed: DSCP >> 3 is the switch-priority (26 -> 3,
48 -> 6), so under trust L3 the record holds that table (``default_dscp_map``). ``roce`` (lossless, the default
mode) is read as its documented preset: trust L3, PFC on switch-priority 3, ECN on traffic class 3 and CNPs
(switch-priority 6) strict; the preset's thresholds are not printed, so its ECN profile carries the 150/1500 KB
the RoCE guides use and a note says so. ECN thresholds stay in KB (``kbytes``). ``--`` lines and ``##``/``!``
comments are skipped. A whole config (its ``## Running-config generated`` header and a ``hostname``) leaves the
Onyx defaults where it says nothing: trust L2, no ECN, no strict class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric import roce
from tensorfabric.fabric.deployed import Deployed, EcnProfile, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._common import (
    Where,
    device_from_source,
    expand_interfaces,
    parse_int,
    parse_priorities,
    strip_inline_comment,
)
from tensorfabric.fabric.parsers._read import Reading, markers

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "onyx"
NAME = "Onyx"
SUFFIXES = (".onyx",)
EXPECTED = ("Onyx / MLNX-OS QoS commands (interface ethernet 1/1 traffic-class 3 congestion-control ecn ..., "
            "dcb priority-flow-control priority 3 enable, interface ethernet 1/1 qos trust L3, traffic pool, roce)")
MARKERS = markers(
    ("traffic-class T congestion-control", r"^\s*(?:interface \S+ \S+ )?traffic-class \d congestion-control\b"),
    ("traffic-class T dcb ets", r"^\s*(?:interface \S+ \S+ )?traffic-class \d dcb ets\b"),
    ("dcb priority-flow-control", r"^\s*(?:interface \S+ \S+ )?dcb priority-flow-control\b"),
    ("qos trust L2|L3|both", r"^\s*(?:interface \S+ \S+ )?qos trust (?:L2|L3|both|port)\b"),
    ("traffic pool", r"^\s*traffic pool \S+ (?:type|map|memory)\b"),
    ("interface ethernet 1/1 <command>", r"^\s*interface (?:ethernet|port-channel|mlag-port-channel) [\d/,-]+ \S"),
    ("roce", r"^\s*roce(?: lossless| lossy| semi-lossless)?\s*$"),
    ("pfc-wd", r"^\s*(?:interface \S+ \S+ )?pfc-wd\b"),
    ("ingress-buffer / egress-buffer", r"^\s*(?:interface \S+ \S+ )?(?:ingress|egress)-buffer \S"),
    ("Onyx prompt", r"^\s*(?:[\w.-]{1,64} (?:\[[\w.: -]{1,40}\] )?)?\(config(?: interface [\w/ -]{1,40})?\) #"),
)
_TRUST: dict[str, Trust] = {"L2": "pcp", "L3": "dscp", "both": "pcp,dscp"}
_HEADER = "Running-config generated"
_KINDS = ("ethernet", "port-channel", "mlag-port-channel")
_ROCE_ECN = EcnProfile(150, 1500, 100.0, True, unit="kbytes")


@dataclass
class _Port:
    trust: Trust | None = None
    ecn: dict[int, EcnProfile] = field(default_factory=dict)
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)
    ets_seen: bool = False
    pfc_mode: bool | None = None
    mtu: int | None = None
    routed: bool | None = None
    watchdog: bool | None = None
    bound: dict[int, int] = field(default_factory=dict)


@dataclass
class _State:
    hostname: str | None = None
    pfc_global: bool | None = None
    pfc_prios: set[int] = field(default_factory=set)
    pfc_seen: bool = False
    pools: dict[str, str] = field(default_factory=dict)
    pool_prios: dict[str, set[int]] = field(default_factory=dict)
    roce: str | None = None
    ports: dict[str, _Port] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _thresholds(w: list[str], where: Where) -> tuple[int, int, str]:
    for lo, hi, unit in (("minimum-absolute", "maximum-absolute", "kbytes"),
                         ("minimum-relative", "maximum-relative", "percent")):
        if lo in w and hi in w:
            a, b = w.index(lo) + 1, w.index(hi) + 1
            if a >= len(w) or b >= len(w):
                break
            return (parse_int(w[a], where, what=lo, lo=0), parse_int(w[b], where, what=hi, lo=0), unit)
    raise where.error("congestion-control needs 'minimum-absolute KB maximum-absolute KB' (or -relative %)")


def _port_command(port: _Port, w: list[str], where: Where) -> bool:
    """One interface setting (the words after ``interface ethernet 1/1``); False when it is not a QoS one."""
    if w[:2] == ["qos", "trust"] and len(w) == 3:
        if w[2] not in _TRUST:
            raise where.error(f"qos trust {w[2]!r} is not L2, L3 or both; classification unknown")
        port.trust = _TRUST[w[2]]
    elif w[:1] == ["traffic-class"] and len(w) >= 3:
        tc = parse_int(w[1], where, what="traffic-class", lo=0, hi=7)
        if w[2] == "congestion-control" and len(w) >= 4:
            kmin, kmax, unit = _thresholds(w, where)
            # 'red' drops, 'ecn' marks, 'both' marks ECN-capable packets and drops the rest
            port.ecn[tc] = EcnProfile(kmin, kmax, 100.0, w[3] in ("ecn", "both"), unit="percent"
                                      if unit == "percent" else "kbytes")
        elif w[2:5] == ["dcb", "ets", "strict"]:
            port.strict.add(tc)
            port.ets_seen = True
        elif w[2:4] == ["dcb", "ets"] and len(w) == 6 and w[4] == "wrr":
            port.weights[tc] = parse_int(w[5], where, what="wrr weight", lo=0, hi=100)
            port.ets_seen = True
        elif w[2:4] == ["bind", "switch-priority"] and len(w) >= 5:
            for prio in parse_priorities(",".join(w[4:]), where, what="switch-priority"):
                port.bound[prio] = tc
        else:
            return False
    elif w[:3] == ["dcb", "priority-flow-control", "mode"] and len(w) >= 4:
        port.pfc_mode = {"on": True, "off": False}.get(w[3])
    elif w[:4] == ["no", "dcb", "priority-flow-control", "mode"]:
        port.pfc_mode = False
    elif w[:2] == ["no", "traffic-class"] and len(w) >= 4 and w[3] == "congestion-control":
        port.ecn.pop(parse_int(w[2], where, what="traffic-class", lo=0, hi=7), None)
    elif w[:3] == ["dcb", "priority-flow-control", "watch-dog"] or w == ["pfc-wd"]:
        port.watchdog = "disable" not in w
    elif w[:2] == ["no", "pfc-wd"]:
        port.watchdog = False
    elif w[0] == "mtu" and len(w) >= 2:
        port.mtu = parse_int(w[1], where, what="mtu", lo=68, hi=65535)
    elif w[:2] == ["no", "switchport"] or w[:2] == ["ip", "address"]:
        port.routed = True
    elif w[:2] == ["qos", "rewrite"] or w[:3] == ["no", "qos", "rewrite"] or w[0] in ("ingress-buffer",
                                                                                     "egress-buffer"):
        pass  # PCP/DSCP rewrite from the switch-priority, per-port buffer carving: read, no fact of their own
    else:
        return False
    return True


def _global(st: _State, w: list[str], where: Where) -> bool:
    if w[0] == "hostname" and len(w) == 2:
        st.hostname = w[1]
    elif w[:3] == ["dcb", "priority-flow-control", "enable"]:
        st.pfc_global = True
    elif w[:4] == ["no", "dcb", "priority-flow-control", "enable"]:
        st.pfc_global = False
    elif w[:3] == ["dcb", "priority-flow-control", "priority"] and len(w) >= 5:
        prio = parse_int(w[3], where, what="priority", lo=0, hi=7)
        (st.pfc_prios.add if w[4] == "enable" else st.pfc_prios.discard)(prio)
        st.pfc_seen = True
    elif w[:4] == ["no", "dcb", "priority-flow-control", "priority"] and len(w) >= 5:
        st.pfc_prios.discard(parse_int(w[4], where, what="priority", lo=0, hi=7))
        st.pfc_seen = True
    elif w[:2] == ["traffic", "pool"] and len(w) >= 5:
        if w[3] == "type":
            st.pools[w[2]] = w[4]
        elif w[3:5] == ["map", "switch-priority"] and len(w) >= 6:
            st.pool_prios.setdefault(w[2], set()).update(
                parse_priorities(",".join(w[5:]), where, what="switch-priority"))
        elif w[3] != "memory":
            return False
    elif w[0] == "roce" and len(w) <= 2:
        st.roce = w[1] if len(w) == 2 else "lossless"
    elif w == ["no", "roce"]:
        st.roce = None
    else:
        return False
    return True


_MODE = re.compile(r"\(config interface ((?:ethernet|port-channel|mlag-port-channel) [\d/,-]{1,40})\) #")


def _command(text: str) -> str:
    """The command of a line, without a transcript prompt (``sw1 [standalone: master] (config) # ...``)."""
    at = text.find(") # ")
    if at > 0 and "(config" in text[:at]:
        return text[at + 4:]
    return text


def _statements(r: Reading, st: _State) -> bool:
    """Read every line into ``st``; whether any interface setting was among them."""
    seen_interface = False
    # 'interface ethernet 1/1' typed alone opens that interface's mode: the lines indented under it, or typed at
    # its '(config interface ethernet 1/1) #' prompt, belong to it.
    context: list[str] = []
    context_indent = -1
    for line in r.content():
        raw = line.text
        text = _command(raw).strip()
        if not text or text.startswith(("#", "!", "--")):
            continue
        text = strip_inline_comment(text, "#")
        w = text.split()
        indent = len(raw) - len(raw.lstrip(" \t"))
        mode = _MODE.search(raw[:200])
        if mode is not None:
            context, context_indent = ["interface", *mode[1].split()], -1
        elif context and context_indent >= 0 and indent > context_indent:
            pass
        elif ") # " in raw[:200] or indent <= context_indent:
            context, context_indent = [], -1
        if w[0] == "exit":
            context, context_indent = [], -1
            r.use(line.number)
            continue
        if len(w) == 3 and w[0] == "interface" and w[1] in _KINDS:
            context, context_indent = w, (indent if mode is None and ") # " not in raw[:200] else -1)
            r.use(line.number)
            continue
        if context and w[0] != "interface":
            w = context + w
        where = Where(r.source, line.number, text[:80])
        with r.statement(line.number):
            if w[0] == "interface" and len(w) >= 4 and w[1] in _KINDS:
                names = expand_interfaces(f"{w[1]} {w[2]}", where)
                if not _port_command(_Port(), w[3:], where):
                    continue
                seen_interface = True
                for name in names:
                    _port_command(st.ports.setdefault(name, _Port()), w[3:], where)
            elif not _global(st, w, where):
                continue
            r.use(line.number)
    return seen_interface


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    st = _State()
    seen_interface = _statements(r, st)
    # Onyx prints no closing line: a whole 'show running-config' is told by its header at the top and the
    # hostname in the management section near the end, so a cut paste (either half) is a fragment.
    complete = st.hostname is not None and seen_interface and any(
        _HEADER in line.text for line in r.text.lines[:20])
    roce_mode = st.roce
    if roce_mode is not None:
        lossless = {"lossless": "switch-priority 3 lossless", "semi-lossless": "switch-priority 3 lossless in "
                    "the receive direction only", "lossy": "no PFC"}.get(roce_mode, "switch-priority 3 lossless")
        st.notes.append(f"'roce {roce_mode}' is read as the Onyx RoCE preset (trust L3, {lossless}, ECN on TC 3 at "
                        "150/1500 KB, switch-priority 6 strict); its thresholds are not printed in the config")
    pfc: frozenset[int] | None = None
    if roce_mode in ("lossless", "semi-lossless"):
        pfc = frozenset({3})
    elif roce_mode == "lossy":
        pfc = frozenset()
    if st.pfc_global is False:
        pfc = frozenset()
    elif st.pfc_global and st.pfc_seen:
        pfc = frozenset(st.pfc_prios)
    elif st.pfc_seen and complete:
        pfc = frozenset()  # priorities listed but PFC never enabled globally: no port pauses
    lossy_prios = {p for pool, kind in st.pools.items() if kind == "lossy" for p in st.pool_prios.get(pool, ())}
    device_trust: Trust | None = "dscp" if roce_mode is not None else ("pcp" if complete else None)
    queue_map: dict[int, int] = {}
    ports: list[PortQos] = []
    for name, p in st.ports.items():
        trust = p.trust or device_trust
        queue_map.update(p.bound)
        port_pfc: frozenset[int] | None = None
        if p.pfc_mode is False:
            port_pfc = frozenset()
        elif p.pfc_mode:
            port_pfc = pfc
        elif roce_mode is not None:
            port_pfc = pfc
        ecn: dict[int, EcnProfile] | None = dict(p.ecn) if p.ecn else None
        if ecn and not complete and port_pfc and not port_pfc <= set(ecn):
            ecn = None  # an excerpt that marks some classes may have lost a lossless class's ECN line: unknown
        if roce_mode is not None and ecn is None:
            ecn = {3: _ROCE_ECN}  # lossy RoCE leans on ECN all the more
        elif ecn is None and complete:
            ecn = {}
        strict: frozenset[int] | None = frozenset(p.strict) if p.ets_seen else None
        if strict is None and roce_mode is not None:
            strict = frozenset({6})
        elif strict is None and complete:
            strict = frozenset()
        ports.append(PortQos(
            name=name, trust=trust, pfc_priorities=port_pfc, ecn=ecn, strict_queues=strict,
            queue_weights=dict(p.weights) if p.ets_seen else None, mtu=p.mtu, routed=p.routed,
            dscp_to_priority=_default_map() if trust in ("dscp", "pcp,dscp") else None,
            watchdog=None if p.watchdog is None else Watchdog(p.watchdog),
            lossy_pgs=frozenset(lossy_prios) if lossy_prios else None,
            lossy_queues=frozenset(lossy_prios) if lossy_prios else None,
        ))
    dscp_device = _default_map() if device_trust in ("dscp", "pcp,dscp") or (
        not ports and roce_mode is not None) else {}
    return Deployed(
        device=device or st.hostname or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=dscp_device, priority_to_queue=queue_map,
        pfc_priorities=pfc if (roce_mode is not None or not ports) else None,
        trust=device_trust if roce_mode is not None else None,
        ecn={3: _ROCE_ECN} if roce_mode is not None and roce_mode != "lossy" and not ports else None,
        strict_queues=frozenset({6}) if roce_mode is not None and not ports else None,
        ports=tuple(ports), default_dscp_map=True, complete=complete, notes=tuple(st.notes),
    )


def _default_map() -> dict[int, int]:
    """Onyx's DSCP -> switch-priority table when no line changes it: the class selector, DSCP >> 3."""
    return {d: roce.default_priority(d) for d in range(64)}
