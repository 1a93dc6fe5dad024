"""ECN/DCQCN on the RoCE priority (MLNX_OFED ``ecn/roce_np|roce_rp/enable/<prio>``, where present)."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register


@register("ecn")
def ecn(ctx: DoctorContext) -> Iterator[Finding]:
    prio = ctx.priority
    seen: set[str] = set()
    for port in ctx.active_roce:
        nd = ctx.inventory.netdevs.get(port.netdev or "")
        if nd is None or nd.name in seen:
            continue
        seen.add(nd.name)
        off = [role for role, knobs in (("roce_np", nd.ecn_np), ("roce_rp", nd.ecn_rp)) if knobs.get(prio) is False]
        if off:
            yield Finding(
                "ecn.off", "warning", f"netdev {nd.name} priority {prio}",
                f"ECN is off on RoCE priority {prio} ({', '.join(off)}): DCQCN cannot slow senders, so PFC does all "
                "the work and congestion spreads", {"priority": prio, "disabled": off},
                " && ".join(f"echo 1 > /sys/class/net/{nd.name}/ecn/{role}/enable/{prio}" for role in off))
