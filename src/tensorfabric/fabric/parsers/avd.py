"""Arista AVD structured configuration (the YAML ``eos_cli_config_gen`` renders into EOS) into a :class:`Deployed`.

Read: ``hostname``; ``qos: map: dscp: ["24 26 to traffic-class 3"]`` and ``traffic_class: ["3 to dscp 26",
"6 to tx-queue 2"]``; ``qos_profiles: [{name, trust, tx_queues|uc_tx_queues: [{id, priority: "priority strict",
bandwidth_percent, random_detect: {ecn: {count, threshold: {units, min, max, max_probability}}}}],
priority_flow_control: {enabled, priorities: [{priority, no_drop}], watchdog: {enabled, action, timer: {timeout,
polling_interval, recovery_time, forced}}}}]``; ``ethernet_interfaces: [{name, mtu, speed, type: routed,
ip_address, qos: {trust}, service_profile, priority_flow_control, tx_queues|uc_tx_queues}]``; and the global
``priority_flow_control: {all_off, watchdog: {action, timer}}``. Each key is rendered into the EOS line AVD's
templates render for it (``random-detect ecn minimum-threshold 150 kbytes maximum-threshold 1500 kbytes
max-mark-probability 100``, ``priority-flow-control pause watchdog port timer timeout 0.2 polling-interval auto
recovery-time 0.4``, ``service-profile P``) and read by the EOS reader, so both forms mean the same; findings name
the YAML lines.

The YAML is parsed by line (``yaml.compose``, aliases read once): lines before the paste's least indentation belong
to a parent the paste lost and are skipped, and a paste cut inside a value is read up to the cut.

Whole or fragment: a structured config is read as whole (a feature it does not configure is off; the EOS built-in
DSCP table holds for every DSCP the map does not move) only when it holds ``hostname`` and every section this
reader reads is closed by a later top-level key in the text, so no section can have lost its end. A
``service_profile`` naming a profile the text lacks is ``config.undefined-reference`` only when the text holds a
closed ``qos_profiles:`` section; otherwise the profile may be defined outside the fragment, so the port's QoS
from it is undeterminable (a warning).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from tensorfabric.fabric.deployed import ConfigDefect, Deployed
from tensorfabric.fabric.parsers._common import device_from_source
from tensorfabric.fabric.parsers._read import Reading, markers
from tensorfabric.fabric.parsers.eos import read as eos_read
from tensorfabric.intake import Line, Tally, Text
from tensorfabric.yamlload import check_depth

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "avd"
NAME = "Arista AVD"
SUFFIXES = (".avd.yml", ".avd.yaml")
EXPECTED = ("AVD structured-config YAML keys (qos: map: dscp, qos_profiles with tx_queues and "
            "priority_flow_control, ethernet_interfaces with service_profile)")
MARKERS = markers(
    ("qos_profiles:", r"^qos_profiles:\s*$"),
    ("ethernet_interfaces:", r"^ethernet_interfaces:\s*$"),
    ("service_profile:", r"^(?:-\s+)?service_profile:\s"),
    ("uc_tx_queues: / tx_queues:", r"^(?:-\s+)?(?:uc_|mc_)?tx_queues:\s*$"),
    ("no_drop:", r"^(?:-\s+)?no_drop:\s"),
    ("random_detect:", r"^(?:-\s+)?random_detect:\s*$"),
    ("priority_flow_control:", r"^(?:-\s+)?priority_flow_control:\s*$"),
    ("all_off:", r"^all_off:\s"),
    ("polling_interval:", r"^polling_interval:\s"),
)
_SECTIONS = ("qos", "qos_profiles", "ethernet_interfaces", "priority_flow_control")
_TOP_LINE = re.compile(r"[a-z][a-z0-9_]{0,80}:(?:\s|$)|- |-$|---|\.\.\.$")
_MAX_NODES = 200_000
"""Nodes walked at most: a structured config holds a few thousand; more is not a config (or an alias bomb)."""


@dataclass
class _Out:
    """The rendered EOS lines, each with the YAML line it comes from."""

    lines: list[tuple[int, str]] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    used: set[int] = field(default_factory=set)
    numbers: tuple[int, ...] = ()

    def at(self, node: Node) -> int:
        return self.numbers[min(node.start_mark.line, len(self.numbers) - 1)]

    def emit(self, node: Node, depth: int, text: str) -> None:
        self.lines.append((self.at(node), "   " * depth + text))

    def fresh(self, node: Node) -> bool:
        """Each node is walked once: an alias repeated a million times is read once."""
        if id(node) in self.seen or len(self.seen) > _MAX_NODES:
            return False
        self.seen.add(id(node))
        return True


def _keys(node: Node | None, out: _Out) -> dict[str, Node]:
    if not isinstance(node, MappingNode) or not out.fresh(node):
        return {}
    return {k.value: v for k, v in node.value if isinstance(k, ScalarNode)}


def _items(node: Node | None, out: _Out) -> list[Node]:
    return list(node.value) if isinstance(node, SequenceNode) and out.fresh(node) else []


def _str(node: Node | None) -> str | None:
    if not isinstance(node, ScalarNode):
        return None
    value = str(node.value).strip()
    return value if value and "\n" not in value and len(value) <= 200 else None


def _true(node: Node | None) -> bool | None:
    value = _str(node)
    return None if value is None else value.lower() in ("true", "yes", "on")


class _Relay(Reading):
    """The EOS reader's view: the rendered lines; what it uses or warns about is told to the YAML's reading."""

    outer: Reading

    @property
    def used(self) -> set[int]:
        return set(self._used)

    def use(self, number: int | None) -> None:
        super().use(number)
        self.outer.use(number)

    def unknown(self, number: int | None) -> None:
        self.outer.unknown(number)

    def warn(self, number: int | None, message: str) -> None:
        self.outer.warn(number, message)


def _content(line: Line) -> bool:
    return bool(line.text.strip()) and not line.text.lstrip().startswith("#")


def _documents(r: Reading) -> tuple[list[MappingNode], tuple[int, ...], bool, list[str]]:
    """The YAML's top-level mappings, the line number of each parsed line, whether the paste was cut, the lines."""
    lines = [ln for ln in r.content() if ln.kind == "text"]
    indents = [len(ln.text) - len(ln.text.lstrip(" ")) for ln in lines if _content(ln)]
    least = min(indents, default=0)
    first = next((i for i, ln in enumerate(lines) if _content(ln)), 0)
    start = next((i for i, ln in enumerate(lines) if _content(ln) and len(ln.text) - len(ln.text.lstrip(" ")) == least),
                 0)
    # Lines before the first at the least indentation hang from a parent the paste lost: they cannot be placed.
    cut = start > first or least > 0
    # Prose between the lines of a paste sits at the least indentation; AVD's top-level keys are snake_case, so a
    # line there that is neither such a key nor a list item is not part of the YAML (and would end every section).
    kept = [ln for ln in lines[start:] if len(ln.text) - len(ln.text.lstrip(" ")) > least or not _content(ln)
            or _TOP_LINE.match(ln.text[least:least + 256])]
    body = [ln.text[least:] if ln.text[:least].strip() == "" else ln.text.lstrip(" ") for ln in kept]
    numbers = tuple(ln.number for ln in kept)
    for _ in range(4):
        try:
            check_depth("\n".join(body))  # composing recurses once per level; TooDeep is a YAMLError with its line
            docs = [d for d in yaml.compose_all("\n".join(body), Loader=yaml.CSafeLoader) if isinstance(d, MappingNode)]
            return docs, numbers or (0,), cut, body
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = mark.line if mark is not None else len(body) - 1
            if not body or at <= 0:
                break
            # A paste cut inside a value: read up to the line the parser stopped at.
            reason = str(exc).splitlines()[0][:80] if str(exc) else "parse error"
            r.warn(numbers[min(at, len(numbers) - 1)], f"the YAML stops parsing here ({reason}); the lines from here "
                                                        "on are not read")
            body, numbers, cut = body[:at], numbers[:at], True
    return [], numbers or (0,), True, body


def _queue(node: Node, out: _Out, depth: int, kind: str) -> None:
    keys = _keys(node, out)
    qid = _str(keys.get("id"))
    if qid is None:
        return
    out.emit(node, depth, f"{kind} {qid}")
    if (prio := _str(keys.get("priority"))) in ("priority strict", "no priority"):
        out.emit(keys["priority"], depth + 1, prio)
    if (bw := _str(keys.get("bandwidth_percent"))) is not None:
        out.emit(keys["bandwidth_percent"], depth + 1, f"bandwidth percent {bw}")
    detect = _keys(keys.get("random_detect"), out)
    ecn_node = detect.get("ecn", keys.get("ecn"))
    ecn = _keys(ecn_node, out)
    if _true(ecn.get("count")):
        out.emit(ecn["count"], depth + 1, "random-detect ecn count")
    threshold = _keys(ecn.get("threshold"), out)
    lo, hi, units = (_str(threshold.get(k)) for k in ("min", "max", "units"))
    if lo is not None and hi is not None and units is not None and ecn_node is not None:
        text = f"random-detect ecn minimum-threshold {lo} {units} maximum-threshold {hi} {units}"
        if (pmax := _str(threshold.get("max_probability"))) is not None:
            text += f" max-mark-probability {pmax}"
        out.emit(ecn_node, depth + 1, text)


def _watchdog(node: Node | None, out: _Out, depth: int) -> None:
    wd = _keys(node, out)
    if node is None or not wd:
        return
    enabled = _true(wd.get("enabled"))
    if enabled is not None:
        out.emit(wd["enabled"], depth, ("" if enabled else "no ") + "priority-flow-control pause watchdog")
    if (action := _str(wd.get("action"))) is not None:
        out.emit(wd["action"], depth, f"priority-flow-control pause watchdog port action {action}")
    timer = _keys(wd.get("timer"), out)
    words = [f"{eos_key} {value}" for key, eos_key in (("timeout", "timeout"), ("polling_interval", "polling-interval"),
                                                       ("recovery_time", "recovery-time"))
             if (value := _str(timer.get(key))) is not None]
    if words:
        forced = " forced" if _true(timer.get("forced")) else ""
        out.emit(wd["timer"], depth, f"priority-flow-control pause watchdog port timer {' '.join(words)}{forced}")
        out.used.update(out.at(v) for v in timer.values())


def _pfc(node: Node | None, out: _Out, depth: int) -> None:
    pfc = _keys(node, out)
    enabled = _true(pfc.get("enabled"))
    if enabled is not None:
        out.emit(pfc["enabled"], depth, "priority-flow-control on" if enabled else "no priority-flow-control")
    for item in _items(pfc.get("priorities"), out):
        entry = _keys(item, out)
        prio, no_drop = _str(entry.get("priority")), _true(entry.get("no_drop"))
        if prio is not None and no_drop is not None:
            out.emit(item, depth, f"priority-flow-control priority {prio} {'no-drop' if no_drop else 'drop'}")
            out.used.update(out.at(v) for v in entry.values())
    _watchdog(pfc.get("watchdog"), out, depth)


def _qos_block(keys: dict[str, Node], out: _Out, depth: int) -> None:
    """The lines a profile and an interface share: trust, queues, PFC."""
    trust = _str(keys.get("trust")) or _str(_keys(keys.get("qos"), out).get("trust"))
    if trust in ("dscp", "cos"):
        out.emit(keys.get("trust") or keys["qos"], depth, f"qos trust {trust}")
    for key, kind in (("tx_queues", "tx-queue"), ("uc_tx_queues", "uc-tx-queue")):
        for item in _items(keys.get(key), out):
            _queue(item, out, depth, kind)
    _pfc(keys.get("priority_flow_control"), out, depth)


def _render(top: dict[str, Node], out: _Out, whole: bool) -> tuple[set[str], list[tuple[int, str]]]:
    """EOS lines for the structured config; the profiles it defines and the (line, name) of each service_profile."""
    if whole and (host := _str(top.get("hostname"))) is not None:
        out.emit(top["hostname"], 0, f"hostname {host}")
    maps = _keys(_keys(top.get("qos"), out).get("map"), out)
    for key, eos_key in (("dscp", "dscp"), ("traffic_class", "traffic-class")):
        for item in _items(maps.get(key), out):
            if (text := _str(item)) is not None:
                out.emit(item, 0, f"qos map {eos_key} {text}")
    glob = _keys(top.get("priority_flow_control"), out)
    if _true(glob.get("all_off")):
        out.emit(glob["all_off"], 0, "priority-flow-control all off")
    wd = _keys(glob.get("watchdog"), out)
    if (action := _str(wd.get("action"))) is not None:
        out.emit(wd["action"], 0, f"priority-flow-control pause watchdog action {action}")
    for key, value in _keys(wd.get("timer"), out).items():
        if key in ("timeout", "polling_interval", "recovery_time") and (text := _str(value)) is not None:
            out.emit(value, 0, f"priority-flow-control pause watchdog default {key.replace('_', '-')} {text}")
    profiles: set[str] = set()
    for item in _items(top.get("qos_profiles"), out):
        keys = _keys(item, out)
        if (name := _str(keys.get("name"))) is not None:
            profiles.add(name)
            out.emit(item, 0, f"qos profile {name}")
            _qos_block(keys, out, 1)
            out.lines.append((out.at(item), "!"))
    services: list[tuple[int, str]] = []
    for item in _items(top.get("ethernet_interfaces"), out):
        keys = _keys(item, out)
        if (name := _str(keys.get("name"))) is None:
            continue
        out.emit(item, 0, f"interface {name}")
        _interface(keys, out, services, profiles)
        out.lines.append((out.at(item), "!"))
    if whole:
        out.lines.append((out.numbers[-1], "end"))
    return profiles, services


def _interface(keys: dict[str, Node], out: _Out, services: list[tuple[int, str]], profiles: set[str]) -> None:
    for key, word in (("mtu", "mtu"), ("speed", "speed")):
        if (value := _str(keys.get(key))) is not None:
            out.emit(keys[key], 1, f"{word} {value}")
    if _str(keys.get("type")) == "routed":
        out.emit(keys["type"], 1, "no switchport")
    if (address := _str(keys.get("ip_address"))) is not None:
        out.emit(keys["ip_address"], 1, f"ip address {address}")
    if (profile := _str(keys.get("service_profile"))) is not None:
        services.append((out.at(keys["service_profile"]), profile))
        if profile in profiles:  # one the text lacks is judged against the YAML in read(), not by the EOS reader
            out.emit(keys["service_profile"], 1, f"service-profile {profile}")
    _qos_block(keys, out, 1)


def _closed(docs: list[MappingNode], out: _Out) -> tuple[dict[str, Node], set[str]]:
    """Top-level keys (first document that names one wins) and which of them a later top-level key closes."""
    top: dict[str, Node] = {}
    closed: set[str] = set()
    for doc in docs:
        pairs = [(k.value, v) for k, v in doc.value if isinstance(k, ScalarNode)]
        for i, (key, value) in enumerate(pairs):
            top.setdefault(key, value)
            if i + 1 < len(pairs):
                closed.add(key)
    out.seen.clear()
    return top, closed


def _parents(body: list[str], numbers: tuple[int, ...], used: set[int]) -> set[int]:
    """The key lines that hold a used line (``qos:``, ``uc_tx_queues:``): they were read too. One pass, a stack."""
    out: set[int] = set()
    stack: list[tuple[int, int]] = []  # (indent, line number) of the open keys
    for text, number in zip(body, numbers, strict=False):
        stripped = text.lstrip(" ")
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(text) - len(stripped) + (2 if stripped.startswith("- ") else 0)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if number in used:
            for _, parent in reversed(stack):
                if parent in out:
                    break  # its own parents were marked with it: each line is marked once
                out.add(parent)
        stack.append((indent, number))
    return out


def _rendered(r: Reading, out: _Out) -> _Relay:
    text = Text(source=r.source, lines=tuple(Line(n, t) for n, t in out.lines), total=r.text.total)
    relay = _Relay(text, Tally(text, NAME), ())
    relay.outer = r
    return relay


def read(r: Reading, *, device: str | None = None) -> Deployed:
    docs, numbers, cut, body = _documents(r)
    out = _Out(numbers=numbers)
    top, closed = _closed(docs, out)
    present = [s for s in _SECTIONS if s in top]
    whole = not cut and "hostname" in top and all(s in closed for s in present)
    profiles, services = _render(top, out, whole)
    name = device or _str(top.get("hostname")) or device_from_source(r.source)
    for number in out.used:
        r.use(number)
    relay = _rendered(r, out)
    record = eos_read(relay, device=name)
    for number in _parents(body, numbers, relay.used | out.used):
        r.use(number)
    defects = list(record.defects)
    for number, profile in services:
        if profile in profiles:
            continue
        if "qos_profiles" in closed:
            r.use(number)
            defects.append(ConfigDefect(number, f"service_profile {profile!r} names a profile qos_profiles does not "
                                        "define: the port gets no QoS profile", f"add '- name: {profile}' under "
                                        "qos_profiles or name a defined profile"))
        else:
            r.warn(number, f"service_profile {profile!r} is not in this text; the port's QoS from it is unknown")
    return replace(record, format=FORMAT, defects=tuple(defects))
