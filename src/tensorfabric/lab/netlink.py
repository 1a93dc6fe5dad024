"""The lab's only contact with the kernel: namespaces, veth pairs, bridges, addresses, routes and tbf, over netlink.

pyroute2 does all of it except two things it has no API for, where we run the standard tool in the
namespace (``ip netns exec``): sysctls (IPv4 forwarding on switches, IPv6 off so router solicitations and
MLD reports do not pollute the link counters) and running arbitrary programs inside a host.

Links are created *inside* their namespaces (the veth's first end in ``ns_a``, its peer placed directly in
``ns_b``), so nothing of the lab ever exists in the root namespace, even for a moment; deleting a namespace
deletes its veth ends, their peers and their qdiscs with them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tensorfabric.errors import LabError

__all__ = ["NETNS_DIR", "Netlink", "check_privileges", "ip_command", "privileges_missing"]

NETNS_DIR = "/var/run/netns"
# tbf bucket: 64 KiB + one jumbo frame holds a whole GSO/TSO super-packet (64 KiB), so tbf never has to
# split one; queue: 25 ms of line rate absorbs a TCP window's burst at these rates without drops.
_BURST_BYTES = 65536 + 9000
_LATENCY = "25ms"
_CAP_NET_ADMIN = 12
_CAP_SYS_ADMIN = 21


def check_privileges(status_path: str = "/proc/self/status") -> None:
    """Raise LabError unless this process may build labs: root, or CAP_NET_ADMIN (links, qdiscs) together
    with CAP_SYS_ADMIN (a named namespace is a bind mount under /var/run/netns)."""
    try:
        with open(status_path, encoding="ascii") as handle:
            caps = next((int(line.split()[1], 16) for line in handle if line.startswith("CapEff:")), 0)
    except OSError as exc:
        raise LabError(f"cannot read capabilities from {status_path}: {exc}") from exc
    missing = [name for bit, name in ((_CAP_NET_ADMIN, "CAP_NET_ADMIN"), (_CAP_SYS_ADMIN, "CAP_SYS_ADMIN"))
               if not caps >> bit & 1]
    if missing:
        raise LabError(f"the lab needs root or CAP_NET_ADMIN to create network namespaces (missing: "
                       f"{', '.join(missing)}); run as root (e.g. sudo) or in a container with NET_ADMIN and "
                       f"SYS_ADMIN")


def privileges_missing(status_path: str = "/proc/self/status") -> str | None:
    """Why this process cannot build labs (:func:`check_privileges`' message), or None when it can."""
    try:
        check_privileges(status_path)
    except LabError as exc:
        return str(exc)
    return None


def ip_command() -> str:
    path = shutil.which("ip") or shutil.which("ip", path="/usr/sbin:/sbin")
    if path is None:
        raise LabError("the 'ip' program (iproute2) is not installed; the lab needs it to run commands in hosts")
    return path


class Netlink:
    """Netlink operations on named namespaces.

    A socket into a namespace costs pyroute2 a helper process (~40 ms), so inside :meth:`session` one socket
    per namespace is kept and reused; outside it every call group opens and closes its own. Sockets never
    outlive the session: an open socket would keep a removed namespace (and its veths) alive.
    """

    def __init__(self, netns_dir: str = NETNS_DIR) -> None:
        self.netns_dir = netns_dir
        self._sockets: dict[str, Any] | None = None

    @contextmanager
    def session(self) -> Iterator[None]:
        """Reuse one socket per namespace until the block ends (nested sessions share the outer one)."""
        if self._sockets is not None:
            yield
            return
        self._sockets = {}
        try:
            yield
        finally:
            sockets, self._sockets = self._sockets, None
            for ipr in sockets.values():
                ipr.close()

    def _drop_socket(self, name: str) -> None:
        if self._sockets is not None and name in self._sockets:
            self._sockets.pop(name).close()

    # namespaces -------------------------------------------------------------------------------------
    def list_netns(self) -> list[str]:
        from pyroute2 import netns

        return sorted(netns.listnetns())

    def netns_exists(self, name: str) -> bool:
        return os.path.exists(os.path.join(self.netns_dir, name))

    def create_netns(self, name: str) -> None:
        from pyroute2 import netns

        try:
            netns.create(name)
        except OSError as exc:
            raise LabError(f"cannot create network namespace {name!r}: {exc}") from exc

    def remove_netns(self, name: str) -> None:
        from pyroute2 import netns

        self._drop_socket(name)
        try:
            netns.remove(name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise LabError(f"cannot remove network namespace {name!r}: {exc}") from exc

    def netns_created(self, name: str) -> float:
        """When namespace ``name`` was created (the mtime of its bind-mount file), epoch seconds."""
        try:
            return os.stat(os.path.join(self.netns_dir, name)).st_mtime
        except OSError:
            return 0.0

    def netns_pids(self, names: Sequence[str], proc: str = "/proc") -> dict[str, list[int]]:
        """Processes inside each of the namespaces ``names`` (pyroute2 has no call for this): one scan of
        ``/proc/<pid>/ns/net``, matched to each namespace's nsfs inode as ``ip netns pids`` does."""
        wanted: dict[tuple[int, int], str] = {}
        for name in names:
            try:
                st = os.stat(os.path.join(self.netns_dir, name))
            except OSError:
                continue
            wanted[(st.st_dev, st.st_ino)] = name
        found: dict[str, list[int]] = {name: [] for name in wanted.values()}
        if not wanted:
            return found
        for entry in os.listdir(proc):
            if not entry.isdigit():
                continue
            try:
                st = os.stat(os.path.join(proc, entry, "ns", "net"))
            except OSError:
                continue  # exited meanwhile, or not ours to inspect
            match = wanted.get((st.st_dev, st.st_ino))
            if match is not None:
                found[match].append(int(entry))
        return found

    @contextmanager
    def ns(self, name: str) -> Iterator[Any]:
        """An IPRoute socket bound to namespace ``name``; netlink errors become LabError."""
        from pyroute2 import IPRoute
        from pyroute2.netlink.exceptions import NetlinkError

        ipr = self._sockets.get(name) if self._sockets is not None else None
        if ipr is None:
            try:
                # flags=0: pyroute2's default (O_CREAT) would silently create a missing namespace -- a status
                # query on a half-removed lab must not resurrect it.
                ipr = IPRoute(netns=name, flags=0)
            except FileNotFoundError as exc:
                raise LabError(f"network namespace {name!r} does not exist (was the lab taken down?)") from exc
            if self._sockets is not None:
                self._sockets[name] = ipr
        try:
            yield ipr
        except NetlinkError as exc:
            raise LabError(f"netlink error in namespace {name!r}: {exc}") from exc
        finally:
            if self._sockets is None:
                ipr.close()

    # building blocks ---------------------------------------------------------------------------------
    def sysctl(self, ns: str, settings: Sequence[str]) -> None:
        argv = [ip_command(), "netns", "exec", ns, "sysctl", "-q", "-w", *settings]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0:
            raise LabError(f"sysctl in {ns!r} failed ({' '.join(settings)}): {done.stderr.strip()}")

    def add_veth(self, ns_a: str, if_a: str, ns_b: str, if_b: str, mtu: int) -> None:
        peer_fd = os.path.join(self.netns_dir, ns_b)
        with self.ns(ns_a) as ipr:
            ipr.link("add", ifname=if_a, kind="veth", mtu=mtu,
                     peer={"ifname": if_b, "net_ns_fd": peer_fd, "mtu": mtu})

    def add_bridge(self, ns: str, name: str, ports: Sequence[str], mtu: int) -> None:
        with self.ns(ns) as ipr:
            # STP off: a star and a routed leaf--spine have no bridge loops, and STP would hold every
            # port in "listening" for two forward delays before passing traffic. Multicast snooping off:
            # otherwise the bridge sends periodic IGMP reports (224.0.0.106) that show up in link counters.
            ipr.link("add", ifname=name, kind="bridge", br_stp_state=0, br_mcast_snooping=0, mtu=mtu)
            bridge = ipr.link_lookup(ifname=name)[0]
            for port in ports:
                ipr.link("set", index=ipr.link_lookup(ifname=port)[0], master=bridge)

    def set_up(self, ns: str, ifnames: Sequence[str]) -> None:
        with self.ns(ns) as ipr:
            for ifname in ifnames:
                ipr.link("set", index=ipr.link_lookup(ifname=ifname)[0], state="up")

    def add_address(self, ns: str, ifname: str, cidr: str) -> None:
        address, _, prefix = cidr.partition("/")
        with self.ns(ns) as ipr:
            ipr.addr("add", index=ipr.link_lookup(ifname=ifname)[0], address=address, prefixlen=int(prefix))

    def add_route(self, ns: str, dst: str, via: Sequence[str]) -> None:
        with self.ns(ns) as ipr:
            if len(via) == 1:
                ipr.route("add", dst=dst, gateway=via[0])
            else:
                ipr.route("add", dst=dst, multipath=[{"gateway": gw} for gw in via])

    def shape(self, ns: str, ifname: str, rate_bps: float) -> None:
        """tbf root qdisc on the egress of ``ifname``: that direction of the link runs at ``rate_bps``."""
        with self.ns(ns) as ipr:
            index = ipr.link_lookup(ifname=ifname)[0]
            ipr.tc("add", "tbf", index, handle="1:", rate=f"{int(rate_bps)}bit", burst=_BURST_BYTES,
                   latency=_LATENCY)

    # reading ------------------------------------------------------------------------------------------
    def interfaces(self, ns: str) -> dict[str, dict[str, Any]]:
        """``ifname -> {index, stats, qdisc}`` with stats64 counters and the root qdisc's kind and stats."""
        with self.ns(ns) as ipr:
            found: dict[str, dict[str, Any]] = {}
            by_index: dict[int, str] = {}
            for link in ipr.get_links():
                name = link.get("ifname")
                by_index[link["index"]] = name
                found[name] = {"index": link["index"], "stats": dict(link.get("stats64") or {}),
                               "mtu": link.get("mtu"), "state": link.get("operstate"), "qdisc": None}
            for qdisc in ipr.get_qdiscs():
                name = by_index.get(qdisc["index"])
                if name is None or qdisc["parent"] != 0xFFFFFFFF:
                    continue
                stats = dict(qdisc.get("stats") or {})
                found[name]["qdisc"] = {"kind": qdisc.get("kind"), **_qdisc_stats(qdisc, stats)}
            return found

    def root_links(self) -> list[str]:
        """Interface names in the root namespace (to prove the lab left nothing there)."""
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            return [str(link.get("ifname")) for link in ipr.get_links()]

    def root_qdisc_indices(self) -> list[int]:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            return [int(q["index"]) for q in ipr.get_qdiscs()]


def _qdisc_stats(qdisc: Any, legacy: dict[str, Any]) -> dict[str, int]:
    stats2 = qdisc.get("stats2")
    basic = stats2.get("stats_basic") if stats2 else None
    queue = stats2.get("stats_queue") if stats2 else None
    if basic is not None and queue is not None:
        return {"bytes": int(basic["bytes"]), "packets": int(basic["packets"]), "drops": int(queue["drops"]),
                "overlimits": int(queue["overlimits"]), "backlog": int(queue["backlog"]),
                "qlen": int(queue["qlen"])}
    return {"bytes": int(legacy.get("bytes", 0)), "packets": int(legacy.get("packets", 0)),
            "drops": int(legacy.get("drop", 0)), "overlimits": int(legacy.get("overlimits", 0)),
            "backlog": int(legacy.get("backlog", 0)), "qlen": int(legacy.get("qlen", 0))}
