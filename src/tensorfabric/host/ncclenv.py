"""Derive the NCCL (and Gloo) environment: from a plan alone (``nccl_env_for_nics``) or from a discovered host
(``derive_env``), each variable with the reason it has its value.

Rules (NVIDIA/nccl env.rst and troubleshooting guide, see docs/host.md):

* ``NCCL_IB_HCA`` always in the exact-match form ``=dev:port,...``: without ``=`` each token is a prefix and
  ``mlx5_1`` also selects ``mlx5_10`` .. ``mlx5_19``.
* NCCL >= 2.21 picks the GID itself; we only pin its choice (``NCCL_IB_ROCE_VERSION_NUM``,
  ``NCCL_IB_ADDR_FAMILY``) and write ``NCCL_IB_GID_INDEX`` only for older NCCL, where nothing else works.
* ``NCCL_IB_TC = DSCP << 2 | ECT(0)``: mlx5 programs DSCP = traffic_class >> 2, so DSCP 26 -> 106
  (``roce.TRAFFIC_CLASS`` says why 106 and not 104).
* ``NCCL_NET_GDR_LEVEL`` is a maximum distance; we stop at PHB because GPUDirect across the inter-socket
  link is usually slower than staging through host memory.

User-set variables are never overridden: they are reported as kept, and a differing value becomes a finding.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tensorfabric import roce
from tensorfabric.errors import InputError
from tensorfabric.findings import Finding
from tensorfabric.host.discovery import affinity
from tensorfabric.host.gids import AddrFamily, preferred_gid, select_gid
from tensorfabric.host.nccl_judge import judge_ib_tc
from tensorfabric.host.pci import DISTANCES, Distance, worst
from tensorfabric.host.records import HostInventory, RdmaPort, RouteChoice
from tensorfabric.topology import Nic

__all__ = ["GDR_CAP", "EnvPlan", "EnvVar", "derive_env", "gid_choice", "nccl_env_for_nics", "parse_nccl_version",
           "tcp_interface"]

GID_AUTOSELECT = (2, 21)
GDR_CAP: Distance = "PHB"
_SKIP_IF = ("lo", "docker", "veth", "virbr", "br-", "cni", "flannel", "ifb")


@dataclass(frozen=True, slots=True)
class EnvVar:
    name: str
    value: str
    reason: str


@dataclass(frozen=True, slots=True)
class EnvPlan:
    """Derived variables, the user's own values that were kept, and conflicts as findings."""

    variables: tuple[EnvVar, ...]
    kept: Mapping[str, str] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    gid_choice: Mapping[str, int | None] = field(default_factory=dict)
    """Per RoCE port (``dev:port``): the RoCE v2 IPv4 GID index, ``None`` where the port has none."""

    def as_dict(self) -> dict[str, str]:
        """What to export: derived values for every variable the user did not set."""
        return {v.name: v.value for v in self.variables if v.name not in self.kept}

    def to_dict(self) -> dict[str, Any]:
        return {"env": self.as_dict(), "explain": {v.name: v.reason for v in self.variables},
                "kept": dict(self.kept), "findings": [f.to_dict() for f in self.findings],
                "gid_choice": dict(self.gid_choice)}


def parse_nccl_version(text: str | None) -> tuple[int, int] | None:
    """``"2.21.5"`` or ``"2.18"`` -> (major, minor); ``None`` passes through (assume a current NCCL)."""
    if text is None:
        return None
    parts = text.strip().split("+")[0].split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise InputError(f"NCCL version {text!r} must look like '2.21' or '2.18.3'") from None
    return major, minor


def _ports_var(ports: Sequence[tuple[str, int]]) -> EnvVar:
    value = "=" + ",".join(f"{dev}:{port}" for dev, port in ports)
    return EnvVar("NCCL_IB_HCA", value, "exact-match list ('=') of the RDMA ports to use; without '=' every name "
                  "is a prefix, so mlx5_1 would also select mlx5_10..mlx5_19")


def _socket_vars(netdevs: Sequence[str], why: str) -> list[EnvVar]:
    if not netdevs:
        return []
    return [EnvVar("NCCL_SOCKET_IFNAME", "=" + ",".join(netdevs), f"bootstrap over {why}, exact names; "
                   "auto-selection can pick docker/veth interfaces and hang init"),
            EnvVar("GLOO_SOCKET_IFNAME", netdevs[0], f"Gloo (torch.distributed CPU group) binds one interface by "
                   f"exact name: {netdevs[0]}")]


def _same(name: str, user: str, derived: str) -> bool:
    """Whether the user's value means what the derived one does: a traffic class with the same DSCP is the same
    lossless class (104 and 106 differ only in the ECN bits), whatever spelling NCCL reads (``0x6a``)."""
    if user == derived:
        return True
    if name != "NCCL_IB_TC":
        return False
    tc = judge_ib_tc(user, ())
    return tc.value is not None and tc.dscp == roce.dscp_of_traffic_class(int(derived))


def _tc_var(roce_dscp: int, ib_tc: int | None) -> EnvVar:
    if not 0 <= roce_dscp <= 63:
        raise InputError(f"RoCE DSCP {roce_dscp!r} must be an integer 0..63, e.g. 26")
    plain = roce.traffic_class(roce_dscp)
    if ib_tc is None:
        return EnvVar("NCCL_IB_TC", str(plain), f"DSCP {roce_dscp} << 2 | ECT(0) = {plain}: mlx5 programs "
                      "DSCP = traffic_class >> 2, so RoCE data lands in the lossless class (default 0 is lossy), "
                      "ECN-capable as sent")
    if not 0 <= ib_tc <= 255 or roce.dscp_of_traffic_class(ib_tc) != roce_dscp:
        raise InputError(f"NCCL traffic class {ib_tc!r} must be 0..255 and carry the RoCE DSCP {roce_dscp} in its "
                         f"upper six bits, e.g. {plain}")
    return EnvVar("NCCL_IB_TC", str(ib_tc), f"the plan's traffic class {ib_tc} = DSCP {roce_dscp} << 2 | ECN bits "
                  f"{ib_tc & 3}: RoCE data lands in the lossless class (default 0 is lossy)")


def _roce_vars(roce_dscp: int, version: tuple[int, int] | None, family: AddrFamily,
               ib_tc: int | None = None) -> list[EnvVar]:
    out = [_tc_var(roce_dscp, ib_tc)]
    if version is None or version >= GID_AUTOSELECT:
        assumed = "" if version is not None else " (assuming NCCL >= 2.21; pass --nccl-version for older)"
        out.append(EnvVar("NCCL_IB_ROCE_VERSION_NUM", "2", "auto-select a RoCE v2 GID: v1 has no IP header, so no "
                          "DSCP marking and no routing" + assumed))
        kind = "IPv4-mapped" if family == "AF_INET" else "IPv6"
        out.append(EnvVar("NCCL_IB_ADDR_FAMILY", family, f"auto-select an {kind} GID; NCCL_IB_GID_INDEX stays "
                          "unset so the choice survives GID-table changes"))
    return out


def nccl_env_for_nics(nics: Sequence[Nic], *, roce_dscp: int = roce.ROCE_DSCP, rail_optimized: bool = False,
                      ports: Mapping[str, int] | None = None, nccl_version: str | None = None,
                      addr_family: AddrFamily = "AF_INET", require_rdma: bool = False,
                      ib_tc: int | None = None) -> dict[str, str]:
    """The NCCL environment derivable from a plan alone (no sysfs): NICs with an RDMA device become
    ``NCCL_IB_HCA`` entries (port 1 unless ``ports`` says otherwise), their netdevs the socket interfaces.

    ``ib_tc`` pins NCCL_IB_TC (e.g. 106 = DSCP 26 with ECT(0)); by default it is ``roce_dscp << 2``.
    """
    return {v.name: v.value for v in _plan_vars(nics, roce_dscp=roce_dscp, rail_optimized=rail_optimized,
                                                ports=ports or {}, version=parse_nccl_version(nccl_version),
                                                family=addr_family, require_rdma=require_rdma, ib_tc=ib_tc)}


def _plan_vars(nics: Sequence[Nic], *, roce_dscp: int, rail_optimized: bool, ports: Mapping[str, int],
               version: tuple[int, int] | None, family: AddrFamily, require_rdma: bool,
               ib_tc: int | None) -> list[EnvVar]:
    rdma = [n for n in nics if n.rdma_device]
    out: list[EnvVar] = []
    if rdma:
        out.append(_ports_var([(n.rdma_device, ports.get(n.rdma_device, 1)) for n in rdma]))
        out += _roce_vars(roce_dscp, version, family, ib_tc)
    out += _socket_vars([n.netdev for n in (rdma or nics) if n.netdev], "the RoCE netdevs" if rdma else
                        "the planned interfaces")
    if rail_optimized and len(rdma) > 1:
        out.append(EnvVar("NCCL_CROSS_NIC", "0", "rail-optimized fabric: a ring must use the same NIC rail on "
                          "every node, since rails only meet at the spine"))
    if require_rdma and rdma:
        out.append(EnvVar("NCCL_NET", "IB", "never run on sockets: a missing RDMA device fails init instead of "
                          "falling back to TCP silently"))
    return out


def tcp_interface(inv: HostInventory) -> RouteChoice:
    """The interface TCP traffic would use without RDMA, and why (default route, else first usable one)."""
    if inv.default_route and inv.default_route in inv.netdevs:
        return RouteChoice(inv.default_route, f"{inv.default_route}, the default-route interface (proc/net/route)")
    usable = [n for n in sorted(inv.netdevs) if not n.startswith(_SKIP_IF)]
    up = [n for n in usable if inv.netdevs[n].operstate in ("up", "unknown")]
    if up:
        return RouteChoice(up[0], f"{up[0]}, the first interface that is up (no default route found)")
    return RouteChoice(None, "no usable interface: only loopback or virtual ones")


def _gid_family(ports: Sequence[RdmaPort]) -> tuple[AddrFamily, str]:
    if all(select_gid(p.gids, family="AF_INET") for p in ports):
        return "AF_INET", ""
    if all(select_gid(p.gids, family="AF_INET6") for p in ports):
        return "AF_INET6", "no IPv4 RoCE v2 GID on every port; using the global IPv6 ones"
    return "AF_INET", "some port has no routable RoCE v2 GID (see doctor)"


def derive_env(inv: HostInventory, *, environ: Mapping[str, str], roce_dscp: int = roce.ROCE_DSCP,
               rail_optimized: bool = False, nccl_version: str | None = None, require_rdma: bool = False,
               ib_tc: int | None = None, gid_ports: Sequence[RdmaPort] | None = None) -> EnvPlan:
    """The NCCL environment for this host: the plan-level variables plus GID and GPUDirect facts from sysfs.

    ``gid_ports`` (captured GID tables) replace the sysfs ports for every GID decision when given."""
    version = parse_nccl_version(nccl_version)
    active = [p for p in inv.ports if p.active]
    roce = [p for p in active if p.is_roce]
    findings: list[Finding] = []
    out: list[EnvVar] = []
    if active:
        out.append(_ports_var([(p.device, p.port) for p in active]))
    gid_src = list(gid_ports) if gid_ports is not None else roce
    choice, gid_findings = gid_choice(gid_src, version) if gid_src else ({}, [])
    findings += gid_findings
    if roce or gid_ports:
        family, note = _gid_family(gid_src)
        out += _roce_vars(roce_dscp, version, family, ib_tc)
        if note:
            out = [EnvVar(v.name, v.value, f"{v.reason}; {note}") if v.name == "NCCL_IB_ADDR_FAMILY" else v
                   for v in out]
        if version is not None and version < GID_AUTOSELECT:
            out += _gid_index_var(choice, version)
    netdevs = [p.netdev for p in roce if p.netdev and select_gid(p.gids, family="AF_INET")]
    if netdevs:
        out += _socket_vars(list(dict.fromkeys(netdevs)), "the RoCE netdevs (they carry the RoCE v2 IPv4 GIDs)")
    else:
        route = tcp_interface(inv)
        out += _socket_vars([route.interface] if route.interface else [], route.reason)
    out += _gdr_var(inv) if active else []
    if rail_optimized and len(active) > 1:
        out.append(EnvVar("NCCL_CROSS_NIC", "0", "rail-optimized fabric: a ring must use the same NIC rail on "
                          "every node, since rails only meet at the spine"))
    if require_rdma and active:
        out.append(EnvVar("NCCL_NET", "IB", "never run on sockets: a missing RDMA device fails init instead of "
                          "falling back to TCP silently"))
    kept = {v.name: environ[v.name] for v in out if v.name in environ}
    for var in out:
        user = kept.get(var.name)
        if user is not None and not _same(var.name, user, var.value):
            findings.append(Finding(
                "env.user-value-kept", "warning", var.name,
                f"{var.name}={user!r} is set in the environment; the derived {var.value!r} was not applied",
                {"set": user, "derived": var.value, "reason": var.reason},
                f"unset {var.name} to use the derived value, or confirm {user!r} is intended"))
    return EnvPlan(tuple(out), kept, tuple(findings), choice)


def gid_choice(ports: Sequence[RdmaPort], version: tuple[int, int] | None) -> tuple[
        dict[str, int | None], list[Finding]]:
    """Per port, the RoCE v2 IPv4 GID index NCCL >= 2.21 would pick, or the RoCE netdev's where that pick sits on an
    overlay (``None`` where there is none), with a warning for ports without one and for ports that disagree (which
    only a pinned NCCL_IB_GID_INDEX cannot live with)."""
    chosen = {p.name: preferred_gid(p.gids, family="AF_INET") for p in ports}
    choice = {name: g.index if g is not None else None for name, g in chosen.items()}
    findings: list[Finding] = []
    missing = [name for name, index in choice.items() if index is None]
    if missing:
        findings.append(Finding(
            "gid.no-rocev2-ipv4", "warning", ", ".join(missing),
            f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} no RoCE v2 IPv4 GID: NCCL's default "
            "auto-selection (and any one NCCL_IB_GID_INDEX) finds nothing usable there", {"choice": choice},
            "assign an IPv4 address to the port's netdev, or leave the port out of NCCL_IB_HCA"))
    if len({i for i in choice.values() if i is not None}) > 1:
        pinned = version is not None and version < GID_AUTOSELECT
        findings.append(Finding(
            "gid.index-differs", "warning" if pinned else "info", ", ".join(choice),
            "the RoCE v2 IPv4 GID sits at different indices on different ports; one NCCL_IB_GID_INDEX cannot "
            "fit all" + ("" if pinned else " (NCCL >= 2.21 selects per port, so only a pinned index breaks)"),
            dict(choice), "upgrade to NCCL >= 2.21 (auto-selection) and leave NCCL_IB_GID_INDEX unset"))
    return choice, findings


def _gid_index_var(choice: Mapping[str, int | None], version: tuple[int, int]) -> list[EnvVar]:
    indices = Counter(i for i in choice.values() if i is not None)
    if not indices:
        return []
    index, _ = indices.most_common(1)[0]
    return [EnvVar("NCCL_IB_GID_INDEX", str(index), f"NCCL {version[0]}.{version[1]} < 2.21 does not auto-select; "
                   f"index {index} is the RoCE v2 IPv4-mapped GID")]


def _gdr_var(inv: HostInventory) -> list[EnvVar]:
    pairs = affinity(inv)
    if not pairs:
        return []
    counts = Counter(a.distance for a in pairs)
    summary = ", ".join(f"{counts[d]} GPU(s) {d}" for d in DISTANCES if counts[d])
    level = worst([a.distance for a in pairs])
    capped = min(level, GDR_CAP, key=DISTANCES.index)
    why = f"nearest-NIC distance per GPU: {summary}"
    if capped != level:
        why += f"; capped at {GDR_CAP}: GPUDirect across sockets is usually slower than staging in host memory"
    if not inv.gdr_support:
        why += "; no peer-memory module found, so NCCL will not use GPUDirect until nvidia_peermem is loaded"
    return [EnvVar("NCCL_NET_GDR_LEVEL", capped, why)]
