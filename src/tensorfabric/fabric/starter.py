"""A starter spec: a two-tier leaf/spine fabric with one RoCE NIC per host and the default lossless plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from tensorfabric.errors import InputError
from tensorfabric.fabric.spec import NOS_NAMES, FabricSpec, parse_spec
from tensorfabric.registry import Registry
from tensorfabric.units import format_rate

__all__ = ["PORT_NAMING", "starter_data", "starter_spec", "starter_yaml"]

# How each NOS names front-panel port i (0-based). SONiC numbers lanes, 4 per 400G port on Spectrum SKUs.
PORT_NAMING: Registry[Callable[[int], str]] = Registry("nos", {
    "sonic": lambda i: f"Ethernet{4 * i}",
    "cumulus": lambda i: f"swp{i + 1}",
    "eos": lambda i: f"Ethernet{i + 1}",
    "nxos": lambda i: f"Ethernet1/{i + 1}",
})
HOST_CABLE = "3m"
FABRIC_CABLE = "30m"


def _speed_text(speed_bps: float) -> str:
    return format_rate(speed_bps).replace("bit/s", "")


def starter_data(leaves: int = 2, spines: int = 2, hosts_per_leaf: int = 4, speed_bps: float = 400e9,
                 nos: str = "sonic", asic: str = "spectrum4") -> dict[str, Any]:
    if nos not in PORT_NAMING:
        raise InputError(f"nos: {nos!r} is not one of {', '.join(NOS_NAMES)}")
    for what, value, low in (("leaves", leaves, 1), ("spines", spines, 0), ("hosts-per-leaf", hosts_per_leaf, 1)):
        if not low <= value <= 512:
            raise InputError(f"{what}: {value} must be between {low} and 512")
    speed = _speed_text(speed_bps)
    name = PORT_NAMING[nos]
    switches: list[dict[str, Any]] = []
    hosts: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for s in range(spines):
        switches.append({"name": f"spine{s + 1}", "nos": nos, "role": "spine", "asic": asic, "speed": speed,
                         "ports": [name(i) for i in range(leaves)]})
    for leaf in range(leaves):
        leaf_name = f"leaf{leaf + 1}"
        switches.append({"name": leaf_name, "nos": nos, "role": "leaf", "asic": asic, "speed": speed,
                         "ports": [name(i) for i in range(hosts_per_leaf + spines)]})
        for h in range(hosts_per_leaf):
            host = f"h{leaf * hosts_per_leaf + h + 1}"
            hosts.append({"name": host, "gpus": 8, "nics": [
                {"netdev": "eth0", "rdma_device": "mlx5_0", "vendor": "nvidia", "model": "ConnectX-7",
                 "speed": speed}]})
            links.append({"a": f"{leaf_name}:{name(h)}", "b": f"{host}:eth0", "cable_length": HOST_CABLE,
                          "medium": "copper"})
        for s in range(spines):
            links.append({"a": f"{leaf_name}:{name(hosts_per_leaf + s)}", "b": f"spine{s + 1}:{name(leaf)}",
                          "cable_length": FABRIC_CABLE, "medium": "fiber"})
    return {"name": f"{leaves}x{spines}-{speed}", "qos": {}, "switches": switches, "hosts": hosts, "links": links}


def starter_spec(**kwargs: Any) -> FabricSpec:
    return parse_spec(starter_data(**kwargs), source="<fabric init>")


_HEADER = """\
# tensorfabric fabric spec -- written by `tensorfabric fabric init`.
# qos: {} takes the default lossless plan: RoCE DSCP 26 -> priority 3 (PFC), CNP DSCP 48 -> priority 6 (strict),
# trust dscp, ECN 150KB/1.5MB/100%, ETS 50/50, PFC watchdog drop 200ms, NCCL_IB_TC 106.
# Set asic.shared_buffer (or asic.xoff_threshold) to your ASIC's numbers so the linter can check ECN before PFC.
# Check with: tensorfabric fabric lint --fabric THIS_FILE ; schema: tensorfabric fabric schema
"""


def starter_yaml(**kwargs: Any) -> str:
    data = starter_data(**kwargs)
    parse_spec(data, source="<fabric init>")  # what we write must load back
    return _HEADER + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=110)
