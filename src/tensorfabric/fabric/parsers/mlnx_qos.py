"""The output of ``mlnx_qos -i IF`` (Mellanox/mlnx-tools) into a host :class:`Deployed`.

Parsing is the host doctor's (:func:`tensorfabric.host.mlnx_qos.parse_mlnx_qos`): one parser for one tool's
output. This module only adds what a deployed record needs: the device comes from the file name (``h1.eth2.txt``
is host ``h1``, netdev ``eth2``; a captured prompt ``$ mlnx_qos -i eth2`` names the netdev and wins), the trust
state must be one the linter knows, ``tsa: strict`` traffic classes are strict queues and ``tsa: ets, bw: N%``
their ETS shares.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Literal

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import Deployed, PortQos, Trust
from tensorfabric.fabric.parsers._common import device_from_source
from tensorfabric.fabric.parsers._read import Reading, markers
from tensorfabric.host.mlnx_qos import parse_mlnx_qos

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "mlnx_qos"
NAME = "mlnx_qos output"
SUFFIXES = (".mlnx_qos",)
EXPECTED = "'mlnx_qos -i IF' output (Priority trust state, dscp2prio mapping, PFC configuration, tc: lines)"
MARKERS = markers(
    ("Priority trust state:", r"^\s*Priority trust state:"),
    ("PFC configuration:", r"^\s*PFC configuration:"),
    ("dscp2prio mapping:", r"^\s*dscp2prio mapping:"),
    ("prio:N dscp:", r"^\s*prio:\s*\d\s+dscp:"),
    ("enabled 0 0 0 1 ...", r"^\s*enabled(?:\s+[01]){8}\s*$"),
    ("tc: N ratelimit:", r"^\s*tc:\s*\d+\s+ratelimit:"),
    ("DCBX mode:", r"^\s*DCBX mode:"),
    ("Cable len:", r"^\s*Cable len:"),
)
# Lines of the tool's output this reader takes facts from (the rest is headers and blank padding).
_FACT = re.compile(r"^\s*(?:Priority trust state:|prio:\s*\d|enabled\s|priority\s|tc:\s*\d|priority:\s*\d|"
                   r"Cable len:|DCBX mode:|PFC configuration:|dscp2prio mapping:)")
_COMMAND = re.compile(r"mlnx_qos\s+(?:\S+\s+){0,8}?-i\s*=?\s*(\S+)")
_TRUSTS: dict[str, Trust] = {"dscp": "dscp", "pcp": "pcp"}
_DCBX: dict[str, Literal["os", "firmware"]] = {"os": "os", "firmware": "firmware"}


def _netdev(r: Reading) -> str:
    for line in r.content():
        stripped = line.text.strip()
        if not stripped.startswith(("prio", "tc")):
            command = _COMMAND.search(stripped[:4096])
            if command:
                return command.group(1)
    parts = PurePath(r.source).name.split(".")
    return parts[1] if len(parts) > 2 else "netdev"


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    netdev = _netdev(r)
    kept: list[str] = []
    for line in r.content():
        if line.kind != "text":
            continue
        flags = line.text.split()
        if flags[:1] == ["enabled"] and (len(flags) != 9 or any(f not in ("0", "1") for f in flags[1:])):
            # A truncated capture: which priorities pause cannot be told, so that row is not used.
            r.warn(line.number, "PFC 'enabled' row must hold eight 0/1 flags; PFC is left unknown")
            continue
        if _FACT.match(line.text):
            r.use(line.number)
        kept.append(line.text)
    try:
        qos = parse_mlnx_qos("\n".join(kept) + "\n", interface=netdev, source=source)
    except ParseError:
        return Deployed(device=device or device_from_source(source), kind="host", format=FORMAT, source=source)
    trust: Trust | None = None
    if qos.trust is not None:
        if qos.trust in _TRUSTS:
            trust = _TRUSTS[qos.trust]
        else:
            r.warn(next((ln.number for ln in r.content() if "trust state" in ln.text), None),
                   f"trust state {qos.trust!r} must be 'dscp' or 'pcp'; trust is left unknown")
    pfc = frozenset(qos.pfc) if qos.pfc is not None else None
    cable = float(qos.cable_len_m) if qos.cable_len_m is not None else None
    strict = frozenset(tc for tc, kind in qos.tsa.items() if kind == "strict")
    dscp_map = dict(qos.dscp_to_prio)
    if dscp_map and len(dscp_map) < 64:
        # The tool prints all 64 DSCPs; fewer means a cut paste, and a missing one would read as priority 0.
        r.warn(None, f"the dscp2prio mapping lists {len(dscp_map)} of 64 DSCPs (cut short?); it is not used")
        dscp_map = {}
    port = PortQos(
        name=netdev,
        pfc_priorities=pfc,
        trust=trust,
        cable_length_m=cable,
        strict_queues=strict if qos.tsa else None,
        queue_weights=dict(qos.tc_bw) or None,
        dscp_to_priority=dscp_map if trust == "dscp" or dscp_map else None,
        dcbx=_DCBX.get(qos.dcbx or ""),
    )
    return Deployed(
        device=device or device_from_source(source),
        kind="host",
        format=FORMAT,
        source=source,
        dscp_to_priority=dscp_map,
        priority_to_queue=dict(qos.prio_to_tc),
        pfc_priorities=pfc,
        trust=trust,
        cable_length_m=cable,
        strict_queues=strict if qos.tsa else None,
        queue_weights=dict(qos.tc_bw),
        ports=(port,),
    )
