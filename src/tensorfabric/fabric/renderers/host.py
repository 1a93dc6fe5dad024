"""Per-host bash script: per NIC the QoS commands of its vendor's dialect (``host_mlx5``: mlnx_qos trust, DSCP
map and PFC mask, DCQCN enables and CNP marking in the MLNX_OFED sysfs, storm prevention, global traffic class;
``host_dcb`` for other vendors: iproute2 ``dcb`` APP table and PFC), MTU and link pause, then the NCCL environment.

Every value that reaches the script is checked (interface and device names against what Linux accepts,
numbers against their ranges, environment names and values against NAME=value rules) and then quoted with
:func:`shlex.quote`, so a hostile spec can make rendering fail but can never inject a command. The script
stops at the first failing command (``set -euo pipefail``) except for the MLNX_OFED-only global traffic
class, which inbox kernels lack and NCCL does not need when ``NCCL_IB_TC`` is set.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from tensorfabric.errors import InputError
from tensorfabric.fabric.plan import HostPlan, NicPlan
from tensorfabric.fabric.renderers import host_dcb, host_mlx5
from tensorfabric.fabric.renderers._escape import comment, text
from tensorfabric.fabric.renderers._shell import HOST, name
from tensorfabric.fabric.renderers._text import GENERATED
from tensorfabric.registry import Registry

__all__ = ["ENV_PROFILE", "EXTENSION", "NCCL_CONF", "NIC_DIALECTS", "TARGET", "render"]

NIC_DIALECTS: Registry[Callable[[str, NicPlan], list[str]]] = Registry(
    "NIC vendor", dict.fromkeys(host_mlx5.VENDORS, host_mlx5.render_nic))
"""NIC commands by vendor; any other vendor gets the generic iproute2 ``dcb`` dialect."""

TARGET = "host"
EXTENSION = "sh"
SHARES = True  # render(plan, memo): alike devices of one render share their common part
NCCL_CONF = "/etc/nccl.conf"
ENV_PROFILE = "/etc/profile.d/tensorfabric-env.sh"
"""Variables that are not NCCL's (GLOO_SOCKET_IFNAME, UCX_...): NCCL would export them from its file too, but only
once it initialises, which is too late for Gloo; login shells source this file instead."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _env_line(name: str, value: str, *, export: bool = False) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise InputError(f"NCCL environment name {name!r} must look like NCCL_IB_TC")
    text(value, f"NCCL environment value of {name}")
    # nccl.conf is read literally; the profile file is sourced, so its value is quoted once more inside.
    return shlex.quote(f"export {name}={shlex.quote(value)}" if export else f"{name}={value}")


def _nic_lines(host: str, nic: NicPlan) -> list[str]:
    vendor = nic.vendor.lower()
    dialect = NIC_DIALECTS.get(vendor) if vendor in NIC_DIALECTS else host_dcb.render_nic
    return dialect(host, nic)


def render(plan: HostPlan, memo: dict[tuple[int, int], tuple[object, object, str]] | None = None) -> str:
    """The host's script. ``memo``, shared over one fabric's hosts, holds what follows the lines that name the
    host, by the identity of the plan's ``nics`` and ``nccl_env`` (``host_plans`` gives equal hosts the same
    objects, so a fabric of alike hosts renders one body); each entry keeps those objects, so an id stays theirs."""
    host = name(plan.name, HOST, "hosts name")
    head = (f"#!/usr/bin/env bash\n# {comment(plan.name, 'hosts name')}: host RoCE QoS, {GENERATED}\n"
            f"# device: {host}\n")
    if memo is None:
        return head + _body(plan)
    key = (id(plan.nics), id(plan.nccl_env))
    entry = memo.get(key)
    if entry is None:
        entry = memo[key] = (plan.nics, plan.nccl_env, _body(plan))
    return head + entry[2]


def _body(plan: HostPlan) -> str:
    """Everything after the lines that name the host; ``plan.name`` is read only to name a field in an error."""
    out = ["# Needs root and the NIC tools below (MLNX_OFED for ConnectX, iproute2 dcb otherwise); safe to run again.",
           "set -euo pipefail", ""]
    for nic in plan.nics:
        out += _nic_lines(plan.name, nic)
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
