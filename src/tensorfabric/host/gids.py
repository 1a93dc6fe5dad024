"""GID table entries and how NCCL (>= 2.21) would choose among them.

A RoCE port carries two GIDs per IP address, one per RoCE version (NVIDIA/nccl#769). Link-local (fe80::/64)
GIDs are not routed; IPv4 addresses appear IPv4-mapped (``::ffff:a.b.c.d``). The selection mirrors
``ncclIbGetGidIndex`` (src/transport/net_ib/connect.cc): family first, then valid (non-zero, non-link-local),
then RoCE version.

Two rules go beyond NCCL, for the index this project *recommends* (:func:`preferred_gid`):

* **Overlays are never preferred.** One IPv4 can sit on several netdevs of one port: the RoCE netdev (a bond, a
  PF), a VXLAN overlay stacked on it, a macvlan on the bond (openucx/ucx#9484). NCCL takes the lowest index, which
  may be the overlay's, and its traffic then leaves with the overlay's addressing. A netdev counts as an overlay by
  its name: it contains ``vxlan``, ``flannel``, ``geneve``, ``macvlan``, ``macvtap``, ``ipvlan``, ``docker``,
  ``cilium`` or ``weave``, or it starts with ``cali``, ``cni``, ``veth``, ``tunl``, ``lxc``, ``virbr``, ``br-``,
  ``kube-`` or ``mv-``. A pod's ``net1`` (Multus) is the pod's RoCE netdev, not an overlay. When every candidate is
  on an overlay, or no netdev is known, the answer is NCCL's own.
* **The pairing convention** (:func:`assume_pair_types`): older ``ibv_devinfo`` and a bare ``gids/*`` listing print
  no RoCE version. mlx5 (and mlx4 in dual mode, bnxt_re) create two entries per address, RoCE v1 at index 2k and
  v2 at 2k+1; when every address of a table sits in such a pair, the types are assumed from it, and the reader says
  so. A table that is not all pairs gets no assumption.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["AddrFamily", "Gid", "assume_pair_types", "gid_version", "is_overlay_netdev", "preferred_gid",
           "select_gid"]

AddrFamily = Literal["AF_INET", "AF_INET6"]


def gid_version(type_text: str | None) -> int | None:
    """``IB/RoCE v1`` and ``RoCE v1`` -> 1, ``RoCE v2`` -> 2, anything else (or EINVAL) -> ``None``."""
    if not type_text:
        return None
    text = type_text.strip().lower()
    if text.endswith("v2"):
        return 2
    if text.endswith("v1"):
        return 1
    return None


@dataclass(frozen=True, slots=True)
class Gid:
    """One entry of ``ports/<p>/gids/<i>`` with its ``gid_attrs`` (type and netdev)."""

    index: int
    gid: str
    type: str | None = None
    ndev: str | None = None

    @property
    def address(self) -> ipaddress.IPv6Address | None:
        try:
            return ipaddress.IPv6Address(self.gid)
        except ValueError:
            return None

    @property
    def is_zero(self) -> bool:
        addr = self.address
        return addr is None or int(addr) == 0

    @property
    def is_link_local(self) -> bool:
        addr = self.address
        return addr is not None and addr.is_link_local

    @property
    def ipv4(self) -> str | None:
        addr = self.address
        mapped = addr.ipv4_mapped if addr is not None else None
        return str(mapped) if mapped is not None else None

    @property
    def family(self) -> AddrFamily:
        return "AF_INET" if self.ipv4 is not None else "AF_INET6"

    @property
    def version(self) -> int | None:
        return gid_version(self.type)

    @property
    def valid(self) -> bool:
        """NCCL's notion: not all-zero and not link-local."""
        return not self.is_zero and not self.is_link_local

    def describe(self) -> str:
        kind = f"v{self.version}" if self.version else (self.type or "?")
        where = self.ipv4 or str(self.address or self.gid)
        return f"[{self.index}] {where} {kind}" + (f" on {self.ndev}" if self.ndev else "")


def select_gid(gids: Iterable[Gid], *, family: AddrFamily = "AF_INET", version: int = 2) -> Gid | None:
    """The GID NCCL >= 2.21 auto-selects for ``family``/``version``, or ``None`` when none qualifies.

    Index 0 is skipped like NCCL does (it starts at 1); the lowest qualifying index wins.
    """
    found = _candidates(gids, family, version)
    return found[0] if found else None


_OVERLAY_WORDS = ("vxlan", "flannel", "geneve", "macvlan", "macvtap", "ipvlan", "docker", "cilium", "weave")
_OVERLAY_STARTS = ("cali", "cni", "veth", "tunl", "lxc", "virbr", "br-", "kube-", "mv-")


def is_overlay_netdev(name: str | None) -> bool:
    """Whether a GID's netdev is an overlay or a virtual device stacked on the RoCE netdev (judged by its name)."""
    if not name:
        return False
    low = name.lower()
    return low.startswith(_OVERLAY_STARTS) or any(word in low for word in _OVERLAY_WORDS)


def _candidates(gids: Iterable[Gid], family: AddrFamily, version: int) -> list[Gid]:
    return [g for g in sorted(gids, key=lambda g: g.index)
            if g.index != 0 and g.valid and g.family == family and g.version == version]


def preferred_gid(gids: Iterable[Gid], *, family: AddrFamily = "AF_INET", version: int = 2) -> Gid | None:
    """The GID to recommend: NCCL's choice (:func:`select_gid`), except that an overlay netdev's entry is passed over
    for the lowest one on a netdev that is not an overlay."""
    found = _candidates(gids, family, version)
    return next((g for g in found if not is_overlay_netdev(g.ndev)), found[0] if found else None)


def assume_pair_types(gids: Iterable[Gid]) -> tuple[Gid, ...] | None:
    """The GIDs typed by the pairing convention (v1 at 2k, v2 at 2k+1), or ``None`` when it does not fit: some entry
    is typed already, or some entry's pair partner (index 2k+1 for 2k, 2k for 2k+1) is missing or holds another
    address."""
    table = sorted(gids, key=lambda g: g.index)
    if not table or any(g.type for g in table):
        return None
    by_index = {g.index: g for g in table}
    for gid in table:
        partner = by_index.get(gid.index ^ 1)
        if partner is None or partner.address != gid.address:
            return None
    return tuple(Gid(g.index, g.gid, "RoCE v2" if g.index % 2 else "RoCE v1", g.ndev) for g in table)
