"""R6: every lossless PG holds at least the headroom its real speed, cable length and MTU need."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

RULE = "headroom.too-small"


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
