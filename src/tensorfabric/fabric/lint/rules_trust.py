"""R4: trust DSCP everywhere (or PCP consistently); the two ends of a link classify alike."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

RULE = "trust.mismatch"


def _effective(trust: str | None) -> str | None:
    # Cumulus "pcp,dscp" classifies IP (RoCEv2) packets by DSCP.
    return "dscp" if trust == "pcp,dscp" else trust


@rule(RULE, "error", "R4", "trust mode differs from the plan or across a link")
def check(ctx: LintContext) -> Iterator[Finding]:
    planned = ctx.plan.trust
    for ref in ctx.ports():
        trust = _effective(ref.port.trust)
        if trust is not None and trust != planned:
            yield finding(RULE, ref.subject, f"trust {ref.port.trust}, the plan trusts {planned}"
                          + ("; untagged RoCE lands on priority 0" if trust == "pcp" else ""),
                          {"trust": ref.port.trust, "planned": planned, "source": ref.device.source},
                          f"set trust {planned} (mlnx_qos --trust {planned} on hosts)")
    for left, right, subject in ctx.pairs():
        a, b = _effective(left.port.trust), _effective(right.port.trust)
        if a is not None and b is not None and a != b:
            yield finding(RULE, subject, f"{left.endpoint} trusts {a}, {right.endpoint} trusts {b}",
                          {left.endpoint: a, right.endpoint: b}, f"trust {planned} on both ends")
