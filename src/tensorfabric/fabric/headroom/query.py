"""The two questions ``fabric headroom`` answers: one link described by its figures, and every cabled port of a spec.

Each headroom model takes its own options (the vendor presets a shared pool and a lane count, SONiC's formula its
traffic pattern, IEEE the cable medium); :func:`model_options` picks the ones a model reads from everything a user
may give, so a caller states the link once and the model decides what matters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tensorfabric.fabric.headroom.model import HeadroomResult, compute_headroom, default_lanes, headroom_for_port

if TYPE_CHECKING:
    from tensorfabric.fabric.spec import FabricSpec

__all__ = ["HeadroomQuery", "PortHeadroom", "answer", "asic_names", "model_options", "spec_headroom"]


def asic_names(modelled: Sequence[str]) -> tuple[str, ...]:
    """The ASIC families a user may name: those the formula models know, then the families only a vendor preset
    knows (Broadcom); a preset's SKU-group variants (``-shp``) are left to ``--asic``'s help."""
    from tensorfabric.fabric.headroom.presets import PRESETS

    return (*modelled, *(n for n in PRESETS.names() if not n.endswith("-shp") and n not in modelled))


@dataclass(frozen=True, slots=True)
class HeadroomQuery:
    """One lossless priority group's link, with every option any model reads (each model uses its own)."""

    speed_bps: float
    cable_m: float
    mtu: int = 9100
    model: str = "vendor"
    asic: str = "spectrum4"
    shared_headroom_pool: bool = False
    lanes: int | None = None
    """SerDes lanes; None: the ASIC's lane rate decides."""
    lossless_mtu: int = 1024
    small_packet_pct: int = 100
    medium: str = "fiber"


def model_options(query: HeadroomQuery) -> dict[str, Any]:
    """The keyword options ``query.model`` takes, from the query's fields."""
    if query.model == "ieee":
        return {"medium": query.medium}
    if query.model == "vendor":
        return {"shared_headroom_pool": query.shared_headroom_pool, "lanes": query.lanes}
    if query.model == "sonic":
        # SONiC's formula knows only whether the port has eight lanes (the xon doubles).
        lanes = query.lanes if query.lanes is not None else default_lanes(query.asic, query.speed_bps)
        return {"shared_headroom_pool": query.shared_headroom_pool, "lossless_mtu": query.lossless_mtu,
                "small_packet_pct": query.small_packet_pct, "eight_lanes": lanes == 8}
    return {}


def answer(query: HeadroomQuery) -> HeadroomResult:
    """The headroom ``query.model`` computes for the query's link."""
    return compute_headroom(query.speed_bps, query.cable_m, query.mtu, query.model, query.asic,
                            **model_options(query))


@dataclass(frozen=True, slots=True)
class PortHeadroom:
    """One cabled port of a spec: what its device is configured with, and what the real cable needs."""

    port: str
    peer: str | None
    configured: HeadroomResult
    needed: HeadroomResult

    def to_dict(self) -> dict[str, Any]:
        r = self.configured
        return {"port": self.port, "peer": self.peer, "model": r.model, "speed_bps": r.speed_bps,
                "cable_m": r.cable_m, "mtu": r.mtu, "xoff_bytes": r.xoff_bytes, "xon_bytes": r.xon_bytes,
                "size_bytes": r.size_bytes, "needed_xoff_bytes": self.needed.xoff_bytes}


def spec_headroom(spec: FabricSpec) -> tuple[PortHeadroom, ...]:
    """Both ends of every link whose headroom can be computed, in link order."""
    ports = []
    for link in spec.links:
        for end in (link.a, link.b):
            configured = headroom_for_port(spec, end)
            needed = headroom_for_port(spec, end, configured=False)
            if configured is not None and needed is not None:
                ports.append(PortHeadroom(end, spec.peer_of(end), configured, needed))
    return tuple(ports)
