"""R5: ECN marks on the RoCE queue, with sane thresholds, before PFC would pause."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric import roce
from tensorfabric.fabric.lint import finding, fixes, rule
from tensorfabric.fabric.lint.view import LintContext, PortRef
from tensorfabric.findings import Finding

DISABLED = "ecn.disabled"
THRESHOLDS = "ecn.thresholds"
AFTER_PFC = "ecn.after-pfc"


def _roce_queues(ctx: LintContext, ref: PortRef) -> tuple[tuple[int, ...], bool, str]:
    """The egress queues RoCE rides on this port by its own config, whether one of them is certain, and, when the
    text states no PFC (an excerpt), why the queue is only a presumption ("" when the config itself says).

    The lossless class the RoCE DSCP lands in when there is one; else every lossless class the config uses (R1
    reports a RoCE DSCP in a lossy class, so this rule does not report it twice); the queue the DSCP map sends
    RoCE to when the config states no lossless class; the plan's priority when it states neither.
    """
    intent = ctx.roce_intent(ref)
    if intent.roce:
        return tuple(sorted({c.queue for c in intent.roce})), intent.determined, ""
    unstated = intent.classes is None
    if intent.priority is not None and not intent.classes and intent.dscp in (ref.port.dscp_to_priority or {}):
        return (ref.device.queue_of(intent.priority),), True, \
            "this text states no PFC, so whether RoCE belongs in a lossless queue elsewhere is not known" \
            if unstated else ""
    return (ref.device.queue_of(ctx.plan.roce.priority),), True, \
        f"this text states no PFC, so RoCE's queue is presumed from priority {ctx.plan.roce.priority}" \
        if unstated else ""


@rule(DISABLED, "error", "R5", "no ECN marking on the RoCE queue of a switch, or DCQCN off on a NIC")
def disabled(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        if ref.port.ecn is None:
            continue
        queues, certain, presumed = _roce_queues(ctx, ref)
        marking = [q for q in queues if (p := ref.port.ecn.get(q)) is not None and p.ecn]
        # A stand-in set of classes passes when one of them marks: which of them RoCE rides is not known.
        missing = [q for q in queues if q not in marking] if certain else ([] if marking else list(queues))
        for queue in missing:
            profile = ref.port.ecn.get(queue)
            # With no PFC in the text (an excerpt), RoCE's lossless queue may be one the excerpt does not show,
            # whose marking the whole file would judge: graded as a warning, never an error the whole lacks.
            yield finding(DISABLED, ref.subject, f"queue {queue} (RoCE"
                          + ("" if certain else f", one of the lossless queues {list(queues)}") + ") has no ECN marking"
                          + (" (WRED drops instead)" if profile is not None else "")
                          + "; DCQCN never slows senders and PFC does all the work"
                          + (f"; {presumed}" if presumed else ""),
                          {"queue": queue, "ecn_queues": sorted(ref.port.ecn), "source": ref.device.source},
                          fixes.ecn_on_queue(ref.device.format, queue), severity="warning" if presumed else None)
    for ref in ctx.ports("host"):
        enabled = ref.port.ecn_priorities
        intent = ctx.roce_intent(ref)
        prio = intent.roce[0].priority if intent.determined else ctx.plan.roce.priority
        if enabled is not None and prio not in enabled:
            yield finding(DISABLED, ref.subject, f"DCQCN (roce_np/roce_rp) is off for RoCE priority {prio}",
                          {"ecn_priorities": sorted(enabled), "priority": prio},
                          f"echo 1 > /sys/class/net/{ref.port.name}/ecn/roce_np/enable/{prio} (and roce_rp)")


@rule(THRESHOLDS, "error", "R5", "ECN Kmin above Kmax, or a zero marking probability (Kmin == Kmax is a legal step)")
def thresholds(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        for queue, profile in sorted((ref.port.ecn or {}).items()):
            # Kmin == Kmax is a step profile (mark everything above K), as DCTCP-style configs use.
            if profile.kmin_bytes > profile.kmax_bytes or profile.pmax_percent <= 0:
                unit = "B" if profile.unit == "bytes" else profile.unit
                yield finding(THRESHOLDS, ref.subject, f"queue {queue}: Kmin {profile.kmin_bytes} {unit}, Kmax "
                              f"{profile.kmax_bytes} {unit}, Pmax {profile.pmax_percent:g} %; marking needs Kmin <= "
                              "Kmax and Pmax > 0", {"queue": queue, "kmin_bytes": profile.kmin_bytes,
                                               "kmax_bytes": profile.kmax_bytes, "pmax": profile.pmax_percent},
                              f"use e.g. Kmin {roce.ECN_KMIN_BYTES // 1000}KB, Kmax {roce.ECN_KMAX_BYTES / 1e6:g}MB, "
                              f"Pmax {roce.ECN_PMAX_PERCENT:g} %")


@rule(AFTER_PFC, "error", "R5", "ECN Kmax at or above the ingress PFC XOFF trigger")
def after_pfc(ctx: LintContext) -> Iterator[Finding]:
    if ctx.spec is None:
        return
    for ref in ctx.ports("switch"):
        switch = ctx.spec.switch(ref.device.device)
        trigger = switch.asic.pfc_trigger_bytes() if switch is not None else None
        if trigger is None:
            continue
        for queue, profile in sorted((ref.port.ecn or {}).items()):
            if profile.ecn and profile.unit == "bytes" and profile.kmax_bytes >= trigger:
                yield finding(AFTER_PFC, ref.subject, f"queue {queue}: ECN Kmax {profile.kmax_bytes} B is at or above "
                              f"the PFC XOFF trigger {trigger} B; PFC pauses before DCQCN reacts",
                              {"queue": queue, "kmax_bytes": profile.kmax_bytes, "xoff_trigger_bytes": trigger},
                              f"lower Kmax below {trigger} B or raise the lossless PG's share of the buffer")
