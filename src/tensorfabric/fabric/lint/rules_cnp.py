"""R3: CNPs must reach a strict-priority queue on every switch, on the same priority the NIC sends them."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.rules_dscp import priority_of
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

NOT_STRICT = "cnp.not-strict"
MISMATCH = "cnp.class-mismatch"


def _cnp_dscps(ctx: LintContext) -> set[int]:
    dscps = {ctx.plan.cnp.dscp}
    dscps.update(ref.port.cnp_dscp for ref in ctx.ports("host") if ref.port.cnp_dscp is not None)
    return dscps


@rule(NOT_STRICT, "error", "R3", "CNP DSCP does not reach a strict-priority queue on a switch")
def not_strict(ctx: LintContext) -> Iterator[Finding]:
    for dscp in sorted(_cnp_dscps(ctx)):
        for ref in ctx.ports("switch"):
            prio = priority_of(ref, dscp)
            strict = ref.port.strict_queues
            if prio is None or strict is None:
                continue
            queue = ref.device.queue_of(prio)
            if queue not in strict:
                yield finding(NOT_STRICT, ref.subject, f"CNP DSCP {dscp} -> priority {prio} -> queue {queue}, which "
                              f"is not strict (strict queues: {sorted(strict) or 'none'}); delayed CNPs break DCQCN",
                              {"dscp": dscp, "priority": prio, "queue": queue, "strict_queues": sorted(strict)},
                              f"schedule queue {queue} strict priority on {ref.device.device}")


@rule(MISMATCH, "error", "R3", "NIC CNP priority differs from the switch's, or CNPs share a lossless class")
def mismatch(ctx: LintContext) -> Iterator[Finding]:
    for left, right, subject in ctx.pairs():
        host, switch = (left, right) if left.device.kind == "host" else (right, left)
        if host.device.kind != "host" or switch.device.kind != "switch":
            continue
        dscp, nic_prio = host.port.cnp_dscp, host.port.cnp_priority
        if dscp is None or nic_prio is None:
            continue
        sw_prio = priority_of(switch, dscp)
        if sw_prio is not None and sw_prio != nic_prio:
            yield finding(MISMATCH, subject, f"NIC sends CNPs (DSCP {dscp}) on priority {nic_prio}; the switch "
                          f"classifies DSCP {dscp} to priority {sw_prio}",
                          {"cnp_dscp": dscp, "nic_priority": nic_prio, "switch_priority": sw_prio},
                          f"set cnp_802p_prio to {sw_prio} on {host.endpoint} or align the switch map")
    for ref in ctx.ports():
        prio = priority_of(ref, ctx.plan.cnp.dscp)
        pfc = ref.port.pfc_priorities
        if prio is not None and pfc is not None and prio in pfc:
            yield finding(MISMATCH, ref.subject, f"CNP DSCP {ctx.plan.cnp.dscp} lands on lossless priority {prio}, the "
                          "RoCE data class; CNPs queue behind the congestion they signal",
                          {"cnp_dscp": ctx.plan.cnp.dscp, "priority": prio, "pfc_priorities": sorted(pfc)},
                          f"give CNPs their own strict priority ({ctx.plan.cnp.priority})")
