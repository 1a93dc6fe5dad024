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

from tensorfabric.fabric.deployed import Deployed, PortQos, Trust
from tensorfabric.fabric.parsers._common import MAX_COMMAND_CHARS, Where, device_from_source
from tensorfabric.host.mlnx_qos import parse_mlnx_qos

__all__ = ["FORMAT", "SUFFIXES", "parse", "sniff"]

FORMAT = "mlnx_qos"
SUFFIXES = (".mlnx_qos",)

_COMMAND = re.compile(r"mlnx_qos\s+(?:\S+\s+){0,8}?-i\s*=?\s*(\S+)")
_TRUSTS: dict[str, Trust] = {"dscp": "dscp", "pcp": "pcp"}
_DCBX: dict[str, Literal["os", "firmware"]] = {"os": "os", "firmware": "firmware"}


def sniff(text: str) -> bool:
    return "Priority trust state:" in text or ("PFC configuration:" in text and "enabled" in text)


def _netdev(text: str, source: str) -> str:
    for line in text.splitlines()[:20]:
        stripped = line.strip()
        if len(stripped) < MAX_COMMAND_CHARS and not stripped.startswith(("prio", "tc")):
            command = _COMMAND.search(stripped)
            if command:
                return command.group(1)
    parts = PurePath(source).name.split(".")
    return parts[1] if len(parts) > 2 else "netdev"


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    if not sniff(text):
        raise Where(source).error("not mlnx_qos output: expected 'Priority trust state:' or 'PFC configuration:'")
    netdev = _netdev(text, source)
    for number, line in enumerate(text.splitlines(), start=1):
        flags = line.split()
        if flags[:1] == ["enabled"] and (len(flags) != 9 or any(f not in ("0", "1") for f in flags[1:])):
            # A truncated capture: which priorities pause cannot be told, so refuse rather than guess.
            raise Where(source, number, line.strip()).error("PFC 'enabled' row must hold eight 0/1 flags")
    qos = parse_mlnx_qos(text, interface=netdev, source=source)
    if qos.trust is not None and qos.trust not in _TRUSTS:
        raise Where(source).error(f"trust state {qos.trust!r} must be 'dscp' or 'pcp'")
    trust = _TRUSTS[qos.trust] if qos.trust is not None else None
    pfc = frozenset(qos.pfc) if qos.pfc is not None else None
    cable = float(qos.cable_len_m) if qos.cable_len_m is not None else None
    strict = frozenset(tc for tc, kind in qos.tsa.items() if kind == "strict")
    dscp_map = dict(qos.dscp_to_prio)
    port = PortQos(
        name=netdev,
        pfc_priorities=pfc,
        trust=trust,
        cable_length_m=cable,
        strict_queues=strict,
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
        strict_queues=strict,
        queue_weights=dict(qos.tc_bw),
        ports=(port,),
    )
