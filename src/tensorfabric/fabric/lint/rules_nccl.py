"""NCCL on the fabric: traffic class in the lossless class (R1/§7.6), GID choice (R8), HCA list (R9).

Whether a value is wrong is the host doctor's judgement (``host.nccl_judge``), so ``fabric lint`` on a spec and
``doctor`` on the host it describes agree; these rules only name the spec's host and its evidence."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric import roce
from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding
from tensorfabric.host.nccl_judge import exact_list, judge_gid_index, judge_ib_tc, split_nccl_list

TC = "nccl.tc-not-lossless"
GID = "nccl.gid-index-pinned"
HCA = "nccl.hca-prefix-match"


@rule(TC, "error", "R1", "NCCL_IB_TC >> 2 is not the lossless RoCE DSCP")
def tc(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        env = dev.nccl_env
        if dev.kind != "host" or not env:
            continue
        raw = env.get("NCCL_IB_TC", "0")  # unset, NCCL sends its default traffic class 0
        judged = judge_ib_tc(raw, ctx.plan.roce.dscp)
        if not judged.lossless:
            want = roce.traffic_class(ctx.plan.roce.dscp[0])
            marked = "?" if judged.dscp is None else judged.dscp
            yield finding(TC, f"host {dev.device} NCCL", f"NCCL_IB_TC={raw} -> DSCP {marked}"
                          f", not the lossless DSCP {list(ctx.plan.roce.dscp)}; NCCL traffic rides a lossy class",
                          {"NCCL_IB_TC": raw, "roce_dscp": list(ctx.plan.roce.dscp)}, f"export NCCL_IB_TC={want}")


@rule(GID, "warning", "R8", "NCCL_IB_GID_INDEX pinned to a table index that can move")
def gid(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        value = dev.nccl_env.get("NCCL_IB_GID_INDEX")
        if dev.kind != "host" or value is None:
            continue
        judged = judge_gid_index(value)
        if judged.pinned or judged.index is None:
            yield finding(GID, f"host {dev.device} NCCL", f"NCCL_IB_GID_INDEX={value} pins a GID index; indices are "
                          "assigned per address and can point at a RoCE v1 or link-local entry after a change",
                          {"NCCL_IB_GID_INDEX": value},
                          "leave it unset on NCCL >= 2.21 or verify it is the IPv4 RoCE v2 entry on every node")


@rule(HCA, "warning", "R9", "NCCL_IB_HCA uses prefix matching")
def hca(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        value = dev.nccl_env.get("NCCL_IB_HCA")
        if dev.kind != "host" or not value:
            continue
        hcas = split_nccl_list(value)
        if not hcas.prefixes:
            continue
        first = hcas.prefixes[0]
        verb = "excludes" if hcas.exclude else "selects"
        yield finding(HCA, f"host {dev.device} NCCL", f"NCCL_IB_HCA={value} matches by prefix ({first} also "
                      f"{verb} {first}0..{first}9 where they exist)", {"NCCL_IB_HCA": value},
                      f"NCCL_IB_HCA={exact_list(value)}")
