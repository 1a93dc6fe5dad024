"""Per-host bash script: NIC trust, DSCP map and PFC mask (mlnx_qos), MTU, DCQCN enables and CNP marking
(MLNX_OFED sysfs), NIC PFC-storm prevention, the global RoCE traffic class and the NCCL environment.

Every value that reaches the script is checked (interface and device names against what Linux accepts,
numbers against their ranges, environment names and values against NAME=value rules) and then quoted with
:func:`shlex.quote`, so a hostile spec can make rendering fail but can never inject a command. The script
stops at the first failing command (``set -euo pipefail``) except for the MLNX_OFED-only global traffic
class, which inbox kernels lack and NCCL does not need when ``NCCL_IB_TC`` is set.
"""

from __future__ import annotations

import re
import shlex

from tensorfabric.errors import InputError
from tensorfabric.fabric.renderers._text import GENERATED, metres, speed_label
from tensorfabric.fabric.renderers.plan import HostPlan, NicPlan

__all__ = ["ENV_PROFILE", "EXTENSION", "NCCL_CONF", "TARGET", "render"]

TARGET = "host"
EXTENSION = "sh"
NCCL_CONF = "/etc/nccl.conf"
ENV_PROFILE = "/etc/profile.d/tensorfabric-env.sh"
"""Variables that are not NCCL's (GLOO_SOCKET_IFNAME, UCX_...): NCCL would export them from its file too, but only
once it initialises, which is too late for Gloo; login shells source this file instead."""
# No leading "-" (it would read as an option to mlnx_qos/ip/ethtool); no ":" or "/" (the kernel refuses them).
_NETDEV = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")
_RDMA = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _name(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.fullmatch(value) or value in (".", ".."):
        raise InputError(f"{what}: {value!r} is not a valid name (letters, digits, _ . -, not starting with '-'; "
                         "Linux netdevs at most 15 characters)")
    return shlex.quote(value)


def _num(value: int, lo: int, hi: int, what: str) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"{what}: {value!r} must be an integer {lo}..{hi}")
    return str(value)


def _env_line(name: str, value: str, *, export: bool = False) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise InputError(f"NCCL environment name {name!r} must look like NCCL_IB_TC")
    if not value.isprintable():
        raise InputError(f"NCCL environment value of {name} holds control characters: {value!r}")
    # nccl.conf is read literally; the profile file is sourced, so its value is quoted once more inside.
    return shlex.quote(f"export {name}={shlex.quote(value)}" if export else f"{name}={value}")


def _nic(host: str, nic: NicPlan) -> list[str]:
    dev = _name(nic.netdev, _NETDEV, f"hosts[{host}].nics netdev")
    cable = f", cable {metres(nic.cable_length_m)}" if nic.cable_length_m is not None else ""
    out = [f"# {nic.netdev}" + (f" ({nic.rdma_device})" if nic.rdma_device else "")
           + f": {speed_label(nic.speed_bps)}{cable}, MTU {nic.mtu}",
           f"ip link set dev {dev} mtu {_num(nic.mtu, 576, 16384, 'mtu')}",
           # PFC and link-level pause exclude each other (Intel E800 guide, Nokia PFC guide).
           f"ethtool -A {dev} rx {'on' if nic.link_pause else 'off'} tx {'on' if nic.link_pause else 'off'}",
           f"mlnx_qos -i {dev} --dcbx {'os' if nic.dcbx == 'os' else 'fw'}",
           f"mlnx_qos -i {dev} --trust {nic.trust}"]
    # Under PCP trust the DSCP map is unused, and writing it could flip some mlnx_qos versions to DSCP trust.
    for dscp, prio in sorted(nic.dscp_to_priority.items()) if nic.trust == "dscp" else ():
        out.append(f"mlnx_qos -i {dev} --dscp2prio set,{_num(dscp, 0, 63, 'dscp')},{_num(prio, 0, 7, 'priority')}")
    mask = ",".join("1" if p in nic.pfc else "0" for p in range(8))
    out.append(f"mlnx_qos -i {dev} --pfc {mask}")
    if nic.cable_length_m is not None:
        # mlnx_qos takes whole metres; rounding up keeps the NIC headroom on the safe side.
        whole = -int(-nic.cable_length_m // 1)
        out.append(f"mlnx_qos -i {dev} --cable_len {_num(whole, 1, 100_000, 'cable length')}")
    for prio in nic.pfc:
        on = "1" if prio in nic.ecn_priorities else "0"
        for point in ("np", "rp"):
            out.append(f"echo {on} > /sys/class/net/{dev}/ecn/roce_{point}/enable/{_num(prio, 0, 7, 'priority')}")
    out += [f"echo {_num(nic.cnp_dscp, 0, 63, 'cnp dscp')} > /sys/class/net/{dev}/ecn/roce_np/cnp_dscp",
            f"echo {_num(nic.cnp_priority, 0, 7, 'cnp priority')} > /sys/class/net/{dev}/ecn/roce_np/cnp_802p_prio"]
    if nic.storm_prevention_ms:
        out.append(f"ethtool --set-tunable {dev} pfc-prevention-tout "
                   f"{_num(nic.storm_prevention_ms, 80, 8000, 'storm prevention ms')}")
    if nic.rdma_device:
        rdma = _name(nic.rdma_device, _RDMA, f"hosts[{host}].nics rdma_device")
        path = f"/sys/class/infiniband/{rdma}/tc/1/traffic_class"
        out.append(f"if [ -e {path} ]; then echo {_num(nic.roce_tclass, 0, 255, 'traffic class')} > {path}; fi")
    return out + [""]


def render(plan: HostPlan) -> str:
    host = _name(plan.name, _HOST, "hosts name")
    out = ["#!/usr/bin/env bash", f"# {plan.name}: host RoCE QoS, {GENERATED}", f"# device: {host}",
           "# Needs root and MLNX_OFED (mlnx_qos, ecn sysfs); safe to run again.", "set -euo pipefail", ""]
    for nic in plan.nics:
        out += _nic(plan.name, nic)
    nccl = {k: v for k, v in plan.nccl_env.items() if k.startswith("NCCL_")}
    other = {k: v for k, v in plan.nccl_env.items() if not k.startswith("NCCL_")}
    if nccl:
        out += [f"# NCCL reads {NCCL_CONF} at start-up", "printf '%s\\n' \\"]
        out += [f"  {_env_line(k, v)} \\" for k, v in nccl.items()]
        out.append(f"  > {NCCL_CONF}")
    if other:
        out += ["", "# Launch variables that are not NCCL's, for login shells", "printf '%s\\n' \\"]
        out += [f"  {_env_line(k, v, export=True)} \\" for k, v in other.items()]
        out.append(f"  > {ENV_PROFILE}")
    return "\n".join(out) + "\n"
