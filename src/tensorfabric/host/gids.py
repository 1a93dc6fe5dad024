"""GID table entries and how NCCL (>= 2.21) would choose among them.

A RoCE port carries two GIDs per IP address, one per RoCE version (NVIDIA/nccl#769). Link-local (fe80::/64)
GIDs are not routed; IPv4 addresses appear IPv4-mapped (``::ffff:a.b.c.d``). The selection mirrors
``ncclIbGetGidIndex`` (src/transport/net_ib/connect.cc): family first, then valid (non-zero, non-link-local),
then RoCE version.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["AddrFamily", "Gid", "gid_version", "select_gid"]

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
    for gid in sorted(gids, key=lambda g: g.index):
        if gid.index == 0 or not gid.valid or gid.family != family:
            continue
        if gid.version == version:
            return gid
    return None
