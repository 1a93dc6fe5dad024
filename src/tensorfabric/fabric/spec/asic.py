"""The switch ASIC part of the fabric spec: which buffer model sizes PFC headroom, and its constants."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from tensorfabric.errors import InputError
from tensorfabric.fabric.headroom import ASICS, PRESETS, AsicBuffer, HeadroomTable, asic_named, load_table
from tensorfabric.fabric.spec.types import Size, SpecModel

__all__ = ["AsicSpec"]

_FAMILIES = tuple(dict.fromkeys([*ASICS, *(n.removesuffix("-shp") for n in PRESETS)]))


class AsicSpec(SpecModel):
    """Switch buffer model: an ASIC family (Spectrum or Broadcom), optionally with constants overridden.

    ``shared_buffer`` and ``dynamic_th`` (alpha = 2**dynamic_th) give the ingress occupancy at which a lossless PG
    sends XOFF; ``xoff_threshold`` states it directly for static buffer configurations.

    ``headroom`` picks how PG headroom is sized: ``table`` answers from the switch's own ``pg_profile_lookup.ini``
    (``table:``, a path relative to the spec file), ``vendor`` uses the preset calibrated on the vendor's tables,
    ``sonic`` the SONiC dynamic (Lua) formula. Default: ``table`` when a table is given, else ``vendor`` where a
    preset exists (Spectrum 1-4 and 6, Spectrum-5 with a shared headroom pool, Broadcom), else ``sonic``.
    """

    model: str = "spectrum4"
    headroom: Literal["sonic", "vendor", "table"] | None = None
    table: str | None = None
    cell_size: Size | None = None
    pipeline_latency: Size | None = None
    mac_phy_delay: Size | None = None
    shared_buffer: Size | None = None
    dynamic_th: int = Field(default=0, ge=-7, le=7)
    xoff_threshold: Size | None = None
    eight_lanes: bool = False
    shared_headroom_pool: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        return {"model": data} if isinstance(data, str) else data

    _table: HeadroomTable | None = PrivateAttr(default=None)

    @field_validator("model")
    @classmethod
    def _known(cls, value: str) -> str:
        if value.lower() not in _FAMILIES:
            raise ValueError(f"is not one of {', '.join(_FAMILIES)}")
        return value.lower()

    @model_validator(mode="after")
    def _load_table(self, info: ValidationInfo) -> AsicSpec:
        if self.table is None:
            if self.headroom == "table":
                raise ValueError("asic.headroom 'table' needs asic.table: the switch's pg_profile_lookup.ini")
            return self
        base = Path((info.context or {}).get("base_dir", "."))
        path = Path(self.table)
        self._table = load_table(path if path.is_absolute() else base / path)
        return self

    @property
    def headroom_mode(self) -> Literal["sonic", "vendor", "table"]:
        if self.headroom is not None:
            return self.headroom
        if self._table is not None:
            return "table"
        # The vendor-calibrated preset where one exists: the Lua formula is below SN5600's own table by up to 14 %.
        shp_preset = self.shared_headroom_pool and f"{self.model}-shp" in PRESETS
        return "vendor" if self.model in PRESETS or shp_preset else "sonic"

    @property
    def lookup_table(self) -> HeadroomTable | None:
        return self._table

    def buffer(self) -> AsicBuffer:
        if self.model not in ASICS:
            raise InputError(f"asic {self.model!r} has no SONiC (Lua) constants; use headroom: vendor or table")
        base = asic_named(self.model)
        return AsicBuffer(
            name=base.name,
            cell_bytes=self.cell_size or base.cell_bytes,
            pipeline_latency_bytes=self.pipeline_latency or base.pipeline_latency_bytes,
            mac_phy_delay_bytes=float(self.mac_phy_delay) if self.mac_phy_delay else base.mac_phy_delay_bytes,
            peer_response_bytes=base.peer_response_bytes,
            shared_buffer_bytes=self.shared_buffer or 0,
        )

    def pfc_trigger_bytes(self) -> int | None:
        """Ingress PG occupancy at which XOFF is sent, when known (static threshold, else dynamic share)."""
        if self.xoff_threshold:
            return self.xoff_threshold
        if not self.shared_buffer:
            return None
        alpha = 2.0 ** self.dynamic_th
        # One congested PG may take alpha/(1+alpha) of the shared pool before its dynamic limit trips.
        return int(self.shared_buffer * alpha / (1 + alpha))
