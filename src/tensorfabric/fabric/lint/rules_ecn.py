"""R5: ECN marks on the RoCE queue, with sane thresholds, before PFC would pause."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.rules_dscp import priority_of
from tensorfabric.fabric.lint.view import LintContext, PortRef
from tensorfabric.findings import Finding

DISABLED = "ecn.disabled"
THRESHOLDS = "ecn.thresholds"
AFTER_PFC = "ecn.after-pfc"


def _roce_queue(ctx: LintContext, ref: PortRef) -> int:
    # The priority RoCE really lands on when it is lossless there (a non-3 lossless priority is legal); else the
    # plan's: a wrong DSCP map is R1's finding, not a missing ECN profile.
    prio = priority_of(ref, ctx.plan.roce.dscp[0])
    lossless = ref.port.pfc_priorities or frozenset()
    if prio is None and len(lossless) == 1:
        prio = next(iter(lossless))  # an excerpt without the DSCP map: RoCE rides the one lossless class it shows
    if prio is None or prio not in lossless:
        prio = ctx.plan.roce.priority
    return ref.device.queue_of(prio)


@rule(DISABLED, "error", "R5", "no ECN marking on the RoCE queue of a switch, or DCQCN off on a NIC")
def disabled(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        if ref.port.ecn is None:
            continue
        queue = _roce_queue(ctx, ref)
        profile = ref.port.ecn.get(queue)
        if profile is None or not profile.ecn:
            yield finding(DISABLED, ref.subject, f"queue {queue} (RoCE) has no ECN marking"
                          + (" (WRED drops instead)" if profile is not None else "")
                          + "; DCQCN never slows senders and PFC does all the work",
                          {"queue": queue, "ecn_queues": sorted(ref.port.ecn), "source": ref.device.source},
                          f"enable ECN on queue {queue} (Kmin/Kmax/Pmax from the plan)")
    for ref in ctx.ports("host"):
        enabled = ref.port.ecn_priorities
        prio = ctx.plan.roce.priority
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
                              "use e.g. Kmin 150KB, Kmax 1.5MB, Pmax 100 %")


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
