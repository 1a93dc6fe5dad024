"""Cross-vendor lossless-fabric linter: one rule id per item of the consistency checklist.

Rules live one family per module (``rules_<family>.py``) and register themselves with :func:`rule`; each takes a
:class:`~tensorfabric.fabric.lint.view.LintContext` and yields :class:`~tensorfabric.findings.Finding` records.
:func:`lint` runs every registered rule over a spec, deployed records, or both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.lint.view import LintContext, build_context
from tensorfabric.fabric.spec import FabricSpec
from tensorfabric.findings import Finding, Severity, sort_key
from tensorfabric.registry import Registry

__all__ = ["FAMILIES", "RULES", "RuleInfo", "finding", "lint", "lint_context", "rule"]

# One module per rule family; the order is the order of the checklist (lossless-config.md §8).
FAMILIES: tuple[str, ...] = (
    "rules_dscp", "rules_pfc", "rules_cnp", "rules_trust", "rules_ecn", "rules_headroom", "rules_mtu",
    "rules_nccl", "rules_watchdog", "rules_routing", "rules_dcbx", "rules_speed",
)

RuleFn = Callable[[LintContext], Iterable[Finding]]


@dataclass(frozen=True, slots=True)
class RuleInfo:
    id: str
    severity: Severity
    checklist: str
    summary: str
    check: RuleFn


RULES: Registry[RuleInfo] = Registry("lint rule", modules=tuple(f"{__name__}.{family}" for family in FAMILIES))


def finding(rule_id: str, subject: str, message: str, evidence: dict[str, object], fix: str,
            severity: Severity | None = None) -> Finding:
    """A Finding of a registered rule, with the rule's default severity unless one is given."""
    return Finding(rule_id, severity or RULES[rule_id].severity, subject, message, evidence, fix)


def rule(rule_id: str, severity: Severity, checklist: str, summary: str) -> Callable[[RuleFn], RuleFn]:
    """Register a rule; ``checklist`` names the item of lossless-config.md §8 it implements (R1..R12)."""

    def register(fn: RuleFn) -> RuleFn:
        RULES.register(rule_id, RuleInfo(rule_id, severity, checklist, summary, fn))
        return fn

    return register


def lint_context(ctx: LintContext, *, only: Sequence[str] = ()) -> list[Finding]:
    findings: list[Finding] = []
    for info in RULES.values():
        if only and info.id not in only:
            continue
        findings.extend(info.check(ctx))
    unique = {(f.rule, f.subject, f.message): f for f in findings}
    return sorted(unique.values(), key=sort_key)


def lint(spec: FabricSpec | None = None, deployed: Sequence[Deployed] = ()) -> list[Finding]:
    """Every finding for ``spec`` as planned, with ``deployed`` records laid over the devices they describe."""
    return lint_context(build_context(spec, deployed))
