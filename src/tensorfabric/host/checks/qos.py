"""NIC QoS from ``mlnx_qos``: trust DSCP, PFC on exactly the RoCE priority, RoCE DSCP mapped to it."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register


@register("qos.mlnx")
def mlnx(ctx: DoctorContext) -> Iterator[Finding]:
    prio = ctx.priority
    for name, qos in sorted(ctx.mlnx_qos.items()):
        subject = f"netdev {name}"
        if qos.trust == "pcp":
            yield Finding("qos.trust-pcp", "error", subject,
                          f"{name} trusts PCP: untagged RoCE lands in priority 0, outside the lossless class",
                          {"trust": qos.trust}, f"mlnx_qos -i {name} --trust=dscp")
        if qos.pfc is not None and prio not in qos.pfc:
            yield Finding("qos.pfc-off", "error", subject,
                          f"PFC is not enabled on RoCE priority {prio} of {name}", {"pfc": qos.pfc},
                          f"mlnx_qos -i {name} --pfc {','.join('1' if i == prio else '0' for i in range(8))}")
        elif qos.pfc is not None and set(qos.pfc) - {prio}:
            yield Finding("qos.pfc-extra", "warning", subject,
                          f"PFC is also enabled on priorities {sorted(set(qos.pfc) - {prio})} of {name}; the switch "
                          "must hold headroom for each", {"pfc": qos.pfc},
                          "enable PFC only on the lossless priorities of the fabric plan")
        mapped = qos.dscp_to_prio.get(ctx.roce_dscp)
        if qos.trust == "dscp" and mapped is not None and mapped != prio:
            yield Finding("qos.dscp-map", "error", subject,
                          f"{name} maps RoCE DSCP {ctx.roce_dscp} to priority {mapped}, not {prio}",
                          {"dscp": ctx.roce_dscp, "priority": mapped},
                          f"mlnx_qos -i {name} --dscp2prio set,{ctx.roce_dscp},{prio}")
