"""NCCL on the fabric: traffic class in the lossless class (R1/§7.6), GID choice (R8), HCA list (R9).

Each rule is written once in ``host.nccl_rules`` (id, severity, message, fix), with the host doctor as the other
adapter, so ``fabric lint`` on a spec and ``doctor`` on the host it describes say the same thing; these rules only
name the spec's host and pick the value out of its NCCL environment."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding
from tensorfabric.host.nccl_rules import (
    GID_INDEX_PINNED,
    HCA_PREFIX,
    TC_NOT_LOSSLESS,
    gid_index_pinned,
    hca_prefix,
    tc_not_lossless,
)

TC = TC_NOT_LOSSLESS.id
GID = GID_INDEX_PINNED.id
HCA = HCA_PREFIX.id


@rule(TC, TC_NOT_LOSSLESS.severity, TC_NOT_LOSSLESS.checklist, TC_NOT_LOSSLESS.summary)
def tc(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        env = dev.nccl_env
        if dev.kind != "host" or not env:
            continue
        found = tc_not_lossless(f"host {dev.device} NCCL", env.get("NCCL_IB_TC"), ctx.plan.roce.dscp)
        if found is not None:
            yield found


@rule(GID, GID_INDEX_PINNED.severity, GID_INDEX_PINNED.checklist, GID_INDEX_PINNED.summary)
def gid(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        value = dev.nccl_env.get("NCCL_IB_GID_INDEX")
        if dev.kind == "host" and value is not None and (found := gid_index_pinned(f"host {dev.device} NCCL", value)):
            yield found


@rule(HCA, HCA_PREFIX.severity, HCA_PREFIX.checklist, HCA_PREFIX.summary)
def hca(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        value = dev.nccl_env.get("NCCL_IB_HCA")
        if dev.kind == "host" and value and (found := hca_prefix(f"host {dev.device} NCCL", value)):
            yield found
