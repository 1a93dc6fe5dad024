"""R3: CNPs must reach a strict-priority queue on every switch, on the same priority the NIC sends them."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, fixes, rule
from tensorfabric.fabric.lint.rules_dscp import priority_of
from tensorfabric.fabric.lint.view import LintContext, PortRef
from tensorfabric.findings import Finding

NOT_STRICT = "cnp.not-strict"
MISMATCH = "cnp.class-mismatch"
NO_CLASS = "cnp.no-class"
WEIGHTED = "cnp.weighted"


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
            if prio is None or strict is None or _unclassified(ref, dscp):
                continue
            queue = ref.device.queue_of(prio)
            if queue not in strict and queue not in (ref.port.queue_weights or {}):
                yield finding(NOT_STRICT, ref.subject, f"CNP DSCP {dscp} -> priority {prio} -> queue {queue}, which "
                              f"is not strict (strict queues: {sorted(strict) or 'none'}); delayed CNPs break DCQCN",
                              {"dscp": dscp, "priority": prio, "queue": queue, "strict_queues": sorted(strict)},
                              fixes.strict_queue(ref.device.format, queue))


def _unclassified(ref: PortRef, dscp: int) -> bool:
    """The device's own DSCP table leaves ``dscp`` to the default class (no built-in table in play)."""
    table = ref.port.dscp_to_priority
    return table is not None and bool(table) and dscp not in table and not ref.device.default_dscp_map


@rule(NO_CLASS, "error", "R3", "no class for CNPs: the switch's DSCP map leaves the CNP DSCP to the default class")
def no_class(ctx: LintContext) -> Iterator[Finding]:
    for dscp in sorted(_cnp_dscps(ctx)):
        for ref in ctx.ports("switch"):
            if _unclassified(ref, dscp):
                # An excerpt may have left out the map line that classifies the CNP DSCP (a Junos classifier is one
                # `set` line per class): graded as a warning that says so; a whole config's absent class is an error.
                yield finding(NO_CLASS, ref.subject, f"CNP DSCP {dscp} is in no class of the DSCP map, so CNPs ride "
                              "the default (best-effort) queue behind the traffic they should slow down"
                              + ("" if ref.device.complete else
                                 "; this text is an excerpt, so the line classifying it may only be missing here"),
                              {"dscp": dscp, "mapped_dscps": len(ref.port.dscp_to_priority or {}),
                               "source": ref.device.source},
                              f"{fixes.dscp_map(ref.device.format, dscp, ctx.plan.cnp.priority)}; then "
                              f"{fixes.strict_queue(ref.device.format, ref.device.queue_of(ctx.plan.cnp.priority))}",
                              severity=None if ref.device.complete else "warning")


@rule(WEIGHTED, "error", "R3", "CNP queue scheduled by bandwidth percent / DWRR instead of strict priority")
def weighted(ctx: LintContext) -> Iterator[Finding]:
    for dscp in sorted(_cnp_dscps(ctx)):
        for ref in ctx.ports("switch"):
            prio = priority_of(ref, dscp)
            strict, weights = ref.port.strict_queues, ref.port.queue_weights or {}
            if prio is None or strict is None or _unclassified(ref, dscp):
                continue
            queue = ref.device.queue_of(prio)
            if queue not in strict and queue in weights:
                yield finding(WEIGHTED, ref.subject, f"CNP queue {queue} gets a {weights[queue]} % DWRR share instead "
                              "of strict priority; under load CNPs wait their turn and DCQCN reacts late",
                              {"dscp": dscp, "queue": queue, "weight": weights[queue], "source": ref.device.source},
                              f"replace the bandwidth share of queue {queue} by strict priority: "
                              f"{fixes.strict_queue(ref.device.format, queue)}")


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
