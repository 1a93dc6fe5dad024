"""R4: trust DSCP everywhere (or PCP consistently); the two ends of a link classify alike."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

RULE = "trust.mismatch"
PCP_ROUTED = "trust.pcp-on-routed"


def _effective(trust: str | None) -> str | None:
    # Cumulus "pcp,dscp" classifies IP (RoCEv2) packets by DSCP.
    return "dscp" if trust == "pcp,dscp" else trust


@rule(RULE, "error", "R4", "trust mode differs from the plan or across a link")
def check(ctx: LintContext) -> Iterator[Finding]:
    planned = ctx.plan.trust
    for ref in ctx.ports():
        trust = _effective(ref.port.trust)
        if trust == "pcp" and ref.port.routed:
            continue  # the more specific finding below
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
    if planned == "pcp":
        yield from _pcp_service_level(ctx)


def _pcp_service_level(ctx: LintContext) -> Iterator[Finding]:
    # Under PCP trust the 802.1p priority comes from the verbs SL (mlx5: eth_prio = sl & 7), so NCCL's SL
    # must name the lossless priority; the default SL 0 lands on priority 0.
    lossless = set(ctx.plan.lossless_priorities)
    for dev in ctx.devices.values():
        if dev.kind != "host" or not dev.nccl_env:
            continue
        raw = dev.nccl_env.get("NCCL_IB_SL", "0")
        try:
            prio = int(raw, 0) & 7
        except ValueError:
            prio = -1
        if prio not in lossless:
            yield finding(RULE, f"host {dev.device} NCCL", f"trust is PCP but NCCL_IB_SL={raw} puts NCCL on priority "
                          f"{prio if prio >= 0 else '?'}, not a lossless one {sorted(lossless)}",
                          {"NCCL_IB_SL": raw, "lossless_priorities": sorted(lossless)},
                          f"export NCCL_IB_SL={min(lossless)} (or trust DSCP)")


@rule(PCP_ROUTED, "error", "R4", "classification by CoS/PCP only on a routed port")
def pcp_on_routed(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        if ref.port.routed and ref.port.trust == "pcp":
            yield finding(PCP_ROUTED, ref.subject, "the port routes (layer 3) but classifies by 802.1p CoS only; "
                          "routed RoCEv2 arrives untagged or loses its tag at every hop, so it lands on priority 0",
                          {"trust": "pcp", "routed": True, "source": ref.device.source},
                          "classify by DSCP (qos trust dscp, match dscp, dscp_to_tc_map)")
