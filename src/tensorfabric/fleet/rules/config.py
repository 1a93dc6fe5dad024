"""Cross-host configuration rules: values that must agree on every host of one job, outliers named by vote.

Why each must agree (the failures they cause, from published reports):

* MTU: QPs between ports of different MTU fail or hang (``IBV_WC_LOC_LEN_ERR``; NVIDIA/nccl#1524, PR #2135).
* Link speed: one NIC that came up at 100G in a 400G fabric slows every collective to its pace.
* GID index: a pinned ``NCCL_IB_GID_INDEX`` that is right on most hosts points at another GID on a host whose
  RoCE v2 address sits elsewhere (``ibv_modify_qp failed with error No such device``; NVIDIA/nccl#718).
* Traffic class / DSCP: a host sending on another class leaves the lossless queue: drops and retransmits, or PFC
  pauses on the wrong priority.
* NCCL settings: hosts that choose different protocols, algorithms or networks hang (NVIDIA/nccl#1136).
* ``NCCL_IB_HCA``: a device named there that the host lacks; mismatched HCA sets hang (NVIDIA/nccl#1277, #2428).
* NCCL / UCX / NIXL / torch versions: mixed NCCL versions across nodes fail at init (NVIDIA/nccl#1267).
* Driver and firmware: per NIC model, so a lagging node is visible before it misbehaves.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import Any

from tensorfabric.findings import Finding
from tensorfabric.fleet.facts import HostReport, PortFacts
from tensorfabric.fleet.rules.base import FleetContext, counts_of, host_finding, register, vote

__all__ = ["MUST_AGREE", "parse_ib_hca"]

GID_VARS = ("NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX")
TC_VARS = ("NCCL_IB_TC", "NCCL_IB_FIFO_TC", "UCX_IB_TRAFFIC_CLASS")
MUST_AGREE = ("NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_IB_DISABLE", "NCCL_PROTO", "NCCL_ALGO", "NCCL_IB_ADDR_FAMILY",
              "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_SL", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_SPLIT_DATA_ON_QPS",
              "NCCL_NET_GDR_LEVEL", "NCCL_CROSS_NIC", "NCCL_IB_MERGE_NICS", "NCCL_IB_TIMEOUT", "NCCL_IB_RETRY_CNT",
              "NCCL_IB_AR_THRESHOLD", "NCCL_BUFFSIZE", "NCCL_P2P_NET_CHUNKSIZE", "UCX_TLS", "UCX_IB_SL")
"""NCCL/UCX settings every rank of one job must share (beyond GID index and traffic class, which have their own
rules): ranks that differ choose different networks, protocols or QP layouts and then fail to connect or hang."""
UNSET = "unset"
_SPEED = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")
_VERSION_KEYS = ("nccl", "ucx", "nixl", "torch", "ucxx", "tensorfabric")


def _env_value(host: HostReport, key: str) -> str:
    return host.environment.get(key, UNSET).strip() or "empty"


def _env_vote(ctx: FleetContext, rule: str, keys: Iterable[str], fix: str) -> Iterator[Finding]:
    hosts = ctx.current
    present = _env_keys(hosts)
    for key in keys:
        if key not in present:
            continue
        values = {h.host: _env_value(h, key) for h in hosts}
        top, odd = vote(values)
        counts = counts_of(values.values())
        for host, value in sorted(odd.items()):
            if top is None:
                message = (f"{key}={value} here, and no value is held by more hosts than another "
                           f"({', '.join(f'{k} on {n}' for k, n in counts.items())})")
                want = "one value"
            else:
                message = f"{key}={value} here but {top} on {counts[top]} of {len(values)} hosts"
                want = "unset" if top == UNSET else top
            yield host_finding(rule, host, message, fix.format(key=key, want=want),
                               detail=f"env {key}", evidence={"variable": key, "value": value, "majority": top,
                                                              "counts": counts})


def _env_keys(hosts: tuple[HostReport, ...]) -> set[str]:
    keys: set[str] = set()
    for host in hosts:
        keys.update(host.environment)
    return keys


def _port_vote(ctx: FleetContext, rule: str, what: str, value_of: Any, fix: str, *,
               group_of: Any = None) -> Iterator[Finding]:
    """Vote over every (host, port) that reports the value, within groups (``group_of(port)``: e.g. NIC model)."""
    groups: dict[Hashable, dict[tuple[str, str], Hashable]] = defaultdict(dict)
    for report in ctx.hosts:
        for entry in report.roce_ports:
            value = value_of(entry)
            if value is not None:
                groups[group_of(entry) if group_of else ""][(report.host, entry.name)] = value
    for group, values in groups.items():
        top, odd = vote(values)
        counts = counts_of(values.values())
        per_host: dict[str, list[tuple[str, Hashable]]] = defaultdict(list)
        for (host, port), value in odd.items():
            per_host[host].append((port, value))
        for host, ports in sorted(per_host.items()):
            listed = ", ".join(f"{p} {v}" for p, v in sorted(ports, key=lambda x: str(x[0])))
            among = f" among {group} ports" if group else ""
            base = f"{top} on {counts[str(top)]} of {len(values)} ports{among}" if top is not None else \
                "no value held by more ports than another"
            yield host_finding(rule, host, f"{what}: {listed}; the fleet has {base}",
                               fix.format(want=top if top is not None else "one value", ports=", ".join(
                                   p for p, _ in ports)),
                               detail=ports[0][0] if len(ports) == 1 else f"{len(ports)} ports",
                               evidence={"ports": {p: v for p, v in ports}, "majority": top, "counts": counts,
                                         **({"group": group} if group else {})})


def _netdev_vote(ctx: FleetContext, rule: str, what: str, attr: str, fix: str) -> Iterator[Finding]:
    values: dict[tuple[str, str], Hashable] = {}
    for report in ctx.hosts:
        for net in report.data_netdevs:
            value = getattr(net, attr)
            if value is not None:
                values[(report.host, net.name)] = value
    top, odd = vote(values)
    counts = counts_of(values.values())
    per_host: dict[str, list[tuple[str, Hashable]]] = defaultdict(list)
    for (host, netdev), value in odd.items():
        per_host[host].append((netdev, value))
    for host, nets in sorted(per_host.items()):
        listed = ", ".join(f"{n} {v}" for n, v in nets)
        base = f"{top} on {counts[str(top)]} of {len(values)} data interfaces" if top is not None else \
            "no value held by more interfaces than another"
        yield host_finding(rule, host, f"{what}: {listed}; the fleet has {base}",
                           fix.format(want=top if top is not None else "the fleet's value",
                                      netdev=nets[0][0]),
                           detail=nets[0][0] if len(nets) == 1 else f"{len(nets)} interfaces",
                           evidence={"interfaces": {n: v for n, v in nets}, "majority": top, "counts": counts})


@register("fleet.mtu", "mtu")
def mtu(ctx: FleetContext) -> Iterable[Finding]:
    """The MTU of every data interface (RoCE netdevs, else the socket interface) matches the fleet's."""
    return _netdev_vote(ctx, "fleet.mtu", "MTU", "mtu",
                        "ip link set dev {netdev} mtu {want} (and in the host's network configuration, so it "
                        "survives a reboot); RoCE's active MTU follows the netdev's (4096 needs at least 4200)")


def _port_speed(port: PortFacts) -> int | None:
    if port.speed_mbps:
        return port.speed_mbps
    match = _SPEED.match(port.rate)
    return int(float(match.group(1)) * 1000) if match else None


@register("fleet.link-speed", "speed")
def link_speed(ctx: FleetContext) -> Iterable[Finding]:
    """Every RoCE port runs at the speed the fleet's ports of the same NIC model run at."""
    fix = ("check what {ports} negotiated (`ethtool IFACE`: Speed), the cable or transceiver, and the switch "
           "port's configured speed; the fleet's ports of this model run at {want} Mb/s")
    if any(h.roce_ports for h in ctx.hosts):
        yield from _port_vote(ctx, "fleet.link-speed", "port speed (Mb/s)", _port_speed, fix,
                              group_of=lambda p: p.hca_type or "")
        return
    yield from _netdev_vote(ctx, "fleet.link-speed", "interface speed (Mb/s)", "speed_mbps",
                            "check what {netdev} negotiated (`ethtool {netdev}`: Speed) against the fleet's {want} "
                            "Mb/s: cable, transceiver, switch port")


@register("fleet.gid-index", "gid")
def gid_index(ctx: FleetContext) -> Iterable[Finding]:
    """NCCL_IB_GID_INDEX / UCX_IB_GID_INDEX agree, and every port's RoCE v2 IPv4 GID sits at the fleet's index."""
    yield from _env_vote(ctx, "fleet.gid-index", GID_VARS,
                         "set {key} the same on every host ({want}), or unset it everywhere so NCCL 2.21+ picks "
                         "each host's RoCE v2 GID itself")
    yield from _port_vote(ctx, "fleet.gid-index", "RoCE v2 IPv4 GID index", lambda p: p.gid_index,
                          "a pinned NCCL_IB_GID_INDEX={want} picks another GID on {ports}: unset it (NCCL 2.21+ "
                          "selects per host) or give the port's netdev its address the way the other hosts do")


@register("fleet.traffic-class", "tc")
def traffic_class(ctx: FleetContext) -> Iterable[Finding]:
    """NCCL_IB_TC, NCCL_IB_FIFO_TC, UCX_IB_TRAFFIC_CLASS and the NIC's traffic_class override agree."""
    yield from _env_vote(ctx, "fleet.traffic-class", TC_VARS,
                         "set {key}={want} on every host (106 for DSCP 26, as tensorfabric env derives), so every host "
                         "sends on the lossless class")
    # An override on one host and none on the others is a difference: "unset" votes too.
    yield from _port_vote(ctx, "fleet.traffic-class", "traffic_class override",
                          lambda p: UNSET if p.traffic_class is None else p.traffic_class,
                          "echo {want} > /sys/class/infiniband/DEV/tc/PORT/traffic_class on {ports}, as on the "
                          "other hosts (or clear it everywhere)")


@register("fleet.nccl-env", "env")
def nccl_env(ctx: FleetContext) -> Iterable[Finding]:
    """NCCL/UCX settings every rank of a job must share have one value on every host."""
    return _env_vote(ctx, "fleet.nccl-env", MUST_AGREE,
                     "set {key} the same on every host ({want}): ranks that disagree choose different paths and "
                     "fail to connect or hang")


def parse_ib_hca(value: str) -> tuple[bool, bool, list[tuple[str, int | None]]]:
    """``NCCL_IB_HCA`` as NCCL reads it: (exclude ``^``, exact ``=``, [(device, port or None)])."""
    text = value.strip()
    exclude = text.startswith("^")
    text = text.removeprefix("^")
    exact = text.startswith("=")
    text = text.removeprefix("=")
    items = []
    for item in text.split(","):
        name, _, port = item.strip().partition(":")
        if name:
            items.append((name, int(port) if port.isdecimal() else None))
    return exclude, exact, items


@functools.lru_cache(maxsize=256)
def _hca_missing(value: str, ports: tuple[str, ...]) -> tuple[str, ...]:
    """What ``NCCL_IB_HCA=value`` names that ``ports`` (``dev:port`` names) do not have; cached: a fleet sets one
    value on hosts of one shape."""
    exclude, exact, items = parse_ib_hca(value)
    if exclude:
        return ()
    present = {tuple(p.split(":", 1)) for p in ports if ":" in p}
    devices = {d for d, _ in present}
    missing = []
    for name, port in items:
        matches = [d for d in devices if d == name or (not exact and d.startswith(name))]
        if not matches or (port is not None and not any((d, str(port)) in present for d in matches)):
            missing.append(f"{name}:{port}" if port is not None else name)
    return tuple(missing)


@register("fleet.ib-hca", "hca")
def ib_hca(ctx: FleetContext) -> Iterable[Finding]:
    """Every device NCCL_IB_HCA names exists on the host that sets it."""
    for host in ctx.hosts:
        value = host.environment.get("NCCL_IB_HCA", "")
        if not value.strip() or not host.ports:
            continue
        missing = _hca_missing(value, tuple(p.name for p in host.ports))
        if missing:
            devices = sorted({p.device for p in host.ports})
            yield host_finding("fleet.ib-hca", host.host,
                               f"NCCL_IB_HCA={value} names {', '.join(missing)}, which this host does not have "
                               f"(it has {', '.join(devices)})",
                               "set NCCL_IB_HCA per host from the devices it has (`ls /sys/class/infiniband`), or "
                               "rename the devices consistently (udev rules)", detail="env NCCL_IB_HCA",
                               evidence={"NCCL_IB_HCA": value, "missing": list(missing), "devices": devices})


@register("fleet.rdma-ports", "ports")
def rdma_ports(ctx: FleetContext) -> Iterable[Finding]:
    """Every host has as many active RoCE ports as the fleet's hosts have."""
    if not any(h.ports for h in ctx.hosts):
        return
    values = {h.host: sum(1 for p in h.roce_ports if p.active) for h in ctx.hosts}
    top, odd = vote(values)
    counts = counts_of(values.values())
    for host, n in sorted(odd.items()):
        report = next(h for h in ctx.hosts if h.host == host)
        down = [p.name for p in report.roce_ports if not p.active]
        yield host_finding("fleet.rdma-ports", host,
                           f"{n} active RoCE port{'s' if n != 1 else ''} here"
                           + (f" ({', '.join(down)} not active)" if down else "")
                           + (f"; {top} on {counts[str(top)]} of {len(values)} hosts" if top is not None else ""),
                           "bring the missing ports up (`ip link`, `ibv_devinfo`: state PORT_ACTIVE) or check that "
                           "the RDMA devices are visible to this host or container (/dev/infiniband)",
                           evidence={"active": n, "majority": top, "counts": counts, "not_active": down})


@register("fleet.versions", "versions")
def versions(ctx: FleetContext) -> Iterable[Finding]:
    """NCCL, UCX, NIXL, torch and tensorfabric versions agree across hosts."""
    hosts = ctx.current
    for key in _VERSION_KEYS:
        reporting = [h for h in hosts if key in h.software]
        if len(reporting) * 2 <= len(hosts):
            continue  # most hosts do not say: the doctor ran without it, nothing to compare
        values = {h.host: h.software.get(key, "absent") for h in hosts}
        top, odd = vote(values)
        counts = counts_of(values.values())
        for host, value in sorted(odd.items()):
            yield host_finding("fleet.versions", host,
                               f"{key} {value} here; " + (f"{top} on {counts[str(top)]} of {len(values)} hosts"
                                                          if top is not None else "no version held by most hosts"),
                               f"install the fleet's {key} ({top or 'one version everywhere'}) on this host: ranks "
                               "of mixed versions can fail at init or hang (NVIDIA/nccl#1267)",
                               detail=key, evidence={"software": key, "value": value, "majority": top,
                                                     "counts": counts})


@register("fleet.driver-firmware", "fw")
def driver_firmware(ctx: FleetContext) -> Iterable[Finding]:
    """NIC firmware (per NIC model), RDMA driver versions and the kernel agree across hosts."""
    yield from _port_vote(ctx, "fleet.driver-firmware", "firmware", lambda p: p.fw_ver or None,
                          "update the firmware of {ports} to the fleet's {want} (`mlxfwmanager` / `flint`), then "
                          "reset the NIC", group_of=lambda p: p.hca_type or "")
    hosts = ctx.current
    keys = sorted({k for h in hosts for k in h.software if k == "kernel" or k.startswith("driver:")})
    for key in keys:
        reporting = [h for h in hosts if key in h.software]
        if len(reporting) * 2 <= len(hosts):
            continue
        values = {h.host: h.software.get(key, "absent") for h in hosts}
        top, odd = vote(values)
        counts = counts_of(values.values())
        label = key.removeprefix("driver:") + (" driver" if key.startswith("driver:") else "")
        for host, value in sorted(odd.items()):
            yield host_finding("fleet.driver-firmware", host,
                               f"{label} {value} here; " + (f"{top} on {counts[str(top)]} of {len(values)} hosts"
                                                            if top is not None else "no version held by most"),
                               f"install the fleet's {label} ({top or 'one version everywhere'}) on this host",
                               severity="warning", detail=label, evidence={"software": key, "value": value,
                                                                           "majority": top, "counts": counts})


def _is_loopback(address: str) -> bool:
    return address.startswith("127.") or address == "::1"


@register("fleet.hostname", "name")
def hostname(ctx: FleetContext) -> Iterable[Finding]:
    """No host's name resolves to loopback while the others' resolve to a routable address, and no two hosts'
    names resolve to one address."""
    known = {h.host: h for h in ctx.hosts if h.hostname and h.addresses}
    values = {name: any(map(_is_loopback, h.addresses)) for name, h in known.items()}
    top, odd = vote(values)
    for host, loop in sorted(odd.items()):
        if not loop or top is None:
            continue
        report = known[host]
        yield host_finding("fleet.hostname", host,
                           f"{report.hostname} resolves to {', '.join(report.addresses)}: Gloo and NCCL would "
                           "advertise loopback to the other hosts, which resolve their names to routable addresses",
                           f"map {report.hostname} to its data-network address in /etc/hosts (or DNS), not 127.x",
                           evidence={"hostname": report.hostname, "addresses": list(report.addresses)})
    owners: dict[str, dict[str, str]] = defaultdict(dict)  # address -> {host name it resolves from: host}
    for name, h in known.items():
        for address in h.addresses:
            if not _is_loopback(address):
                owners[address].setdefault(h.hostname or name, name)
    for address, names in owners.items():
        if len(names) < 2:
            continue
        for resolved, host in sorted(names.items()):
            others = sorted(set(names) - {resolved})
            yield host_finding("fleet.hostname", host,
                               f"{resolved} resolves to {address}, as {len(others)} other host name(s) do "
                               f"({', '.join(others)})", "give every host its own address in /etc/hosts or DNS",
                               detail=address, evidence={"address": address, "hostnames": sorted(names)})


@register("fleet.doctor", "doctor")
def doctor(ctx: FleetContext) -> Iterable[Finding]:
    """A doctor finding that only a minority of hosts have (what every host has is the recipe's, not the fleet's)."""
    fired: dict[str, dict[str, Finding]] = defaultdict(dict)
    for host in ctx.hosts:
        for finding in host.findings:
            if finding.severity != "info":
                fired[finding.rule].setdefault(host.host, finding)
    for _rule, where in sorted(fired.items()):
        if len(where) * 2 >= len(ctx.hosts):
            continue
        for name, finding in sorted(where.items()):
            yield host_finding("fleet.doctor", name,
                               f"{finding.rule} on this host only ({len(where)} of {len(ctx.hosts)} hosts): "
                               f"{finding.message}", finding.fix, severity=finding.severity,
                               detail=finding.subject, evidence={"doctor_rule": finding.rule,
                                                                 "doctor_evidence": dict(finding.evidence)})


def shared_doctor_rules(hosts: Iterable[HostReport]) -> Mapping[str, int]:
    """Doctor rules (error/warning) that fire on at least half the hosts, with their host count."""
    hosts = list(hosts)
    counts: dict[str, set[str]] = defaultdict(set)
    for host in hosts:
        for finding in host.findings:
            if finding.severity != "info":
                counts[finding.rule].add(host.host)
    return {rule: len(h) for rule, h in sorted(counts.items()) if len(h) * 2 >= len(hosts)}


@register("fleet.clock", "clock")
def clock(ctx: FleetContext) -> Iterable[Finding]:
    """Every host's clock is within a second of rank 0's (online runs measure it)."""
    for host in ctx.hosts:
        if host.clock_offset_s is not None and abs(host.clock_offset_s) > 1.0:
            yield host_finding("fleet.clock", host.host,
                               f"clock {host.clock_offset_s:+.3f} s from rank 0's: logs of one event disagree "
                               "across hosts and time-based timeouts drift", "sync the clock (chrony/ntpd/PTP)",
                               severity="warning", evidence={"offset_s": host.clock_offset_s})
