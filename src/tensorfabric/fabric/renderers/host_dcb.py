"""Host NIC commands for any other NIC through iproute2 ``dcb`` (Intel E800, Broadcom and others).

Sets link-level pause off, the DSCP -> priority APP table (with DSCP entries present the driver classifies by
DSCP; ``dcb app flush`` returns it to PCP) and the PFC priorities. DCQCN, CNP marking and storm prevention have
no vendor-neutral interface; the script says so in a comment and leaves them to the vendor tool (``niccli``,
``bnxt_setupcc.sh``, Intel's ``devlink`` parameters).
"""

from __future__ import annotations

from tensorfabric.fabric.plan import NicPlan
from tensorfabric.fabric.renderers._escape import comment
from tensorfabric.fabric.renderers._shell import NETDEV, name, num
from tensorfabric.fabric.renderers._text import metres, speed_label

__all__ = ["render_nic"]


def render_nic(host: str, nic: NicPlan) -> list[str]:
    dev = name(nic.netdev, NETDEV, f"hosts[{host}].nics netdev")
    cable = f", cable {metres(nic.cable_length_m)}" if nic.cable_length_m is not None else ""
    pause = "on" if nic.link_pause else "off"
    vendor = comment(nic.vendor, f"hosts[{host}].nics vendor")
    out = [f"# {comment(nic.netdev, 'netdev')} ({vendor} NIC, iproute2 dcb): {speed_label(nic.speed_bps)}{cable}, "
           f"MTU {nic.mtu}",
           f"ip link set dev {dev} mtu {num(nic.mtu, 576, 16384, 'mtu')}",
           f"ethtool -A {dev} rx {pause} tx {pause}"]
    if nic.trust == "dscp":
        # Without the >>3 default of mlx5, every planned DSCP is listed; unlisted DSCPs go to priority 0.
        pairs = " ".join(f"{num(d, 0, 63, 'dscp')}:{num(p, 0, 7, 'priority')}"
                         for d, p in sorted(nic.dscp_explicit.items()))
        out.append(f"dcb app replace dev {dev} dscp-prio {pairs}")
    else:
        out.append(f"dcb app flush dev {dev} dscp-prio")
    flags = " ".join(f"{p}:{'on' if p in nic.pfc else 'off'}" for p in range(8))
    out += [f"dcb pfc set dev {dev} prio-pfc {flags}",
            f"# DCQCN on priorities {list(nic.ecn_priorities)}, CNP DSCP {nic.cnp_dscp} / priority {nic.cnp_priority}: "
            "set with the NIC vendor's tool"]
    return out + [""]
