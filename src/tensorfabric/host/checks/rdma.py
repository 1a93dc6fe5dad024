"""RDMA presence: devices, /dev/infiniband, port state, pinned-memory limit, and the TCP path otherwise."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register
from tensorfabric.host.ncclenv import tcp_interface
from tensorfabric.units import format_size

CONTAINER_HINT = ("in a container, run with --device=/dev/infiniband --cap-add IPC_LOCK (or --privileged) and a "
                  "/sys that shows the host's class/infiniband")
_MEMLOCK_FLOOR = 1 << 30


@register("rdma.devices")
def devices(ctx: DoctorContext) -> Iterator[Finding]:
    inv = ctx.inventory
    if not inv.rdma_devices:
        yield Finding(
            "rdma.no-device", "error", "host",
            "no RDMA device in /sys/class/infiniband: NCCL will fall back to TCP sockets (typically ~10x slower)",
            {"sys_class_infiniband": [], "dev_infiniband": inv.dev_infiniband, "in_container": inv.in_container},
            f"on bare metal, load the NIC's RDMA driver and rdma-core until `ibv_devinfo` lists a device; "
            f"{CONTAINER_HINT}")
    elif not inv.dev_infiniband or not any(e.startswith("uverbs") for e in inv.dev_infiniband):
        yield Finding(
            "rdma.no-dev-infiniband", "error", "host",
            "RDMA devices exist in sysfs but /dev/infiniband/uverbs* is missing: verbs cannot open them and NCCL "
            "falls back to sockets", {"devices": [d.name for d in inv.rdma_devices],
                                      "dev_infiniband": inv.dev_infiniband, "in_container": inv.in_container},
            f"load ib_uverbs (modprobe ib_uverbs); {CONTAINER_HINT}")


@register("net.tcp-path")
def tcp_path(ctx: DoctorContext) -> Iterator[Finding]:
    if any(p.active for p in ctx.inventory.ports):
        return
    route = tcp_interface(ctx.inventory)
    nd = ctx.inventory.netdevs.get(route.interface or "")
    yield Finding(
        "net.tcp-path", "info", f"interface {route.interface}" if route.interface else "host",
        f"without RDMA, NCCL's socket transport and Gloo would use {route.reason}",
        {"interface": route.interface, "reason": route.reason, "mtu": nd.mtu if nd else None,
         "NCCL_SOCKET_IFNAME": f"={route.interface}" if route.interface else None,
         "GLOO_SOCKET_IFNAME": route.interface},
        "pin it with `eval \"$(tensorfabric env)\"` so bootstrap never picks docker/veth interfaces")


@register("rdma.ports")
def ports(ctx: DoctorContext) -> Iterator[Finding]:
    all_ports = ctx.inventory.ports
    any_active = any(p.active for p in all_ports)
    for port in all_ports:
        if port.active and port.phys_state.split(":")[-1].strip() in ("LinkUp", ""):
            continue
        yield Finding(
            "rdma.port-down", "warning" if any_active else "error", f"{port.device} port {port.port}",
            f"{port.name} is {port.state or 'in an unknown state'} ({port.phys_state or 'phys_state unknown'})",
            {"state": port.state, "phys_state": port.phys_state, "netdev": port.netdev},
            "check the cable and switch port (`ibstat`, `ip link`); exclude the port from NCCL_IB_HCA until fixed")


@register("limits.memlock")
def memlock(ctx: DoctorContext) -> Iterator[Finding]:
    inv = ctx.inventory
    if not inv.rdma_devices or inv.memlock in (None, "unlimited"):
        return
    assert isinstance(inv.memlock, int)
    yield Finding(
        "limits.memlock", "error" if inv.memlock < _MEMLOCK_FLOOR else "warning", "host",
        f"RLIMIT_MEMLOCK is {format_size(inv.memlock)}: NCCL pins queues and buffers and fails in "
        "ibv_create_qp/ibv_reg_mr when the limit is low", {"memlock_bytes": inv.memlock},
        "set `* soft memlock unlimited` and `* hard memlock unlimited` in /etc/security/limits.conf "
        "(containers: --ulimit memlock=-1); verify with `ulimit -l`")
