"""A host set-up shell script (ours, or a doRoCE-style one) into a host :class:`Deployed`.

Understands the commands :mod:`tensorfabric.fabric.renderers.host` writes and the ones NVIDIA's doRoCE
uses: ``mlnx_qos -i IF`` with ``--trust``, ``--pfc``, ``--dscp2prio set,D,P``, ``--dcbx`` and ``--cable_len``;
iproute2 ``dcb app add|replace|del|flush dev IF dscp-prio D:P...`` and ``dcb pfc set dev IF prio-pfc P:on...``;
``ip link set dev IF mtu N``; ``echo V > /sys/class/net/IF/ecn/...`` (or ``echo V | sudo tee ...``) for DCQCN
enables and the CNP DSCP and priority; ``ethtool --set-tunable IF pfc-prevention-tout MS``; and NCCL settings
written with ``export`` or into an ``nccl.conf`` by ``printf``. Other commands are ignored: a script may do more
than QoS.

NCCL variables are read by the one ``NAME=value`` reader (:mod:`tensorfabric.host.nccl_conf`): an ``export`` line
and a file ``printf`` writes for a shell to source are read as the shell reads them, lines ``printf`` writes into a
``*.conf`` file as NCCL's ``setEnvFile`` reads them (literally, the first value of a name wins); a line that does not
set what it appears to is a warning naming the script's line.

Scripts arrive as files (with or without ``#!``), as terminal transcripts (``$ sudo mlnx_qos ...``) and as
``bash -x`` traces (``+ mlnx_qos ...``); ``sudo`` is looked through, and ``NAME=value`` assignments are
substituted into later ``$NAME`` / ``${NAME}`` words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tensorfabric import roce
from tensorfabric.fabric.deployed import Deployed, PortQos, Trust, Watchdog
from tensorfabric.fabric.parsers._common import Where, device_from_source, parse_float, parse_int, shell_words
from tensorfabric.fabric.parsers._read import Reading, markers
from tensorfabric.host.nccl_conf import read_env_file, read_exported

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "host-script"
NAME = "host set-up script"
SUFFIXES = (".sh", ".bash")
EXPECTED = ("host set-up commands (mlnx_qos -i IF --trust/--pfc/--dscp2prio, dcb app|pfc, "
            "echo V > /sys/class/net/IF/ecn/..., ip link set dev IF mtu N, export NCCL_*)")
MARKERS = markers(
    ("mlnx_qos -i IF --option", r"\bmlnx_qos\b.{0,200}?\s--?(?:trust|pfc|dscp2prio|prio_tc|cable_len|tsa|dcbx"
                                r"|d\b|f\b)"),
    ("/sys/class/net/IF/ecn/roce_*", r"/sys/class/net/[^/\s]{1,64}/ecn/roce_"),
    ("dcb app|pfc", r"^\s*(?:\+ |sudo )?dcb (?:app|pfc) "),
    ("ethtool --set-tunable pfc-prevention-tout", r"pfc-prevention-tout"),
    ("#!/bin/*sh", r"^#!\S*(?:ba)?sh\b"),
    ("cma_roce_tos|cma_roce_mode", r"\bcma_roce_(?:tos|mode)\b"),
)
_DEVICE = re.compile(r"^#\s*device:\s*(\S+)\s*$")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]{0,63})=(\S{0,256})$")
_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]{0,63})\}?")
_SYSFS = re.compile(r"^/sys/class/net/([^/]+)/ecn/roce_(np|rp)/(enable/(\d)|cnp_dscp|cnp_802p_prio)$")
_DEFAULT_DSCP = {dscp: roce.default_priority(dscp) for dscp in range(64)}
_TRUSTS: dict[str, Trust] = {"dscp": "dscp", "pcp": "pcp"}
_DCBX: dict[str, Literal["os", "firmware"]] = {"os": "os", "fw": "firmware"}


@dataclass
class _Env:
    """The NCCL variables a script sets, and the lines that do not set what they appear to."""

    values: dict[str, str] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class _Nic:
    trust: Trust | None = None
    pfc: frozenset[int] | None = None
    dscp_sets: dict[int, int] = field(default_factory=dict)
    mtu: int | None = None
    cable: float | None = None
    np: set[int] = field(default_factory=set)
    rp: set[int] = field(default_factory=set)
    np_seen: bool = False
    rp_seen: bool = False
    cnp_dscp: int | None = None
    cnp_prio: int | None = None
    storm_ms: float | None = None
    link_pause: bool | None = None
    dcbx: Literal["os", "firmware"] | None = None
    dcb_app: bool = False
    """DSCP map set through iproute2 dcb: DSCPs it does not list go to priority 0, not DSCP >> 3."""


def _logical_lines(r: Reading) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for line in r.content():
        raw = line.text
        if line.kind == "text" and raw.startswith("+"):
            raw = raw.lstrip("+").lstrip()  # a bash -x trace: the command as it ran
        if not pending:
            start = line.number
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        out.append((start, pending + raw))
        pending = ""
    if pending:
        out.append((start, pending))
    return out


def _commands(words: list[str]) -> list[list[str]]:
    """The simple commands of a pipeline or list, each without a leading ``sudo`` (and its options)."""
    out: list[list[str]] = []
    current: list[str] = []
    for word in [*words, ";"]:
        if word in ("|", ";", "&&", "||"):
            while current[:1] == ["sudo"]:
                current = current[1:]
                while current[:1] and current[0].startswith("-"):
                    current = current[1:]
            if current:
                out.append(current)
            current = []
        else:
            current.append(word)
    return out


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    nics: dict[str, _Nic] = {}
    env = _Env()
    variables: dict[str, str] = {}
    name: str | None = None
    for number, line in _logical_lines(r):
        stripped = line.strip()
        if (found := _DEVICE.match(stripped)) is not None:
            name = name or found.group(1)
            continue
        if (assign := _ASSIGN.match(stripped)) is not None:
            variables[assign.group(1)] = assign.group(2).strip("'\"")
            continue
        where = Where(source, number, stripped)
        with r.statement(number):
            try:
                words = shell_words(line, comments=True)
            except ValueError as exc:
                raise where.error(f"line does not parse as shell words: {exc}") from None
            if variables:
                words = [_VAR.sub(lambda m: variables.get(m.group(1), m.group(0)), w) if "$" in w else w
                         for w in words]
            commands = _commands(words)
            if len(commands) == 2 and commands[0][:1] == ["echo"] and commands[1][:1] == ["tee"] \
                    and len(commands[0]) == 2 and len(commands[1]) >= 2:
                commands = [["echo", commands[0][1], ">", commands[1][-1]]]  # echo 1 | sudo tee /sys/...
            for command in commands:
                handler = _COMMANDS.get(command[0])
                if handler is not None and handler(command, where, nics, env):
                    r.use(number)
    for number, problem in env.problems:
        r.warn(number, problem)
    name = device or name or device_from_source(source)
    ports = tuple(_port(netdev, nic) for netdev, nic in nics.items())
    first = ports[0] if ports else PortQos(name="")
    return Deployed(
        device=name, kind="host", format=FORMAT, source=source,
        dscp_to_priority=dict(first.dscp_to_priority or {}),
        pfc_priorities=first.pfc_priorities, trust=first.trust, mtu=first.mtu,
        cnp_dscp=first.cnp_dscp, cnp_priority=first.cnp_priority,
        nccl_env=env.values, ports=ports,
    )


def _port(netdev: str, nic: _Nic) -> PortQos:
    dscp: dict[int, int] | None = None
    if nic.trust == "dscp" or nic.dscp_sets:
        dscp = {**(dict.fromkeys(range(64), 0) if nic.dcb_app else _DEFAULT_DSCP), **nic.dscp_sets}
    watchdog = Watchdog(enabled=nic.storm_ms > 0, detection_ms=nic.storm_ms, action="nic-storm-prevention") \
        if nic.storm_ms is not None else None
    return PortQos(
        name=netdev, pfc_priorities=nic.pfc, trust=nic.trust, mtu=nic.mtu, cable_length_m=nic.cable,
        # DCQCN needs both points; a script (or excerpt) that sets only one says nothing about the other.
        ecn_priorities=frozenset(nic.np & nic.rp) if nic.np_seen and nic.rp_seen else None,
        watchdog=watchdog, dscp_to_priority=dscp, cnp_dscp=nic.cnp_dscp, cnp_priority=nic.cnp_prio,
        storm_prevention_ms=nic.storm_ms, link_pause=nic.link_pause, dcbx=nic.dcbx,
    )


def _mlnx_qos(words: list[str], where: Where, nics: dict[str, _Nic], env: _Env) -> bool:
    args = [part for word in words[1:] for part in (word.split("=", 1) if word.startswith("--") else [word])]
    options: dict[str, list[str]] = {}
    for i, arg in enumerate(args):
        if arg.startswith("-") and i + 1 < len(args):
            options.setdefault(arg, []).append(args[i + 1])
    netdev = next(iter(options.get("-i") or options.get("--interface") or []), None)
    if netdev is None:
        raise where.error("mlnx_qos needs -i IF")
    nic = nics.setdefault(netdev, _Nic())
    for value in options.get("--trust", []):
        if value not in _TRUSTS:
            raise where.error(f"--trust {value!r} must be 'dscp' or 'pcp'")
        nic.trust = _TRUSTS[value]
    for value in options.get("--pfc", []) + options.get("-f", []):
        flags = value.split(",")
        if len(flags) != 8 or any(f not in ("0", "1") for f in flags):
            raise where.error(f"--pfc {value!r} must be eight comma-separated 0/1 flags")
        nic.pfc = frozenset(i for i, f in enumerate(flags) if f == "1")
    for value in options.get("--dscp2prio", []):
        parts = value.split(",")
        if parts[0] == "flush":
            nic.dscp_sets.clear()
            nic.trust = "pcp"
        elif parts[0] in ("set", "del") and len(parts) == 3:
            dscp = parse_int(parts[1], where, what="dscp", lo=0, hi=63)
            prio = parse_int(parts[2], where, what="priority", lo=0, hi=7)
            if parts[0] == "set":
                nic.dscp_sets[dscp] = prio
            else:
                nic.dscp_sets.pop(dscp, None)
        else:
            raise where.error(f"--dscp2prio {value!r} must be 'set,DSCP,PRIO', 'del,DSCP,PRIO' or 'flush'")
    for value in options.get("-d", []) + options.get("--dcbx", []):
        if value not in _DCBX:
            raise where.error(f"--dcbx {value!r} must be 'os' or 'fw'")
        nic.dcbx = _DCBX[value]
    for value in options.get("--cable_len", []):
        nic.cable = parse_float(value, where, what="cable length")
    return True


def _ip(words: list[str], where: Where, nics: dict[str, _Nic], env: _Env) -> bool:
    if words[1:3] != ["link", "set"] or "mtu" not in words[3:]:
        return False
    # ip link set [dev] IF ... mtu N: the name comes first, so a netdev called "mtu" still parses.
    at = 4 if words[3] == "dev" else 3
    rest = words[at + 1:]
    if at >= len(words) or "mtu" not in rest or rest.index("mtu") + 1 >= len(rest):
        raise where.error("expected 'ip link set dev IF mtu N'")
    nics.setdefault(words[at], _Nic()).mtu = parse_int(rest[rest.index("mtu") + 1], where, what="mtu", lo=68,
                                                       hi=65535)
    return True


def _echo(words: list[str], where: Where, nics: dict[str, _Nic], env: _Env) -> bool:
    if ">" not in words or words.index(">") != 2 or len(words) != 4:
        return False
    value, path = words[1], words[3]
    match = _SYSFS.match(path)
    if match is None:
        return False
    nic = nics.setdefault(match.group(1), _Nic())
    if match.group(4) is not None:
        enabled = parse_int(value, where, what=path, lo=0, hi=1) == 1
        target = nic.np if match.group(2) == "np" else nic.rp
        (target.add if enabled else target.discard)(int(match.group(4)))
        if match.group(2) == "np":
            nic.np_seen = True
        else:
            nic.rp_seen = True
    elif match.group(3) == "cnp_dscp":
        nic.cnp_dscp = parse_int(value, where, what="cnp_dscp", lo=0, hi=63)
    else:
        nic.cnp_prio = parse_int(value, where, what="cnp_802p_prio", lo=0, hi=7)
    return True


def _ethtool(words: list[str], where: Where, nics: dict[str, _Nic], env: _Env) -> bool:
    if len(words) >= 5 and words[1] in ("-A", "--pause"):
        settings = dict(zip(words[3::2], words[4::2], strict=False))
        if any(v not in ("on", "off") for k, v in settings.items() if k in ("rx", "tx", "autoneg")):
            raise where.error("ethtool -A takes rx/tx/autoneg on|off")
        nics.setdefault(words[2], _Nic()).link_pause = "on" in (settings.get("rx"), settings.get("tx"))
    if len(words) >= 5 and words[1] == "--set-tunable" and words[3] == "pfc-prevention-tout":
        nics.setdefault(words[2], _Nic()).storm_ms = parse_float(words[4], where, what="pfc-prevention-tout")
        return True
    return len(words) >= 5 and words[1] in ("-A", "--pause")


def _printf(words: list[str], where: Where, nics: dict[str, _Nic], env: _Env) -> bool:
    if len(words) < 4 or words[1] != "%s\\n" or ">" not in words or words.index(">") + 1 >= len(words):
        return False
    # The shell has already removed the quoting: each word is one line of the file. Who reads the file decides how
    # a line is read: NCCL reads a *.conf literally, a shell sources anything else (a profile.d file).
    target = words[words.index(">") + 1]
    lines = [(where.line or 0, word) for word in words[2:words.index(">")]]
    written = read_env_file(lines, "nccl" if target.endswith(".conf") else "shell")
    env.values.update(written.values)
    env.problems += [(a.line, f"{target}: {a.problem}") for a in written.assignments if a.problem]
    return True


def _export(words: list[str], where: Where, nics: dict[str, _Nic], env: _Env) -> bool:
    found = read_exported(words[1:], where.line or 0)
    for a in found:
        if a.effective:
            env.values[a.name] = a.value
        if a.problem:
            env.problems.append((a.line, a.problem))
    return any(a.effective for a in found)


def _dcb(words: list[str], where: Where, nics: dict[str, _Nic], env: _Env) -> bool:
    if len(words) < 5 or words[3] != "dev":
        return False
    obj, verb, dev, args = words[1], words[2], words[4], words[5:]
    nic = nics.setdefault(dev, _Nic())
    if obj == "app" and "dscp-prio" in args:
        pairs = args[args.index("dscp-prio") + 1:]
        if verb == "flush":
            nic.dscp_sets.clear()
            nic.trust, nic.dcb_app = "pcp", True
            return True
        nic.dcb_app = True
        for pair in pairs:
            dscp, sep, prio = pair.partition(":")
            if not sep:
                raise where.error(f"dscp-prio entry {pair!r} must be DSCP:PRIO such as 26:3")
            d = parse_int(dscp, where, what="dscp", lo=0, hi=63)
            if verb == "del":
                nic.dscp_sets.pop(d, None)
            else:
                nic.dscp_sets[d] = parse_int(prio, where, what="priority", lo=0, hi=7)
        nic.trust = "dscp" if nic.dscp_sets else "pcp"
    elif obj == "pfc" and verb == "set" and "prio-pfc" in args:
        enabled = set(nic.pfc or ())
        for pair in args[args.index("prio-pfc") + 1:]:
            prio, sep, state = pair.partition(":")
            if not sep or state not in ("on", "off"):
                raise where.error(f"prio-pfc entry {pair!r} must be PRIO:on or PRIO:off")
            (enabled.add if state == "on" else enabled.discard)(parse_int(prio, where, what="priority", lo=0, hi=7))
        nic.pfc = frozenset(enabled)
    else:
        return False
    return True


_Handler = Callable[[list[str], Where, dict[str, _Nic], _Env], bool]
_COMMANDS: dict[str, _Handler] = {
    "mlnx_qos": _mlnx_qos, "dcb": _dcb, "ip": _ip, "echo": _echo, "ethtool": _ethtool, "printf": _printf,
    "export": _export,
}
