"""NCCL on the fabric: traffic class in the lossless class (R1/§7.6), GID choice (R8), HCA list (R9)."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding
from tensorfabric.host.checks.ncclvars import split_nccl_list

TC = "nccl.tc-not-lossless"
GID = "nccl.gid-index-pinned"
HCA = "nccl.hca-prefix-match"


@rule(TC, "error", "R1", "NCCL_IB_TC >> 2 is not the lossless RoCE DSCP")
def tc(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        env = dev.nccl_env
        if dev.kind != "host" or not env:
            continue
        raw = env.get("NCCL_IB_TC", "0")
        try:
            value = int(raw, 0)
        except ValueError:
            value = -1
        if value < 0 or (value >> 2) not in ctx.plan.roce.dscp:
            want = (ctx.plan.roce.dscp[0] << 2) | 2
            yield finding(TC, f"host {dev.device} NCCL", f"NCCL_IB_TC={raw} -> DSCP {value >> 2 if value >= 0 else '?'}"
                          f", not the lossless DSCP {list(ctx.plan.roce.dscp)}; NCCL traffic rides a lossy class",
                          {"NCCL_IB_TC": raw, "roce_dscp": list(ctx.plan.roce.dscp)}, f"export NCCL_IB_TC={want}")


@rule(GID, "warning", "R8", "NCCL_IB_GID_INDEX pinned to a table index that can move")
def gid(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        value = dev.nccl_env.get("NCCL_IB_GID_INDEX")
        if dev.kind == "host" and value is not None:
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
        exclude, exact, names = split_nccl_list(value)  # the host doctor's reading of NCCL's list syntax
        if exact or not names:
            continue
        verb = "excludes" if exclude else "selects"
        yield finding(HCA, f"host {dev.device} NCCL", f"NCCL_IB_HCA={value} matches by prefix ({names[0]} also "
                      f"{verb} {names[0]}0..{names[0]}9 where they exist)", {"NCCL_IB_HCA": value},
                      f"NCCL_IB_HCA={'^' if exclude else ''}={value.lstrip('^').lstrip('=')}")
