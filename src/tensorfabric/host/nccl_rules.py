"""The NCCL rules, each written once: id, severity, message and fix.

Two adapters emit them: the host doctor (``host.checks.ncclvars``, ``host.checks.gids``) on a live host or a job's
log, and ``fabric lint`` (``fabric.lint.rules_nccl``) on a spec's or a deployed host's NCCL environment. Whether a
value is wrong is ``host.nccl_judge``'s call; this module says what the finding is called, how bad it is, what it
says and what to do, so both adapters print the same words for the same value. An adapter only adds its subject,
its evidence and -- where it sees more than the value -- a confirmation: the doctor raises a prefix match to
``error`` when this host really has the extra devices the prefix selects, which lint cannot know.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tensorfabric import roce
from tensorfabric.findings import Finding, Severity
from tensorfabric.host.nccl_judge import exact_list, judge_gid_index, judge_ib_tc, split_nccl_list

__all__ = ["GID_INDEX_PINNED", "HCA_PREFIX", "RULES", "TC_NOT_LOSSLESS", "NcclRule", "gid_index_pinned",
           "hca_prefix", "tc_not_lossless"]


@dataclass(frozen=True, slots=True)
class NcclRule:
    id: str
    severity: Severity
    """What the value alone proves; an adapter that sees more may use ``confirmed``."""
    checklist: str
    """The item of lossless-config.md §8 it implements (lint's catalogue lists it)."""
    summary: str
    confirmed: Severity | None = None
    """The severity once the host shows the harm (only the doctor can see it); None: the same as ``severity``."""

    def finding(self, subject: str, message: str, evidence: dict[str, object], fix: str, *,
                confirmed: bool = False) -> Finding:
        severity = self.confirmed if confirmed and self.confirmed else self.severity
        return Finding(self.id, severity, subject, message, evidence, fix)


TC_NOT_LOSSLESS = NcclRule("nccl.tc-not-lossless", "error", "R1", "NCCL_IB_TC >> 2 is not the lossless RoCE DSCP")
GID_INDEX_PINNED = NcclRule("nccl.gid-index-pinned", "warning", "R8",
                            "NCCL_IB_GID_INDEX pinned to a table index that can move")
HCA_PREFIX = NcclRule("nccl.hca-prefix-match", "warning", "R9", "NCCL_IB_HCA uses prefix matching",
                      confirmed="error")
RULES = (TC_NOT_LOSSLESS, GID_INDEX_PINNED, HCA_PREFIX)


def tc_fix(roce_dscp: int) -> str:
    return f"export NCCL_IB_TC={roce.traffic_class(roce_dscp)} (DSCP {roce_dscp} << 2 with the ECT(0) bits)"


def tc_not_lossless(subject: str, raw: str | None, roce_dscps: Sequence[int], *,
                    unset_marks: str | None = None, evidence: dict[str, object] | None = None) -> Finding | None:
    """The finding for ``NCCL_IB_TC=raw`` (None: unset), or None when it puts RoCE on a lossless DSCP.

    ``unset_marks`` says what an unset variable leaves on the wire where the adapter knows (the doctor reads the
    port's traffic-class override); without it an unset variable is NCCL's default class 0."""
    want = "/".join(str(d) for d in roce_dscps)
    facts: dict[str, object] = {"NCCL_IB_TC": raw, "roce_dscp": list(roce_dscps), **(evidence or {})}
    fix = tc_fix(roce_dscps[0])
    if raw is None:
        marks = unset_marks or "traffic class 0 (DSCP 0), NCCL's default"
        return TC_NOT_LOSSLESS.finding(subject, f"NCCL_IB_TC is unset: RoCE leaves with {marks}, not the lossless "
                                       f"DSCP {want}", facts, fix)
    judged = judge_ib_tc(raw, roce_dscps)
    if judged.lossless:
        return None
    if judged.value is None:
        return TC_NOT_LOSSLESS.finding(subject, f"NCCL_IB_TC={raw!r} is not an integer 0..255", facts, fix)
    return TC_NOT_LOSSLESS.finding(subject, f"NCCL_IB_TC={judged.value} marks DSCP {judged.dscp}, but the lossless "
                                   f"RoCE class is DSCP {want}: NCCL traffic rides a lossy class", facts, fix)


GID_FIX = ("leave it unset on NCCL >= 2.21 (NCCL_IB_ROCE_VERSION_NUM=2 and NCCL_IB_ADDR_FAMILY pick the RoCE v2 "
           "entry per port) or verify it is the IPv4 RoCE v2 entry on every node")


def gid_index_pinned(subject: str, raw: str, *, valid_here: bool = False) -> Finding | None:
    """The finding for ``NCCL_IB_GID_INDEX=raw`` when it pins a table entry (or is not a number); None otherwise.

    ``valid_here``: the doctor checked the index against this host's tables and it is the right entry today."""
    judged = judge_gid_index(raw)
    if judged.index is not None and not judged.pinned:
        return None
    now = " is valid now, but it" if valid_here else ""
    return GID_INDEX_PINNED.finding(subject, f"NCCL_IB_GID_INDEX={raw}{now} pins a GID index; indices are assigned "
                                    "per address and can point at a RoCE v1 or link-local entry after a change "
                                    "(NVIDIA/nccl#1333)", {"NCCL_IB_GID_INDEX": raw}, GID_FIX)


def hca_fix(raw: str) -> str:
    return f"write the exact form: NCCL_IB_HCA={exact_list(raw)}"


def hca_prefix(subject: str, raw: str, devices: Sequence[str] | None = None) -> Finding | None:
    """The finding for an ``NCCL_IB_HCA`` list without ``=`` (each name a prefix); None for the exact form.

    ``devices``: the RDMA devices of the host (the doctor's); a prefix that selects more of them than it names is
    confirmed, and the message names them."""
    hcas = split_nccl_list(raw)
    if not hcas.prefixes:
        return None
    verb = "excludes" if hcas.exclude else "selects"
    for name in hcas.prefixes:
        extra = [d for d in devices or () if d.startswith(name) and d != name]
        if extra:
            return HCA_PREFIX.finding(subject, f"NCCL_IB_HCA={raw!r} has no '=': {name!r} is a prefix and also {verb} "
                                      f"{', '.join(extra)}", {"NCCL_IB_HCA": raw, "matched": [name, *extra]},
                                      hca_fix(raw), confirmed=True)
    first = hcas.prefixes[0]
    return HCA_PREFIX.finding(subject, f"NCCL_IB_HCA={raw!r} has no '=': {first!r} is a prefix (on a host with "
                              f"{first}0..{first}9 it would {verb[:-1]} those too)", {"NCCL_IB_HCA": raw},
                              hca_fix(raw))
