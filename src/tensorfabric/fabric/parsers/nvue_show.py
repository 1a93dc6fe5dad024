"""``nv show qos roce`` (and ``nv show interface IF qos roce status``) output from Cumulus Linux 5.x.

The summary is a two- or three-column table (``operational``, ``applied``, sometimes ``description``); values
are cut at the header's column offsets and the operational value wins over the applied one. The
``RoCE PCP/DSCP->SP`` table gives DSCP -> switch priority, the ``RoCE SP->TC`` table the egress queue and its
scheduling (``strict-priority`` or ``DWRR-50%``). NVUE prints thresholds rounded in KB/MB of 1024 (150000 B
shows as ``146.48 KB``), so they are read back to within that rounding.
"""

from __future__ import annotations

import re

from tensorfabric.fabric.deployed import Deployed, EcnProfile, Trust
from tensorfabric.fabric.parsers._common import Where, device_from_source, parse_float, parse_int, parse_priorities

__all__ = ["FORMAT", "SUFFIXES", "parse", "sniff"]

FORMAT = "nvue-show"
SUFFIXES = (".nvshow",)
_SIZE = re.compile(r"^([0-9]{1,12}(?:\.[0-9]{1,6})?)\s*(Bytes|B|KB|MB|GB)$")
_SCALE = {"Bytes": 1, "B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
_TRUST: dict[str, Trust] = {"pcp,dscp": "pcp,dscp", "dscp": "dscp", "pcp": "pcp", "both": "pcp,dscp"}
_PROMPT = re.compile(r"^\S{1,64}@\S{1,64}[$#]\s")


def sniff(text: str) -> bool:
    head = text[:200_000]
    return "RoCE PCP/DSCP->SP mapping" in head or ("trust-mode" in head and "congestion-mode" in head)


def _size(text: str, where: Where) -> int:
    match = _SIZE.match(text.strip())
    if match is None:
        raise where.error(f"threshold {text!r} must look like '146.48 KB' or '1.43 MB'")
    return round(float(match.group(1)) * _SCALE[match.group(2)])


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    summary: dict[str, tuple[str, Where]] = {}
    columns: list[int] = []
    section: str | None = None
    dscp: dict[int, int] = {}
    seen: dict[int, set[int]] = {}
    to_tc: dict[int, int] = {}
    strict: set[int] = set()
    weights: dict[int, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        stripped = line.strip()
        where = Where(source, number, stripped)
        if not stripped or _PROMPT.match(stripped) or set(stripped) <= set("-= "):
            continue
        if stripped.startswith("RoCE PCP/DSCP->SP"):
            section = "prio"
            continue
        if stripped.startswith("RoCE SP->TC"):
            section = "tc"
            continue
        if stripped.startswith(("RoCE pool", "RoCE Pool", "Exception List", "Extended Features", "No Data")):
            section = "skip"
            continue
        if section is None:
            if "operational" in line and "applied" in line and not columns:
                columns = [line.index("operational"), line.index("applied")]
                if "description" in line:
                    columns.append(line.index("description"))
                continue
            if not columns:
                raise where.error("expected the 'operational  applied' header of nv show qos roce")
            key = line[:columns[0]].strip()
            cells = [line[a:b].strip() for a, b in zip(columns, [*columns[1:], len(line) + 1], strict=False)]
            value = cells[0] or (cells[1] if len(cells) > 1 else "")
            if key and value:
                summary[key] = (value, where)
            continue
        if section == "skip":
            continue
        words = stripped.split()
        if words[0] in ("pcp", "switch-prio", "-", "name"):
            continue  # a table header or its underline
        if section == "prio":
            if len(words) != 4:
                raise where.error("PCP/DSCP->SP rows are 'ID PCP DSCP-LIST SWITCH-PRIO'")
            prio = parse_int(words[3], where, what="switch-prio", lo=0, hi=7)
            if words[2] != "-":
                for d in parse_priorities(words[2], where, what="dscp", hi=63):
                    dscp[d] = prio
                    seen.setdefault(d, set()).add(prio)
        elif section == "tc":
            if len(words) < 4:
                raise where.error("SP->TC rows are 'ID SWITCH-PRIO TRAFFIC-CLASS SCHEDULER'")
            prio = parse_int(words[1], where, what="switch-prio", lo=0, hi=7)
            tc = parse_int(words[2], where, what="traffic-class", lo=0, hi=7)
            to_tc[prio] = tc
            sched = " ".join(words[3:]).lower()
            if sched.startswith("strict"):
                strict.add(tc)
            elif sched.startswith("dwrr-") and sched.endswith("%"):
                weights[tc] = parse_int(sched[5:-1], where, what="DWRR weight", lo=0, hi=100)
            else:
                raise where.error(f"scheduler {sched!r} must be strict-priority or DWRR-N%")
    if not summary and not dscp:
        raise Where(source).error("no nv show qos roce summary or mapping tables found")

    def get(key: str) -> tuple[str, Where] | None:
        return summary.get(key)

    pfc_entry = get("pfc-priority")
    pfc = None
    if pfc_entry is not None:
        pfc = frozenset() if pfc_entry[0] == "-" else parse_priorities(pfc_entry[0], pfc_entry[1], what="pfc-priority")
    trust_entry = get("trust-mode")
    trust: Trust | None = None
    if trust_entry is not None:
        if trust_entry[0] not in _TRUST:
            raise trust_entry[1].error(f"trust-mode {trust_entry[0]!r} must be pcp, dscp or pcp,dscp")
        trust = _TRUST[trust_entry[0]]
    ecn: dict[int, EcnProfile] | None = {} if "congestion-mode" in summary else None
    tcs = get("enabled-tc")
    lo, hi, prob, mode = get("min-threshold"), get("max-threshold"), get("probability"), get("congestion-mode")
    if tcs is not None and tcs[0] != "-" and lo is not None and hi is not None:
        profile = EcnProfile(_size(*lo), _size(*hi), parse_float(prob[0], prob[1], what="probability") if prob
                             else 100.0, ecn=mode is None or mode[0].lower().startswith("ecn"))
        ecn = dict.fromkeys(parse_priorities(tcs[0], tcs[1], what="enabled-tc"), profile)
    cable = get("cable-length")
    return Deployed(
        device=device or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=dscp, priority_to_queue=to_tc, pfc_priorities=pfc, trust=trust, ecn=ecn,
        strict_queues=frozenset(strict) if to_tc else None, queue_weights=weights,
        cable_length_m=parse_float(cable[0], cable[1], what="cable-length") if cable else None,
        dscp_conflicts={d: frozenset(p) for d, p in seen.items() if len(p) > 1},
        notes=("ECN thresholds as NVUE prints them, rounded to 10 KB",) if ecn else (),
    )
