"""Cross-vendor lossless-fabric linter: one rule id per item of the consistency checklist.

Rules live one family per module (``rules_<family>.py``) and register themselves with :func:`rule`; each takes a
:class:`~tensorfabric.fabric.lint.view.LintContext` and yields :class:`~tensorfabric.findings.Finding` records.
:func:`lint` runs every registered rule over a spec, deployed records, or both.

A config is often a fragment, so a silent rule is not a passed rule. :func:`rule_status` says for each rule whether
it was ``checked`` (some device or port held every fact it needs), ``undeterminable`` (devices it concerns exist but
the text lacks a fact, named in ``missing``) or ``not applicable`` (no device of the kind it checks, or it needs a
spec). A rule that fired was checked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.lint.view import LintContext, PortRef, build_context
from tensorfabric.fabric.spec import FabricSpec
from tensorfabric.findings import Finding, Severity, sort_key
from tensorfabric.registry import Registry

__all__ = ["FAMILIES", "RULES", "RuleInfo", "RuleStatus", "finding", "lint", "lint_context", "rule", "rule_status"]

# One module per rule family; the order is the order of the checklist (lossless-config.md §8).
FAMILIES: tuple[str, ...] = (
    "rules_dscp", "rules_pfc", "rules_cnp", "rules_trust", "rules_ecn", "rules_headroom", "rules_mtu",
    "rules_nccl", "rules_watchdog", "rules_routing", "rules_dcbx", "rules_speed", "rules_config",
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


Status = Literal["checked", "undeterminable", "not applicable"]


@dataclass(frozen=True, slots=True)
class RuleStatus:
    """Whether a rule could judge what it was given."""

    rule: str
    status: Status
    missing: tuple[str, ...] = ()
    """For ``undeterminable``: the facts no device of the kind it checks carried."""
    why: str = ""
    """For ``not applicable``: what it would need."""

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "status": self.status, "missing": list(self.missing), "why": self.why}


@dataclass(frozen=True, slots=True)
class _Needs:
    kinds: tuple[str, ...] = ("switch", "host")
    facts: tuple[str, ...] = ()
    spec: bool = False
    both: bool = False
    """Needs a host and a switch (or two devices) to compare."""


_FACTS: dict[str, Callable[[PortRef], bool]] = {
    "a DSCP map": lambda ref: bool(ref.port.dscp_to_priority),
    "the PFC priorities": lambda ref: ref.port.pfc_priorities is not None,
    "an ECN/WRED profile (or the NIC's DCQCN enables)": lambda ref: (
        ref.port.ecn is not None if ref.device.kind == "switch" else ref.port.ecn_priorities is not None),
    "the queue scheduling (strict / DWRR)": lambda ref: ref.port.strict_queues is not None,
    "the PFC watchdog": lambda ref: ref.port.watchdog is not None,
    "the PFC watchdog, or a whole-device config": lambda ref: ref.port.watchdog is not None or ref.device.complete,
    "PFC headroom (xoff/xon/size)": lambda ref: bool(ref.port.headroom),
    "link speed and cable length": lambda ref: bool(ref.port.speed_bps and ref.port.cable_length_m),
    "the MTU": lambda ref: ref.port.mtu is not None,
    "the trust mode": lambda ref: ref.port.trust is not None,
    "whether the port is routed": lambda ref: ref.port.routed is not None,
    "buffer profile bindings": lambda ref: (ref.port.lossy_pgs is not None or ref.port.lossy_queues is not None
                                            or bool(ref.port.headroom)),
    "NCCL environment settings": lambda ref: bool(ref.device.nccl_env),
    # SONiC's dynamic buffer model ("NULL" profiles) leaves the lossless headroom to buffermgrd, out of config_db.
    "explicit lossless buffer profiles": lambda ref: bool(ref.port.headroom),
}
_DSCP, _PFC, _ECN, _SCHED = "a DSCP map", "the PFC priorities", "an ECN/WRED profile (or the NIC's DCQCN enables)", \
    "the queue scheduling (strict / DWRR)"
_NEEDS: dict[str, _Needs] = {
    "roce.dscp-not-lossless": _Needs(facts=(_DSCP, _PFC)),
    "dscp.conflict": _Needs(facts=(_DSCP,)),
    "roce.lossy-pool": _Needs(("switch",), (_DSCP, _PFC, "buffer profile bindings")),
    "pfc.priority-mismatch": _Needs(facts=(_PFC,)),
    "pfc.link-pause": _Needs(spec=True),
    "pfc.too-many-lossless": _Needs(facts=(_PFC,)),
    "pfc.non-default-priority": _Needs(facts=(_PFC,)),
    "pfc.no-hysteresis": _Needs(("switch",), ("PFC headroom (xoff/xon/size)",)),
    "pfc.priority-unused": _Needs(("host",), (_DSCP, _PFC)),
    "buffer.lossless-pg-unbound": _Needs(("switch",), (_PFC, "explicit lossless buffer profiles")),
    "dscp.egress-rewrite": _Needs(("switch",), (_DSCP, _PFC)),
    "mtu.lossless-class-too-small": _Needs(("switch",), ("the MTU", _PFC)),
    "pfcwd.no-drop-action": _Needs(("switch",), ("the PFC watchdog",)),
    "cnp.not-strict": _Needs(("switch",), (_DSCP, _SCHED)),
    "cnp.no-class": _Needs(("switch",), (_DSCP,)),
    "cnp.weighted": _Needs(("switch",), (_DSCP, _SCHED)),
    "cnp.class-mismatch": _Needs(facts=(_DSCP,), both=True),
    "trust.mismatch": _Needs(facts=("the trust mode",)),
    "trust.pcp-on-routed": _Needs(("switch",), ("the trust mode", "whether the port is routed")),
    "ecn.disabled": _Needs(facts=(_ECN,)),
    "ecn.thresholds": _Needs(("switch",), (_ECN,)),
    "ecn.after-pfc": _Needs(("switch",), spec=True),
    "headroom.too-small": _Needs(facts=("PFC headroom (xoff/xon/size)", "link speed and cable length")),
    "mtu.mismatch": _Needs(facts=("the MTU",), both=True),
    "mtu.roce-too-small": _Needs(("host",), ("the MTU",)),
    "nccl.tc-not-lossless": _Needs(("host",), ("NCCL environment settings",)),
    "nccl.gid-index-pinned": _Needs(("host",), ("NCCL environment settings",)),
    "nccl.hca-prefix-match": _Needs(("host",), ("NCCL environment settings",)),
    "pfcwd.off": _Needs(("switch",), ("the PFC watchdog",)),
    "pfcwd.settings": _Needs(("switch",), ("the PFC watchdog",)),
    "pfcwd.no-timers": _Needs(("switch",), ("the PFC watchdog",)),
    "pfcwd.absent": _Needs(("switch",), (_PFC, "the PFC watchdog, or a whole-device config")),
    "pfcwd.nic-storm-prevention-off": _Needs(("host",), spec=True),
    "routing.not-up-down": _Needs(("switch",), spec=True),
    "dcbx.ownership": _Needs(("host",), spec=True),
    "speed.mismatch": _Needs(spec=True),
}


def rule_status(ctx: LintContext, findings: Sequence[Finding] = (), *, only: Sequence[str] = ()) -> list[RuleStatus]:
    """For every rule (or those in ``only``): checked, undeterminable with what was missing, or not applicable."""
    fired = {f.rule for f in findings}
    kinds_present = {dev.kind for dev in ctx.devices.values()}
    out: list[RuleStatus] = []
    for info in RULES.values():
        if only and info.id not in only:
            continue
        needs = _NEEDS.get(info.id, _Needs())
        if info.id in fired:
            out.append(RuleStatus(info.id, "checked"))
            continue
        if needs.spec and ctx.spec is None:
            out.append(RuleStatus(info.id, "not applicable", why="needs a fabric spec (--fabric): cabling, ASIC or "
                                                                "host settings a config does not carry"))
            continue
        relevant = [ref for ref in ctx.ports() if ref.device.kind in needs.kinds]
        if not relevant or not (set(needs.kinds) & kinds_present):
            out.append(RuleStatus(info.id, "not applicable",
                                  why=f"no {' or '.join(needs.kinds)} configuration was given"))
            continue
        if needs.both and len(ctx.devices) < 2:
            out.append(RuleStatus(info.id, "not applicable", why="compares two devices (a host and a switch, or two "
                                                                "switches); one was given"))
            continue
        best: tuple[str, ...] | None = None
        for ref in relevant:
            # A spec's record is the whole plan: what it leaves out is not configured, not unknown.
            missing = () if ref.device.format == "spec" else tuple(f for f in needs.facts if not _FACTS[f](ref))
            if best is None or len(missing) < len(best):
                best = missing
            if not missing:
                break
        assert best is not None
        out.append(RuleStatus(info.id, "checked") if not best else RuleStatus(info.id, "undeterminable", best))
    return out
