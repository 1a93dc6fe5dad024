"""R6: every lossless PG holds at least the headroom its real speed, cable length and MTU need."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.rules_pfc import planned_lossless
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

RULE = "headroom.too-small"
UNBOUND = "buffer.lossless-pg-unbound"


@rule(RULE, "error", "R6", "PFC headroom below what the link's speed, cable and MTU need")
def check(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports():
        if ctx.spec is not None:
            link = ctx.spec.link_at(ref.endpoint)
            configured = ref.port.cable_length_m
            if link is not None and configured is not None and configured + 1e-9 < link.cable_length_m:
                yield finding(RULE, ref.subject, f"cable length configured as {configured:g} m, the cable is "
                              f"{link.cable_length_m:g} m; headroom is sized for the shorter cable",
                              {"configured_m": configured, "real_m": link.cable_length_m},
                              f"configure cable length {link.cable_length_m:g}m on {ref.endpoint}")
        if not ref.port.headroom:
            continue
        need = ctx.needed_headroom(ref)
        if need is None:
            continue
        for pg, have in sorted(ref.port.headroom.items()):
            if have.xoff_bytes < need.xoff_bytes:
                yield finding(RULE, ref.subject, f"PG {pg}: XOFF headroom {have.xoff_bytes} B < {need.xoff_bytes} B "
                              f"needed ({need.model} model, {need.speed_bps / 1e9:g}G, {need.cable_m:g} m, "
                              f"MTU {need.mtu}); frames in flight after XOFF are dropped",
                              {"pg": pg, "xoff_bytes": have.xoff_bytes, "needed_xoff_bytes": need.xoff_bytes,
                               "model": need.model, "source": ref.device.source},
                              f"reserve at least {need.xoff_bytes} B XOFF headroom "
                              f"(tensorfabric fabric headroom --model {need.model} --explain)")


@rule(UNBOUND, "error", "R6", "a lossless priority's priority group has no lossless buffer profile bound (no headroom)")
def unbound(ctx: LintContext) -> Iterator[Finding]:
    planned = planned_lossless(ctx)
    for ref in ctx.ports("switch"):
        headroom, lossy = ref.port.headroom or {}, ref.port.lossy_pgs
        # Only a port that binds lossless profiles explicitly: a fragment without BUFFER_PG says nothing, and SONiC's
        # dynamic model binds lossless PGs to "NULL" (buffermgrd sizes them), which is not an unbound PG.
        if not headroom:
            continue
        intent = ctx.roce_intent(ref)
        bound = sorted({*headroom, *(lossy or ())})
        for cls in ctx.lossless_classes(ref) or ():
            if cls.pg in headroom or (planned is not None and cls.priority not in planned):
                continue  # a priority the plan (or the hosts) do not make lossless is pfc.priority-mismatch's
            if cls.pg in (lossy or ()):
                if intent.determined and cls in intent.roce:
                    continue  # RoCE's own class in a lossy PG is roce.lossy-pool's finding
                what = f"PG {cls.pg}, which is bound to a lossy profile"
            else:
                what = f"PG {cls.pg}, which has no buffer profile (PGs bound: {bound})"
            yield finding(UNBOUND, ref.subject, f"lossless priority {cls.priority} is held in {what}: no headroom is "
                          "reserved for it, so frames in flight after a pause are dropped",
                          {"priority": cls.priority, "pg": cls.pg, "bound_pgs": bound, "source": ref.device.source},
                          f'BUFFER_PG "{ref.port.name}|{cls.pg}": {{"profile": "<lossless profile>"}} (and '
                          f'TC_TO_PRIORITY_GROUP_MAP "{cls.priority}": "{cls.pg}" to a PG of its own)'
                          if ref.device.format == "sonic" else
                          f"give priority {cls.priority} a PG bound to the lossless pool's headroom profile")
