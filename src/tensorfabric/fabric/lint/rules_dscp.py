"""R1: the RoCE DSCP must land on a PFC-enabled priority on every NIC and switch, the same at both ends."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, fixes, rule
from tensorfabric.fabric.lint.view import LintContext, PortRef
from tensorfabric.findings import Finding

RULE = "roce.dscp-not-lossless"
CONFLICT = "dscp.conflict"
LOSSY_POOL = "roce.lossy-pool"
EGRESS_REWRITE = "dscp.egress-rewrite"


def priority_of(ref: PortRef, dscp: int) -> int | None:
    """Priority of ``dscp`` at this port; an unmapped DSCP falls to priority 0, an unknown table gives None."""
    table = ref.port.dscp_to_priority
    if not table:
        return None
    return table.get(dscp, 0)


@rule(RULE, "error", "R1", "RoCE DSCP lands on a priority without PFC, or on different priorities across a link")
def check(ctx: LintContext) -> Iterator[Finding]:
    for dscp in ctx.plan.roce.dscp:
        for ref in ctx.ports():
            prio = priority_of(ref, dscp)
            pfc = ref.port.pfc_priorities
            if prio is None or pfc is None or prio in pfc or dscp in ref.device.dscp_conflicts:
                continue  # a DSCP listed twice is reported once, by dscp.conflict
            yield finding(
                RULE, ref.subject, f"RoCE DSCP {dscp} maps to priority {prio}, which has no PFC (lossless: "
                f"{sorted(pfc) or 'none'}); RoCE would ride a lossy queue",
                {"dscp": dscp, "priority": prio, "pfc_priorities": sorted(pfc), "source": ref.device.source},
                f"map DSCP {dscp} to priority {ctx.plan.roce.priority} on {ref.device.device}")
        for left, right, subject in ctx.pairs():
            p_left, p_right = priority_of(left, dscp), priority_of(right, dscp)
            if p_left is None or p_right is None or p_left == p_right:
                continue
            yield finding(
                RULE, subject, f"RoCE DSCP {dscp} maps to priority {p_left} on {left.endpoint} but {p_right} on "
                f"{right.endpoint}",
                {"dscp": dscp, left.endpoint: p_left, right.endpoint: p_right},
                f"use the plan's DSCP {dscp} -> priority {ctx.plan.roce.priority} on both ends")


@rule(CONFLICT, "error", "R1", "one DSCP listed in two classes (the config's DSCP map contradicts itself)")
def conflict(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        for dscp, prios in sorted(dev.dscp_conflicts.items()):
            tables = [dev.dscp_to_priority, *(p.dscp_to_priority for p in dev.ports if p.dscp_to_priority)]
            got = next((t[dscp] for t in tables if dscp in t), None)
            lossless = dev.pfc_priorities or frozenset().union(*(p.pfc_priorities or frozenset() for p in dev.ports))
            effect = ("which one wins is not documented" if got is None else
                      f"the device uses {got}{' (no PFC: lossy)' if lossless and got not in lossless else ''}")
            yield finding(CONFLICT, f"{dev.kind} {dev.device}", f"DSCP {dscp} is listed for priorities "
                          f"{sorted(prios)}; {effect}, and the other entry hides what the operator meant",
                          {"dscp": dscp, "priorities": sorted(prios), "effective": got, "source": dev.source},
                          f"list DSCP {dscp} in one class only")


@rule(LOSSY_POOL, "error", "R1", "RoCE DSCP lands on a PFC priority whose buffer group or queue is lossy")
def lossy_pool(ctx: LintContext) -> Iterator[Finding]:
    for dscp in ctx.plan.roce.dscp:
        for ref in ctx.ports("switch"):
            prio = priority_of(ref, dscp)
            pfc = ref.port.pfc_priorities
            if prio is None or pfc is None or prio not in pfc:
                continue  # a lossy priority is the finding above
            pg = ref.device.priority_to_pg.get(prio, prio)
            queue = ref.device.queue_of(prio)
            bad = [f"PG {pg} uses a lossy buffer profile" for _ in [0] if pg in (ref.port.lossy_pgs or ())]
            bad += [f"queue {queue} uses a lossy buffer profile" for _ in [0] if queue in (ref.port.lossy_queues or ())]
            if bad:
                yield finding(LOSSY_POOL, ref.subject, f"RoCE DSCP {dscp} -> priority {prio} has PFC, but "
                              f"{' and '.join(bad)}: the pause comes too late or never and frames are dropped",
                              {"dscp": dscp, "priority": prio, "pg": pg, "queue": queue,
                               "source": ref.device.source},
                              f"bind PG {pg} / queue {queue} to the lossless pool's profile")


@rule(EGRESS_REWRITE, "error", "R1", "the RoCE class is re-marked to another DSCP on egress")
def egress_rewrite(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        rewrite = ref.device.priority_to_dscp
        intent = ctx.roce_intent(ref)
        if not rewrite or not intent.determined or intent.priority is None:
            continue
        out = rewrite.get(intent.priority)
        if out is None or out == intent.dscp:
            continue
        yield finding(EGRESS_REWRITE, ref.subject, f"RoCE (DSCP {intent.dscp}) rides priority {intent.priority}, "
                      f"which leaves the switch re-marked DSCP {out}: the next hop classifies it by {out}, not by the "
                      "RoCE DSCP its lossless class is built for",
                      {"dscp": intent.dscp, "priority": intent.priority, "egress_dscp": out,
                       "source": ref.device.source},
                      fixes.no_egress_rewrite(ref.device.format, intent.priority, out))
