"""``nv show qos roce`` (and ``nv show interface IF qos roce status``) output from Cumulus Linux 5.x.

The summary is a two- or three-column table (``operational``, ``applied``, sometimes ``description``); values
are cut at the header's column offsets and the operational value wins over the applied one. The
``RoCE PCP/DSCP->SP`` table gives DSCP -> switch priority, the ``RoCE SP->TC`` table the egress queue and its
scheduling (``strict-priority`` or ``DWRR-50%``). NVUE prints thresholds rounded in KB/MB of 1024 (150000 B
shows as ``146.48 KB``), so they are read back to within that rounding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tensorfabric.fabric.deployed import Deployed, EcnProfile, Trust
from tensorfabric.fabric.parsers._common import Where, device_from_source, parse_float, parse_int, parse_priorities
from tensorfabric.fabric.parsers._read import Reading, markers
from tensorfabric.fabric.parsers.nvue import default_dscp_map

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "nvue-show"
NAME = "nv show qos roce"
SUFFIXES = (".nvshow",)
EXPECTED = "'nv show qos roce' output (the 'operational  applied' table and the RoCE mapping tables)"
MARKERS = markers(
    ("RoCE PCP/DSCP->SP mapping", r"RoCE PCP/DSCP->SP"),
    ("RoCE SP->TC mapping", r"RoCE SP->TC"),
    ("operational  applied header", r"^\s*operational\s+applied\b"),
    ("trust-mode", r"^\s*trust-mode\s"),
    ("congestion-mode", r"^\s*congestion-mode\s"),
    ("enabled-tc", r"^\s*enabled-tc\s"),
    ("pfc-priority", r"^\s*pfc-priority\s"),
    ("roce-mode", r"^\s*(?:roce-)?mode\s+(?:lossless|lossy)"),
)
_SIZE = re.compile(r"^([0-9]{1,12}(?:\.[0-9]{1,6})?)\s*(Bytes|B|KB|MB|GB)$")
_SCALE = {"Bytes": 1, "B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}
_TRUST: dict[str, Trust] = {"pcp,dscp": "pcp,dscp", "dscp": "dscp", "pcp": "pcp", "both": "pcp,dscp"}
def _size(text: str, where: Where) -> int:
    match = _SIZE.match(text.strip())
    if match is None:
        raise where.error(f"threshold {text!r} must look like '146.48 KB' or '1.43 MB'")
    return round(float(match.group(1)) * _SCALE[match.group(2)])


@dataclass
class _Show:
    summary: dict[str, tuple[str, Where]] = field(default_factory=dict)
    columns: list[int] = field(default_factory=list)
    section: str | None = None
    dscp: dict[int, int] = field(default_factory=dict)
    seen: dict[int, set[int]] = field(default_factory=dict)
    to_tc: dict[int, int] = field(default_factory=dict)
    strict: set[int] = field(default_factory=set)
    weights: dict[int, int] = field(default_factory=dict)
    named: bool = False
    """Rows named ``roce`` / ``cnp`` (``nv show interface IF qos roce status``): only the RoCE classes are listed."""


def _row(st: _Show, line: str, stripped: str, where: Where) -> bool:
    """Read one line of the output; False when it is not one this reader models."""
    if stripped.startswith("RoCE PCP/DSCP->SP"):
        st.section = "prio"
    elif stripped.startswith("RoCE SP->TC"):
        st.section = "tc"
    elif stripped.startswith(("RoCE pool", "RoCE Pool", "Exception List", "Extended Features", "No Data")):
        st.section = "skip"
        return False
    elif st.section is None:
        if "operational" in line and "applied" in line and not st.columns:
            st.columns = [line.index("operational"), line.index("applied")]
            if "description" in line:
                st.columns.append(line.index("description"))
            return True
        if not st.columns:
            return False
        columns = st.columns
        key = line[:columns[0]].strip()
        cells = [line[a:b].strip() for a, b in zip(columns, [*columns[1:], len(line) + 1], strict=False)]
        value = cells[0] or (cells[1] if len(cells) > 1 else "")
        if not (key and value):
            return False
        st.summary[key] = (value, where)
    elif st.section == "skip":
        return False
    else:
        words = stripped.split()
        if words[0] in ("pcp", "switch-prio", "-", "name"):
            return True  # a table header or its underline
        st.named = st.named or words[0] in ("roce", "cnp")
        if st.section == "prio":
            if len(words) != 4:
                raise where.error("PCP/DSCP->SP rows are 'ID PCP DSCP-LIST SWITCH-PRIO'")
            prio = parse_int(words[3], where, what="switch-prio", lo=0, hi=7)
            if words[2] != "-":
                for d in parse_priorities(words[2], where, what="dscp", hi=63):
                    st.dscp[d] = prio
                    st.seen.setdefault(d, set()).add(prio)
        else:
            if len(words) < 4:
                raise where.error("SP->TC rows are 'ID SWITCH-PRIO TRAFFIC-CLASS SCHEDULER'")
            prio = parse_int(words[1], where, what="switch-prio", lo=0, hi=7)
            tc = parse_int(words[2], where, what="traffic-class", lo=0, hi=7)
            sched = " ".join(words[3:]).lower()
            if sched.startswith("strict"):
                st.strict.add(tc)
            elif sched.startswith("dwrr-") and sched.endswith("%"):
                st.weights[tc] = parse_int(sched[5:-1], where, what="DWRR weight", lo=0, hi=100)
            else:
                raise where.error(f"scheduler {sched!r} must be strict-priority or DWRR-N%")
            st.to_tc[prio] = tc
    return True


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    st = _Show()
    for text_line in r.content():
        if text_line.kind != "text":
            st.section = None if st.section == "skip" else st.section
            continue  # a prompt: the next table follows
        number, line = text_line.number, text_line.text.rstrip()
        stripped = line.strip()
        if not stripped or set(stripped) <= set("-= "):
            continue
        with r.statement(number):
            if _row(st, line, stripped, Where(source, number, stripped)):
                r.use(number)
    summary, dscp = st.summary, st.dscp
    if st.named and dscp:
        # The interface status lists the RoCE and CNP rows only; every other DSCP keeps the platform's table.
        dscp = default_dscp_map() | dscp
    elif dscp and len(dscp) < 64:
        # nv show prints every DSCP; a table missing some was cut, and a missing DSCP would read as priority 0.
        r.warn(None, f"the PCP/DSCP->SP table lists {len(dscp)} of 64 DSCPs (cut short?); it is not used")
        dscp = {}
    to_tc, strict, weights = st.to_tc, st.strict, st.weights
    if to_tc and len(to_tc) < 8 and not st.named:
        r.warn(None, f"the SP->TC table lists {len(to_tc)} of 8 switch priorities (cut short?); it is not used")
        to_tc, strict, weights = {}, set(), {}

    def get(key: str) -> tuple[str, Where] | None:
        return summary.get(key)

    pfc_entry = get("pfc-priority")
    pfc = None
    if pfc_entry is not None:
        with r.statement(pfc_entry[1].line):
            pfc = frozenset() if pfc_entry[0] == "-" else parse_priorities(pfc_entry[0], pfc_entry[1],
                                                                            what="pfc-priority")
    trust_entry = get("trust-mode")
    trust: Trust | None = None
    if trust_entry is not None:
        if trust_entry[0] in _TRUST:
            trust = _TRUST[trust_entry[0]]
        else:
            r.warn(trust_entry[1].line, f"trust-mode {trust_entry[0]!r} must be pcp, dscp or pcp,dscp")
    ecn: dict[int, EcnProfile] | None = None
    tcs = get("enabled-tc")
    lo, hi, prob, mode = get("min-threshold"), get("max-threshold"), get("probability"), get("congestion-mode")
    if tcs is not None and tcs[0] == "-":
        ecn = {}
    elif tcs is not None and lo is not None and hi is not None:
        with r.statement(tcs[1].line):
            profile = EcnProfile(_size(*lo), _size(*hi), parse_float(prob[0], prob[1], what="probability") if prob
                                 else 100.0, ecn=mode is None or mode[0].lower().startswith("ecn"))
            ecn = dict.fromkeys(parse_priorities(tcs[0], tcs[1], what="enabled-tc"), profile)
    cable = get("cable-length")
    cable_m = None
    if cable is not None:
        with r.statement(cable[1].line):
            cable_m = parse_float(cable[0], cable[1], what="cable-length")
    return Deployed(
        device=device or device_from_source(source), kind="switch", format=FORMAT, source=source,
        dscp_to_priority=dscp, priority_to_queue=to_tc, pfc_priorities=pfc, trust=trust, ecn=ecn,
        strict_queues=frozenset(strict) if to_tc else None, queue_weights=weights,
        cable_length_m=cable_m,
        dscp_conflicts={d: frozenset(p) for d, p in st.seen.items() if len(p) > 1},
        notes=("ECN thresholds as NVUE prints them, rounded to 10 KB",) if ecn else (),
    )
