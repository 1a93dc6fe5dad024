"""The output of ``mlnx_qos -i IF`` (Mellanox/mlnx-tools) into a host :class:`Deployed`.

The output has no host name, so the device comes from the file name: ``h1.eth2.txt`` is host ``h1``, netdev
``eth2``. A captured prompt line such as ``$ mlnx_qos -i eth2`` names the netdev too and wins. Sections
this parser does not use (buffers, rate limits) are skipped, but the lines it does use must be well formed.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Literal

from tensorfabric.fabric.deployed import Deployed, PortQos, Trust
from tensorfabric.fabric.parsers._common import Where, device_from_source, parse_float, parse_int

__all__ = ["FORMAT", "SUFFIXES", "parse", "sniff"]

FORMAT = "mlnx_qos"
SUFFIXES = (".mlnx_qos",)

_TRUST = re.compile(r"^Priority trust state:\s*(\S+)\s*$")
_DSCP_ROW = re.compile(r"^prio:\s*(\S+)\s+dscp:\s*(.*)$")
_TC_ROW = re.compile(r"^tc:\s*(\S+)\s+ratelimit:\s*[^,]*,\s*tsa:\s*(\S+)\s*$")
_TC_PRIOS = re.compile(r"^priority:\s*(.*)$")
_COMMAND = re.compile(r"mlnx_qos\s+(?:.*\s)?-i\s*=?\s*(\S+)")
_TRUSTS: dict[str, Trust] = {"dscp": "dscp", "pcp": "pcp"}


def sniff(text: str) -> bool:
    return "Priority trust state:" in text or ("PFC configuration:" in text and "enabled" in text)


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    if not sniff(text):
        raise Where(source).error("not mlnx_qos output: expected 'Priority trust state:' or 'PFC configuration:'")
    stem_parts = PurePath(source).name.split(".")
    netdev = stem_parts[1] if len(stem_parts) > 2 else "netdev"
    trust: Trust | None = None
    dscp_map: dict[int, int] = {}
    pfc: frozenset[int] | None = None
    cable: float | None = None
    strict: set[int] = set()
    prio_to_tc: dict[int, int] = {}
    lines = text.splitlines()
    current_tc: int | None = None
    pfc_header = False
    dcbx: Literal["os", "firmware"] | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        where = Where(source, number, line)
        command = _COMMAND.search(line)
        if command and not line.startswith(("prio", "tc")):
            netdev = command.group(1)
            continue
        if line.startswith("DCBX mode:"):
            dcbx = "os" if "OS" in line else ("firmware" if "irmware" in line else None)
        elif match := _TRUST.match(line):
            if match.group(1) not in _TRUSTS:
                raise where.error(f"trust state {match.group(1)!r} must be 'dscp' or 'pcp'")
            trust = _TRUSTS[match.group(1)]
        elif match := _DSCP_ROW.match(line):
            prio = parse_int(match.group(1), where, what="prio", lo=0, hi=7)
            for item in (v.strip() for v in match.group(2).split(",")):
                if item:
                    dscp_map[parse_int(item, where, what="dscp", lo=0, hi=63)] = prio
        elif line.startswith("Cable len:"):
            cable = parse_float(line.partition(":")[2].strip(), where, what="cable length")
        elif line == "PFC configuration:":
            pfc_header = True
        elif pfc_header and line.startswith("enabled"):
            flags = line.split()[1:]
            if len(flags) != 8 or any(f not in ("0", "1") for f in flags):
                raise where.error("PFC 'enabled' row must hold eight 0/1 flags")
            pfc = frozenset(i for i, f in enumerate(flags) if f == "1")
            pfc_header = False
        elif match := _TC_ROW.match(line):
            current_tc = parse_int(match.group(1), where, what="tc", lo=0, hi=7)
            if match.group(2) == "strict":
                strict.add(current_tc)
        elif (match := _TC_PRIOS.match(line)) and current_tc is not None:
            for item in match.group(1).split():
                prio_to_tc[parse_int(item, where, what="priority", lo=0, hi=7)] = current_tc
    port = PortQos(
        name=netdev,
        pfc_priorities=pfc,
        trust=trust,
        cable_length_m=cable,
        strict_queues=frozenset(strict),
        dscp_to_priority=dscp_map if trust == "dscp" or dscp_map else None,
        dcbx=dcbx,
    )
    return Deployed(
        device=device or device_from_source(source),
        kind="host",
        format=FORMAT,
        source=source,
        dscp_to_priority=dict(dscp_map),
        priority_to_queue=prio_to_tc,
        pfc_priorities=pfc,
        trust=trust,
        cable_length_m=cable,
        strict_queues=frozenset(strict),
        ports=(port,),
    )
