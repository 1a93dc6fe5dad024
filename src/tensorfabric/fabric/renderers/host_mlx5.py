"""Host NIC commands for NVIDIA ConnectX with MLNX_OFED: ``mlnx_qos``, the ``ecn`` sysfs tree, ``ethtool``.

Sets link-level pause off (it excludes PFC), the DCBX owner, trust, the DSCP entries that differ from the NIC's
``prio = DSCP >> 3`` default, the PFC mask and cable length, DCQCN notification/reaction points on the lossless
priorities, the CNP DSCP and 802.1p priority, PFC storm prevention and the MLNX_OFED global traffic class.
"""

from __future__ import annotations

from tensorfabric.fabric.plan import NicPlan
from tensorfabric.fabric.renderers._escape import comment
from tensorfabric.fabric.renderers._shell import NETDEV, RDMA, name, num
from tensorfabric.fabric.renderers._text import metres, speed_label

__all__ = ["VENDORS", "render_nic"]

VENDORS = ("nvidia", "mellanox")


def render_nic(host: str, nic: NicPlan) -> list[str]:
    dev = name(nic.netdev, NETDEV, f"hosts[{host}].nics netdev")
    cable = f", cable {metres(nic.cable_length_m)}" if nic.cable_length_m is not None else ""
    out = [f"# {comment(nic.netdev, 'netdev')}"
           + (f" ({comment(nic.rdma_device, 'rdma_device')})" if nic.rdma_device else "")
           + f": {speed_label(nic.speed_bps)}{cable}, MTU {nic.mtu}",
           f"ip link set dev {dev} mtu {num(nic.mtu, 576, 16384, 'mtu')}",
           # PFC and link-level pause exclude each other (Intel E800 guide, Nokia PFC guide).
           f"ethtool -A {dev} rx {'on' if nic.link_pause else 'off'} tx {'on' if nic.link_pause else 'off'}",
           f"mlnx_qos -i {dev} --dcbx {'os' if nic.dcbx == 'os' else 'fw'}",
           f"mlnx_qos -i {dev} --trust {nic.trust}"]
    # Under PCP trust the DSCP map is unused, and writing it could flip some mlnx_qos versions to DSCP trust.
    for dscp, prio in sorted(nic.dscp_to_priority.items()) if nic.trust == "dscp" else ():
        out.append(f"mlnx_qos -i {dev} --dscp2prio set,{num(dscp, 0, 63, 'dscp')},{num(prio, 0, 7, 'priority')}")
    mask = ",".join("1" if p in nic.pfc else "0" for p in range(8))
    out.append(f"mlnx_qos -i {dev} --pfc {mask}")
    if nic.cable_length_m is not None:
        # mlnx_qos takes whole metres; rounding up keeps the NIC headroom on the safe side.
        whole = -int(-nic.cable_length_m // 1)
        out.append(f"mlnx_qos -i {dev} --cable_len {num(whole, 1, 100_000, 'cable length')}")
    for prio in nic.pfc:
        on = "1" if prio in nic.ecn_priorities else "0"
        for point in ("np", "rp"):
            out.append(f"echo {on} > /sys/class/net/{dev}/ecn/roce_{point}/enable/{num(prio, 0, 7, 'priority')}")
    out += [f"echo {num(nic.cnp_dscp, 0, 63, 'cnp dscp')} > /sys/class/net/{dev}/ecn/roce_np/cnp_dscp",
            f"echo {num(nic.cnp_priority, 0, 7, 'cnp priority')} > /sys/class/net/{dev}/ecn/roce_np/cnp_802p_prio"]
    if nic.storm_prevention_ms:
        out.append(f"ethtool --set-tunable {dev} pfc-prevention-tout "
                   f"{num(nic.storm_prevention_ms, 80, 8000, 'storm prevention ms')}")
    if nic.rdma_device:
        rdma = name(nic.rdma_device, RDMA, f"hosts[{host}].nics rdma_device")
        path = f"/sys/class/infiniband/{rdma}/tc/1/traffic_class"
        out.append(f"if [ -e {path} ]; then echo {num(nic.roce_tclass, 0, 255, 'traffic class')} > {path}; fi")
    return out + [""]
