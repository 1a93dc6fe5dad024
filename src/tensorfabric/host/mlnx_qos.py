"""Parse ``mlnx_qos -i IF`` output (Mellanox/mlnx-tools): trust state, DSCP -> priority, PFC per priority,
priority -> traffic class, cable length.

Output comes from the tool through an injected runner (``collect``) or from a captured file; the parser is the
same. Missing sections stay empty: older tool versions print fewer of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensorfabric.errors import ParseError

__all__ = ["MlnxQos", "Runner", "collect", "parse_mlnx_qos"]

Runner = Callable[[Sequence[str]], str]
"""Runs a command and returns its stdout; raises OSError when it cannot run or fails."""

# Linear time: horizontal whitespace only (``\s`` with re.M would let ``^\s*`` run across every following blank
# line), and no two adjacent quantifiers that can match the same characters.
_TRUST = re.compile(r"^Priority trust state:[ \t]*(\w+)", re.M)
_DSCP = re.compile(r"^[ \t]*prio:[ \t]*(\d)[ \t]+dscp:([\d, \t]*)\r?$", re.M)
_PFC_ROW = re.compile(r"^[ \t]*enabled[ \t]+((?:[01][ \t]+){7}[01])[ \t]*\r?$", re.M)
_TC = re.compile(r"^tc:\s*(\d+)\b")
_TC_PRIO = re.compile(r"^priority:\s*(\d)\s*$")
_CABLE = re.compile(r"^Cable len:\s*(\d+)", re.M)
_TSA = re.compile(r"\btsa:\s*(\w+)(?:\s*,\s*bw:\s*(\d{1,3})\s*%)?")
_DCBX = re.compile(r"^DCBX mode:\s*(OS|Firmware)\b", re.M | re.I)


@dataclass(frozen=True, slots=True)
class MlnxQos:
    interface: str
    trust: str | None = None
    dscp_to_prio: Mapping[int, int] = field(default_factory=dict)
    pfc: tuple[int, ...] | None = None
    """Priorities with PFC enabled; ``None`` when the output had no PFC table."""
    prio_to_tc: Mapping[int, int] = field(default_factory=dict)
    cable_len_m: int | None = None
    tsa: Mapping[int, str] = field(default_factory=dict)
    """Per traffic class: ``strict``, ``ets`` or ``vendor`` (``tc: N ratelimit: ..., tsa: ets, bw: 50%``)."""
    tc_bw: Mapping[int, int] = field(default_factory=dict)
    """ETS bandwidth percent per traffic class."""
    dcbx: str | None = None
    """``os`` or ``firmware`` from the ``DCBX mode:`` line."""

    def to_dict(self) -> dict[str, Any]:
        pfc = list(self.pfc) if self.pfc is not None else None
        return {"interface": self.interface, "trust": self.trust, "pfc": pfc,
                "dscp_to_prio": dict(self.dscp_to_prio), "prio_to_tc": dict(self.prio_to_tc),
                "cable_len_m": self.cable_len_m}


def parse_mlnx_qos(text: str, *, interface: str, source: str = "<mlnx_qos>") -> MlnxQos:
    """Parse one interface's ``mlnx_qos -i IF`` output; ParseError when it is not that tool's output."""
    if "\x00" in text:
        raise ParseError("binary data is not mlnx_qos output", source=source)
    trust = _TRUST.search(text)
    pfc_row = _PFC_ROW.search(text)
    if trust is None and pfc_row is None:
        raise ParseError("neither 'Priority trust state:' nor a PFC 'enabled' row found; expected the output of "
                         "`mlnx_qos -i <interface>`", source=source, excerpt=text.strip()[:80])
    dscp: dict[int, int] = {}
    for match in _DSCP.finditer(text):
        for value in re.findall(r"\d+", match[2]):
            if int(value) > 63:
                raise ParseError(f"DSCP {value} is out of range 0..63", source=source, excerpt=match[0].strip())
            dscp[int(value)] = int(match[1])
    pfc = tuple(i for i, bit in enumerate(pfc_row[1].split()) if bit == "1") if pfc_row else None
    prio_tc, tsa, bw = _prio_to_tc(text)
    cable = _CABLE.search(text)
    dcbx = _DCBX.search(text)
    return MlnxQos(interface, trust[1].lower() if trust else None, dscp, pfc, prio_tc,
                   int(cable[1]) if cable else None, tsa, bw, dcbx[1].lower() if dcbx else None)


def _prio_to_tc(text: str) -> tuple[dict[int, int], dict[int, str], dict[int, int]]:
    """``tc: N ... tsa: T[, bw: B%]`` header lines, each followed by its ``priority: P`` lines."""
    result: dict[int, int] = {}
    tsa: dict[int, str] = {}
    bw: dict[int, int] = {}
    tc: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if (header := _TC.match(stripped)) is not None:
            tc = int(header[1])
            if (kind := _TSA.search(stripped)) is not None:
                tsa[tc] = kind[1].lower()
                if kind[2] is not None:
                    bw[tc] = int(kind[2])
        elif tc is not None and (prio := _TC_PRIO.match(stripped)) is not None and int(prio[1]) < 8:
            result[int(prio[1])] = tc
    return result, tsa, bw


def collect(interfaces: Iterable[str], runner: Runner) -> dict[str, MlnxQos]:
    """Run ``mlnx_qos -i IF`` for each interface; interfaces where the tool fails are left out."""
    result: dict[str, MlnxQos] = {}
    for name in interfaces:
        try:
            text = runner(["mlnx_qos", "-i", name])
        except (OSError, ValueError):
            continue
        try:
            result[name] = parse_mlnx_qos(text, interface=name, source=f"mlnx_qos -i {name}")
        except ParseError:
            continue
    return result
