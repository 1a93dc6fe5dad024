"""Netdev MTU of the RoCE ports: large enough for RoCE MTU 4096, equal across NICs, as the plan says."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register

# RoCE headers the kernel subtracts from the netdev MTU (iboe_get_mtu): GRH 40 + UDP 8 + BTH 12 + XRC 4 +
# AtomicETH 28 + ICRC 4.
ROCE_OVERHEAD = 96
IB_MTUS = (4096, 2048, 1024, 512, 256)


def roce_mtu(netdev_mtu: int) -> int:
    """The largest IB MTU the kernel derives from a netdev MTU (9000 -> 4096, 1500 -> 1024)."""
    usable = netdev_mtu - ROCE_OVERHEAD
    return next((m for m in IB_MTUS if m <= usable), 0)


@register("mtu")
def mtu(ctx: DoctorContext) -> Iterator[Finding]:
    sizes: dict[str, int] = {}
    for port in ctx.active_roce:
        nd = ctx.inventory.netdevs.get(port.netdev or "")
        if nd is None or nd.mtu is None:
            continue
        sizes[nd.name] = nd.mtu
        evidence = {"netdev": nd.name, "mtu": nd.mtu, "roce_mtu": roce_mtu(nd.mtu)}
        if roce_mtu(nd.mtu) < 4096:
            yield Finding("mtu.too-small", "warning", f"netdev {nd.name}",
                          f"{nd.name} MTU {nd.mtu} gives RoCE MTU {roce_mtu(nd.mtu)}; 4096 needs a netdev MTU of "
                          f"at least {4096 + ROCE_OVERHEAD}", evidence,
                          f"ip link set {nd.name} mtu 9000 (and a switch MTU of 9100+ on the path)")
        if ctx.mtu is not None and nd.mtu != ctx.mtu:
            yield Finding("mtu.plan-mismatch", "warning", f"netdev {nd.name}",
                          f"{nd.name} MTU {nd.mtu} differs from the fabric plan's {ctx.mtu}",
                          {**evidence, "plan_mtu": ctx.mtu}, f"ip link set {nd.name} mtu {ctx.mtu}")
    if len(set(sizes.values())) > 1:
        yield Finding("mtu.unequal", "warning", ", ".join(sorted(sizes)),
                      "RoCE netdevs have different MTUs; NCCL uses the smaller of both ends per connection",
                      {"mtus": sizes}, f"set every RoCE netdev to the same MTU (e.g. {max(sizes.values())})")
