"""R7 (link layer): the two ends of a link run at one speed.

A link whose ends disagree either does not come up or, auto-negotiated down, leaves one end's headroom, ECN
profile and pause quanta sized for a speed the wire does not run. Each end's speed is what that end states: a
deployed record's port speed, else the spec's port/NIC (or switch-wide) speed, else the link's declared speed.
An end that states nothing is unknown and never compared.
"""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding
from tensorfabric.units import format_rate

MISMATCH = "speed.mismatch"


def _stated(ctx: LintContext, endpoint: str) -> float | None:
    ref = ctx.port(endpoint)
    if ref is not None and ref.device.format != "spec":
        return ref.port.speed_bps or None
    if ctx.spec is None:
        return None
    return ctx.spec.port_speed(endpoint)


@rule(MISMATCH, "error", "R7", "the two ends of a link (or the link and one end) state different speeds")
def mismatch(ctx: LintContext) -> Iterator[Finding]:
    declared = {(lk.a, lk.b): lk.speed_bps for lk in ctx.spec.links} if ctx.spec is not None else {}
    for a, b in ctx.links:
        speeds = {a: _stated(ctx, a), b: _stated(ctx, b)}
        link_speed = declared.get((a, b))
        if link_speed:
            speeds[f"link {a}—{b}"] = link_speed
        known = {k: v for k, v in speeds.items() if v}
        if len({round(v) for v in known.values()}) < 2:
            continue
        text = ", ".join(f"{k} {format_rate(v)}" for k, v in known.items())
        yield finding(MISMATCH, f"link {a}—{b}", f"ends disagree on speed: {text}",
                      {k: v for k, v in known.items()},
                      "set one speed on both ends (and the link); headroom and ECN are sized per speed")
