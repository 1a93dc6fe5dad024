"""Cumulus Linux NVUE commands (``nv config show -o commands`` or a script of ``nv set`` lines) into a Deployed.

Profiles work as on the switch: ``default-global`` applies to every port, and an interface that names a
``qos pfc profile`` or ``qos congestion-control profile`` gets that profile instead. ``nv set qos roce``
applies NVIDIA's RoCE macro: the platform's DSCP table (DSCP d -> switch-priority d / 8, so 26 -> 3 and 48 -> 6,
as ``nv show qos roce`` prints it), PFC on switch-priority 3 (not in ``mode lossy`` or ``lossy-multi-tc``),
traffic class 6 strict, ECN 150000/1500000 bytes at 100 % on traffic class 3, trust both. Explicit lines override
it wherever they sit in the text, as on the switch (NVUE applies the whole revision at once).

:class:`Model` is the one model of an NVUE configuration: ``nv set`` lines and the trees of ``startup.yaml`` and
``nv config show -o json`` (:mod:`~tensorfabric.fabric.parsers.nvue_yaml`) both set it word by word.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from tensorfabric import roce, units
from tensorfabric.errors import InputError
from tensorfabric.fabric.deployed import Deployed, EcnProfile, Headroom, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._common import (
    Where,
    device_from_source,
    expand_interfaces,
    parse_bytes,
    parse_float,
    parse_int,
    parse_priorities,
    shell_words,
)
from tensorfabric.fabric.parsers._read import Reading

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "Model", "default_dscp_map", "read"]

FORMAT = "nvue"
NAME = "NVUE"
SUFFIXES = (".nvue",)
EXPECTED = "Cumulus Linux NVUE commands ('nv set qos ...', 'nv set interface ...')"
MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nv set qos", re.compile(r"^\s*(?:sudo )?nv (?:un)?set qos\b")),
    ("nv set interface", re.compile(r"^\s*(?:sudo )?nv (?:un)?set interface\b")),
    ("nv set system", re.compile(r"^\s*(?:sudo )?nv (?:un)?set system\b")),
    ("nv config apply|save", re.compile(r"^\s*(?:sudo )?nv config (?:apply|save)\b")),
)
_TRUST: dict[str, Trust] = {"l2": "pcp", "l3": "dscp", "both": "pcp,dscp", "pcp": "pcp", "dscp": "dscp"}
_DEFAULT = "default-global"
_INTERFACE_KEYS = re.compile(r"link mtu|link speed|ip address|qos pfc profile|qos congestion-control profile|"
                             r"qos pfc-watchdog")


_NOT_DATA = re.compile(r"^(?:eth\d{1,3}|lo|mgmt|vlan\d{1,4}|br_[\w-]{1,32}|bridge|vrf[\w-]{0,32})$")
_LEAD = re.compile(r"^([A-Za-z_]{1,32})")


def _short_list(text: str) -> str:
    """NVUE's short lists (``swp2,6``, ``swp1-4,8``: later items keep the first one's type) in full."""
    items = text.split(",")
    lead = _LEAD.match(items[0])
    if lead is None or len(items) < 2:
        return text
    return ",".join([items[0], *(lead.group(1) + item if item[:1].isdigit() else item for item in items[1:])])


@dataclass
class _Pfc:
    priorities: set[int] = field(default_factory=set)
    cable: float | None = None
    xoff: int | None = None
    xon: int | None = None
    size: int | None = None


@dataclass
class _Ecn:
    kmin: int | None = None
    kmax: int | None = None
    pmax: float = 100.0
    ecn: bool | None = None
    """None until an ``ecn enable|disable`` line says: thresholds alone do not tell whether packets are marked."""


@dataclass
class _Port:
    mtu: int | None = None
    speed: float | None = None
    pfc_profile: str | None = None
    ecn_profile: str | None = None
    watchdog: bool | None = None
    routed: bool | None = None


@dataclass
class _State:
    hostname: str | None = None
    roce: bool = False
    roce_off: bool = False
    roce_mode: str | None = None
    explicit_pfc: bool = False
    dwrr: set[int] = field(default_factory=set)
    pools: dict[str, set[int]] = field(default_factory=dict)
    """``qos traffic-pool NAME switch-priority LIST``: which switch priorities each buffer pool holds."""
    trust: Trust | None = None
    dscp: dict[int, int] = field(default_factory=dict)
    queue: dict[int, int] = field(default_factory=dict)
    pfc: dict[str, _Pfc] = field(default_factory=dict)
    ecn: dict[str, dict[int, _Ecn]] = field(default_factory=dict)
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)
    sched_seen: bool = False
    wd_poll: float | None = None
    wd_robust: int | None = None
    wd_seen: bool = False
    ports: dict[str, _Port] = field(default_factory=dict)


_LOSSY_MODES = frozenset({"lossy", "lossy-multi-tc"})


def default_dscp_map() -> dict[int, int]:
    """The DSCP -> switch-priority table of Cumulus Linux on Spectrum: DSCP d on d / 8 (``nv show qos roce``)."""
    return {d: d // 8 for d in range(64)}


def _roce_macro(state: _State) -> dict[int, int]:
    """Apply ``nv set qos roce`` under the explicit lines; the DSCP table it implies."""
    state.trust = state.trust or "pcp,dscp"
    if state.roce_mode not in _LOSSY_MODES and not state.explicit_pfc:
        state.pfc.setdefault(_DEFAULT, _Pfc()).priorities.add(roce.LOSSLESS_PRIORITY)
    elif state.roce_mode in _LOSSY_MODES:
        state.pfc.setdefault(_DEFAULT, _Pfc())  # PFC off on every priority: a fact, not a gap
    tc3 = state.ecn.setdefault(_DEFAULT, {}).setdefault(roce.LOSSLESS_PRIORITY, _Ecn())
    tc3.kmin = tc3.kmin if tc3.kmin is not None else 150000
    tc3.kmax = tc3.kmax if tc3.kmax is not None else 1500000
    tc3.ecn = tc3.ecn if tc3.ecn is not None else True
    if roce.CNP_PRIORITY not in state.dwrr:
        state.strict.add(roce.CNP_PRIORITY)
    state.sched_seen = True
    return default_dscp_map() | state.dscp


class Model:
    """An NVUE configuration being read: ``set`` words in, one :class:`Deployed` out."""

    def __init__(self) -> None:
        self._state = _State()

    def set(self, words: list[str], where: Where) -> bool:
        """Apply the words after ``nv set``; False when they set nothing this reader models."""
        return _apply(words, where, self._state)

    def deployed(self, source: str, device: str | None, fmt: str = FORMAT) -> Deployed:
        return replace(_build(self._state, source, device), format=fmt)


def read(r: Reading, *, device: str | None = None) -> Deployed:
    state = _State()
    for line in r.content():
        text = line.text.strip()
        if not text.startswith(("nv ", "sudo nv ")) or text.startswith("#"):
            continue  # output of a command ('applied [rev_id: 4]'), another shell command, prose
        where = Where(r.source, line.number, text)
        with r.statement(line.number):
            try:
                words = shell_words(text, comments=True)
            except ValueError as exc:
                raise where.error(f"line does not parse: {exc}") from None
            words = words[1:] if words[:1] == ["sudo"] else words
            if words[1:2] == ["set"] and _apply(words[2:], where, state):
                r.use(line.number)
            elif words[1:2] in (["config"], ["unset"]):
                r.use(line.number)  # nv config apply/save; nv unset of something not modelled
    return _build(state, r.source, device)


@dataclass(frozen=True)
class _Args:
    """The words after ``nv set`` with checked access by position."""

    words: list[str]
    where: Where

    def text(self, i: int, what: str) -> str:
        if i >= len(self.words):
            raise self.where.error(f"{what} needs a value")
        return self.words[i]

    def num(self, i: int, what: str, lo: int = 0, hi: int | None = None) -> int:
        return parse_int(self.text(i, what), self.where, what=what, lo=lo, hi=hi)


def _apply(args: list[str], where: Where, st: _State) -> bool:
    """Apply one ``nv set``; False when it sets nothing this reader models."""
    a = _Args(args, where)
    num, arg = a.num, a.text
    head = args[:3]
    if args[:2] == ["system", "hostname"]:
        st.hostname = arg(2, "hostname")
    elif args[:2] == ["qos", "roce"]:
        if args[2:3] == ["enable"]:
            st.roce_off = arg(3, "enable") in ("off", "false", "disabled")
        elif args[2:3] == ["mode"]:
            st.roce_mode = arg(3, "mode")
        st.roce = True
    elif head == ["qos", "mapping", _DEFAULT] and args[3:4] == ["trust"]:
        value = arg(4, "trust")
        if value not in _TRUST:
            raise where.error(f"trust {value!r} must be one of {', '.join(_TRUST)}")
        st.trust = _TRUST[value]
    elif head == ["qos", "mapping", _DEFAULT] and args[3:4] == ["dscp"] and args[5:6] == ["switch-priority"]:
        for dscp in parse_priorities(arg(4, "dscp"), where, what="dscp", hi=63):
            st.dscp[dscp] = num(6, "switch-priority", hi=7)
    elif head == ["qos", "egress-queue-mapping", _DEFAULT] and args[3:4] == ["switch-priority"]:
        if args[5:6] != ["traffic-class"]:
            raise where.error("expected 'switch-priority P traffic-class Q'")
        st.queue[num(4, "switch-priority", hi=7)] = num(6, "traffic-class", hi=7)
    elif args[:2] == ["qos", "pfc"] and len(args) >= 4:
        st.explicit_pfc = st.explicit_pfc or (args[2] == _DEFAULT and args[3] == "switch-priority")
        _pfc(a, st.pfc.setdefault(args[2], _Pfc()))
    elif args[:2] == ["qos", "congestion-control"] and args[3:4] == ["traffic-class"]:
        for tc in parse_priorities(arg(4, "traffic-class"), where, what="traffic-class"):
            _ecn(args[5:], where, st.ecn.setdefault(args[2], {}).setdefault(tc, _Ecn()))
    elif args[:2] == ["qos", "egress-scheduler"] and args[3:4] == ["traffic-class"]:
        tcs = parse_priorities(arg(4, "traffic-class"), where, what="traffic-class")
        st.sched_seen = True
        if args[5:6] == ["mode"]:
            mode = arg(6, "mode")
            (st.strict.update if mode == "strict" else st.strict.difference_update)(tcs)
            (st.dwrr.difference_update if mode == "strict" else st.dwrr.update)(tcs)
        elif args[5:6] == ["bw-percent"]:
            st.weights.update(dict.fromkeys(tcs, num(6, "bw-percent", hi=100)))
    elif args[:2] == ["qos", "traffic-pool"] and len(args) >= 4:
        if args[3:4] == ["switch-priority"]:
            prios = parse_priorities(arg(4, "switch-priority"), where, what="traffic-pool switch-priority")
            for pool in st.pools.values():
                pool.difference_update(prios)  # a switch priority sits in one pool: the last line moves it
            st.pools.setdefault(args[2], set()).update(prios)
        elif args[3:4] != ["memory-percent"]:
            return False
    elif args[:2] == ["qos", "pfc-watchdog"]:
        st.wd_seen = True
        if args[2:3] == ["polling-interval"]:
            st.wd_poll = float(num(3, "polling-interval", lo=1))
        elif args[2:3] == ["robustness"]:
            st.wd_robust = num(3, "robustness", lo=1)
    elif args[:1] == ["interface"] and len(args) >= 3 and _NOT_DATA.match(args[1]):
        pass  # the management port, loopback, SVIs and bridges carry no RoCE queue
    elif args[:1] == ["interface"] and len(args) >= 3 and _INTERFACE_KEYS.match(" ".join(args[2:5])):
        for name in expand_interfaces(_short_list(args[1]), where):
            _interface(a, st.ports.setdefault(name, _Port()), st)
    else:
        return False
    return True


def _pfc(a: _Args, pfc: _Pfc) -> None:
    where, num, arg = a.where, a.num, a.text
    key = a.words[3]
    if key == "switch-priority":
        pfc.priorities.update(parse_priorities(arg(4, key), where, what=key))
    elif key == "cable-length":
        pfc.cable = float(num(4, key, 1))
    elif key in ("xoff-threshold", "xon-threshold", "port-buffer"):
        value = parse_bytes(arg(4, key), where, what=key)
        setattr(pfc, {"xoff-threshold": "xoff", "xon-threshold": "xon", "port-buffer": "size"}[key], value)


def _ecn(rest: list[str], where: Where, ecn: _Ecn) -> None:
    if len(rest) < 2:
        raise where.error("congestion-control setting needs a value")
    key, value = rest[0], rest[1]
    if key == "min-threshold":
        ecn.kmin = parse_bytes(value, where, what=key)
    elif key == "max-threshold":
        ecn.kmax = parse_bytes(value, where, what=key)
    elif key == "probability":
        ecn.pmax = parse_float(value, where, what=key)
    elif key == "ecn":
        ecn.ecn = value in ("enable", "on")


def _interface(a: _Args, port: _Port, st: _State) -> None:
    where, arg, rest = a.where, a.text, a.words[2:]
    if rest[:2] == ["link", "mtu"]:
        port.mtu = parse_int(arg(4, "mtu"), where, what="mtu", lo=68, hi=65535)
    elif rest[:2] == ["link", "speed"]:
        try:
            port.speed = units.parse_rate(arg(4, "speed"), what="link speed")
        except InputError as exc:
            raise where.error(str(exc)) from None
    elif rest[:2] == ["ip", "address"]:
        port.routed = True
    elif rest[:3] == ["qos", "pfc", "profile"]:
        port.pfc_profile = arg(5, "pfc profile")
    elif rest[:3] == ["qos", "congestion-control", "profile"]:
        port.ecn_profile = arg(5, "congestion-control profile")
    elif rest[:2] == ["qos", "pfc-watchdog"]:
        st.wd_seen = True
        port.watchdog = rest[2:4] != ["state", "disable"]


def _build(st: _State, source: str, device: str | None) -> Deployed:
    dscp = _roce_macro(st) if st.roce and not st.roce_off else dict(st.dscp)
    def pfc_of(name: str | None) -> _Pfc | None:
        return st.pfc.get(name or _DEFAULT)

    def ecn_of(name: str | None) -> dict[int, EcnProfile] | None:
        table = st.ecn.get(name or _DEFAULT)
        if table is None or any(e.ecn is None for e in table.values()):
            return None  # a profile whose marking state the text does not give is unknown, not off
        return {tc: EcnProfile(e.kmin or 0, e.kmax or 0, e.pmax, bool(e.ecn)) for tc, e in table.items()}

    def room(pfc: _Pfc | None) -> dict[int, Headroom] | None:
        if pfc is None or pfc.xoff is None:
            return None
        return dict.fromkeys(pfc.priorities, Headroom(pfc.xoff, pfc.xon or 0, pfc.size or 0))

    poll = st.wd_poll if st.wd_poll is not None else (100.0 if st.wd_seen else None)
    detect = poll * (st.wd_robust or 3) if poll is not None else None
    enabled = Watchdog(True, detection_ms=detect, restoration_ms=detect, action="drop", polling_ms=poll)
    default_pfc = pfc_of(None)
    # A priority in a pool named lossy (NVIDIA's default-lossy, roce-lossy) gets no lossless headroom.
    lossy = frozenset(p for name, prios in st.pools.items() if "lossy" in name and "lossless" not in name
                      for p in prios) if st.pools else None
    ports = []
    for name, p in st.ports.items():
        pfc = pfc_of(p.pfc_profile) if p.pfc_profile else None
        ports.append(PortQos(
            name=name, mtu=p.mtu, speed_bps=p.speed, routed=p.routed,
            pfc_priorities=frozenset(pfc.priorities) if pfc else None,
            cable_length_m=pfc.cable if pfc else None,
            headroom=room(pfc) if pfc else None,
            ecn=ecn_of(p.ecn_profile) if p.ecn_profile else None,
            watchdog=None if p.watchdog is None else (enabled if p.watchdog else Watchdog(False, polling_ms=poll)),
            lossy_pgs=lossy,
        ))
    return Deployed(
        device=device or st.hostname or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=dscp, priority_to_queue=dict(st.queue),
        # Under every explicit line sits the platform's table: a DSCP the text does not map is not "unclassified",
        # it keeps its default class (which an excerpt's missing lines may have moved, so it is not filled in).
        default_dscp_map=True,
        pfc_priorities=frozenset(default_pfc.priorities) if default_pfc else None,
        # Without a strict line, "no strict queue" is a fact only of a whole configuration (hostname and ports).
        trust=st.trust, ecn=ecn_of(None),
        strict_queues=frozenset(st.strict) if st.strict or (st.sched_seen and st.hostname and st.ports) else None,
        queue_weights=dict(st.weights),
        # The watchdog is switched on per interface: "off" where none is, is a fact only of a whole configuration.
        watchdog=Watchdog(False, polling_ms=poll) if st.wd_seen and st.hostname and st.ports else None,
        headroom=room(default_pfc) or {}, cable_length_m=default_pfc.cable if default_pfc else None,
        ports=tuple(ports),
    )
