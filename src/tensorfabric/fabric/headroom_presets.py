"""Vendor-calibrated headroom presets per switch ASIC family, each with its vendor's buffer convention.

A preset's formula is the physics of the headroom sum with its speed-dependent part measured by the vendor::

    xoff = max(floor, ceil_cell(fixed(speed) + k x speed_Gbps x cable_m + 2 x max(0, mtu - 9100)))

``fixed(speed)`` holds what does not grow with the cable at one speed (the two frames in flight, MAC/PHY latency,
the peer's pause-quanta response, cell inflation of small packets); ``k`` is the cable's bytes per Gb/s per metre
both ways, cell inflation included. Both were fitted (a linear program: never below any row, smallest worst
over-estimate) to the SKU table named in ``calibrated_on`` for port MTU 9100, SONiC's default; a larger MTU adds
two frames' worth. ``floor`` is the vendor table's smallest xoff where the vendor clamps small ports to one value.
The documented error table (docs/fabric.md) is recomputed by the tests from fixture copies of those tables.

Conventions (what ``size`` and ``xon`` mean differ by vendor):

* Spectrum, no shared headroom pool: ``size = xoff + xon`` (plus the port MTU on 8-lane ports, whose ``xon`` doubles).
* Spectrum with a shared headroom pool (SHP): ``size = xon``; ``xoff`` is only the PG's claim on the shared pool.
* Broadcom Trident2: ``size = xoff + minimum``; Trident3 / Tomahawk family: ``size = minimum`` (the guaranteed
  cells) and xoff is drawn from the headroom pool; ``xon_offset`` and the ``dynamic_th`` exponent as the vendor sets.

A speed the preset was not calibrated for, or a cable longer than its calibration (the vendor tables stop growing
or copy rows there: the long-cable cap), is an InputError that points at table mode -- never an extrapolation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry

__all__ = ["CALIBRATION_MTU", "PRESETS", "AsicPreset", "PresetAnswer", "preset_headroom", "preset_named"]

SizeRule = Literal["xoff+xon", "xon", "xoff+minimum", "minimum"]
CALIBRATION_MTU = 9100


@dataclass(frozen=True, slots=True)
class AsicPreset:
    name: str
    vendor: Literal["nvidia", "broadcom"]
    calibrated_on: str
    cell_bytes: int
    """Rounding granularity of xoff: 1024 B on Spectrum tables, the ASIC cell on Broadcom."""
    fixed: Mapping[int, int]
    """Bytes not growing with the cable, by speed in Gb/s."""
    per_gbps_m: float
    floor: int
    max_cable_m: float
    xon: Mapping[int, int]
    size_rule: SizeRule
    minimum: int = 0
    xon_offset: int | None = None
    threshold: int = 0
    shared_headroom_pool: bool = False

    def lanes8(self, speed_gbps: int) -> bool:
        # The vendor's xon doubles on ports of 8 lanes (400G on 50G-lane ASICs, 800G on 100G-lane ones).
        return self.vendor == "nvidia" and self.xon[speed_gbps] > min(self.xon.values())


_SP_XON = 19456  # ceil_1024(19 KiB pipeline latency), every Spectrum table
_SONIC = "sonic-buildimage device/"


def _spectrum(name: str, sku: str, fixed: dict[int, int], k: float, *, shp: bool, xon8: dict[int, int] | None = None,
              max_cable: float = 300.0) -> AsicPreset:
    xon = dict.fromkeys(fixed, _SP_XON) | (xon8 or {})
    return AsicPreset(name, "nvidia", _SONIC + sku, 1024, fixed, k, 0, max_cable, xon,
                      "xon" if shp else "xoff+xon", shared_headroom_pool=shp)


PRESETS: Registry[AsicPreset] = Registry("headroom preset", {p.name: p for p in (
    _spectrum("spectrum1", "mellanox/x86_64-mlnx_msn2700-r0/ACS-MSN2700",
              {10: 29573, 25: 29620, 40: 29779, 50: 29544, 100: 30415}, 2.468, shp=False),
    _spectrum("spectrum1-shp", "mellanox/x86_64-mlnx_msn2700-r0/Mellanox-SN2700-D48C8",
              {10: 22436, 25: 22946, 40: 22787, 50: 22340, 100: 23175}, 1.856, shp=True),
    _spectrum("spectrum2", "mellanox/x86_64-mlnx_msn3800-r0/ACS-MSN3800",
              {10: 35105, 25: 38541, 40: 41389, 50: 44313, 100: 54833}, 2.976, shp=False),
    _spectrum("spectrum2-shp", "mellanox/x86_64-mlnx_msn3800-r0/Mellanox-SN3800-D112C8",
              {10: 25750, 25: 28533, 40: 30293, 50: 32490, 100: 39867}, 2.188, shp=True),
    _spectrum("spectrum3", "mellanox/x86_64-mlnx_msn4700-r0/ACS-MSN4700",
              {10: 32621, 25: 32890, 40: 33202, 50: 33055, 100: 32317, 200: 32890, 400: 33011}, 2.951, shp=False,
              xon8={400: 37888}),
    _spectrum("spectrum3-shp", "mellanox/x86_64-mlnx_msn4700-r0/Mellanox-SN4700-O8C48",
              {10: 16322, 25: 17251, 40: 19718, 50: 22088, 100: 38031, 200: 43294, 400: 74300}, 1.259, shp=True,
              xon8={400: 38912}),
    _spectrum("spectrum4", "mellanox/x86_64-nvidia_sn5600-r0/ACS-SN5600",
              {10: 44859, 25: 48282, 40: 56556, 50: 62503, 100: 111693, 200: 127130, 400: 223539, 800: 241253},
              3.943, shp=False, xon8={800: 38912}),
    _spectrum("spectrum4-shp", "mellanox/x86_64-nvidia_sn5600-r0/Mellanox-SN5600-V256",
              {10: 33811, 25: 35526, 40: 41515, 50: 45452, 100: 78616, 200: 89811, 400: 154021, 800: 167754},
              2.514, shp=True, xon8={800: 38912}),
    AsicPreset("trident2", "broadcom", _SONIC + "common/profiles/td2/gen/BALANCED", 208,
               {1: 0, 10: 0, 40: 44833, 50: 45017, 100: 46562}, 1.516, 40560, 300.0,
               dict.fromkeys((1, 10, 40, 50, 100), 18432), "xoff+minimum", minimum=1248, xon_offset=2496,
               threshold=-1),
    AsicPreset("trident3", "broadcom", _SONIC + "dell/x86_64-dellemc_s5232f_c3538-r0/DellEMC-S5232f-C32", 256,
               {10: 45893, 25: 64647, 40: 76358, 50: 92503, 100: 160174}, 3.749, 0, 300.0,
               dict.fromkeys((10, 25, 40, 50, 100), 2048), "minimum", minimum=1024, xon_offset=2048, threshold=-3),
    AsicPreset("tomahawk", "broadcom", _SONIC + "dell/x86_64-dell_z9100_c2538-r0/Force10-Z9100-C32", 208,
               {10: 35685, 25: 52811, 40: 66194, 50: 89398, 100: 163820}, 3.498, 0, 300.0,
               dict.fromkeys((10, 25, 40, 50, 100), 2288), "minimum", minimum=1248, xon_offset=2288, threshold=-3),
    AsicPreset("tomahawk2", "broadcom", _SONIC + "dell/x86_64-dellemc_z9264f_c3538-r0/DellEMC-Z9264f-C64", 208,
               {10: 37968, 25: 51615, 40: 64717, 50: 76398, 100: 134491}, 3.083, 0, 300.0,
               dict.fromkeys((10, 25, 40, 50, 100), 2288), "minimum", minimum=1248, xon_offset=2288, threshold=-3),
    AsicPreset("tomahawk3", "broadcom", _SONIC + "dell/x86_64-dellemc_z9332f_d1508-r0/DellEMC-Z9332f-O32", 254,
               {100: 67782, 400: 175370}, 1.661, 0, 2000.0,
               {100: 2540, 400: 2540}, "minimum", minimum=2540, xon_offset=2540, threshold=-2),
)})


def preset_named(name: str, *, shared_headroom_pool: bool = False) -> AsicPreset:
    """The preset ``name`` (``spectrum3``, ``tomahawk``...); with SHP the ``-shp`` calibration of a Spectrum."""
    key = name.lower()
    if shared_headroom_pool and not key.endswith("-shp"):
        if f"{key}-shp" not in PRESETS:
            raise InputError(f"asic: {name!r} has no shared-headroom-pool preset; SHP presets: "
                             f"{', '.join(n for n in PRESETS if n.endswith('-shp'))}")
        key = f"{key}-shp"
    if key not in PRESETS:
        raise InputError(f"asic: {name!r} is not one of {', '.join(PRESETS)}")
    return PRESETS[key]


@dataclass(frozen=True, slots=True)
class PresetAnswer:
    xoff: int
    xon: int
    size: int
    fixed: int
    on_cable: float
    mtu_extra: int
    lanes8: bool


def preset_headroom(preset: AsicPreset, speed_bps: float, cable_m: float, mtu: int) -> PresetAnswer:
    gbps = round(speed_bps / 1e9)
    if abs(gbps * 1e9 - speed_bps) > 1e-3 * speed_bps or gbps not in preset.fixed:
        known = ", ".join(f"{g}G" for g in sorted(preset.fixed))
        raise InputError(f"speed: {speed_bps / 1e9:g}G is not calibrated for {preset.name} (calibrated: {known}); "
                         "use the switch's pg_profile_lookup.ini with --table")
    if cable_m > preset.max_cable_m:
        raise InputError(f"cable: {cable_m:g}m is beyond {preset.name}'s calibrated {preset.max_cable_m:g}m (the "
                         "longest cable of the vendor rows it was fitted on); use the switch's pg_profile_lookup.ini "
                         "with --table")
    on_cable = preset.per_gbps_m * gbps * cable_m
    extra = 2 * max(0, mtu - CALIBRATION_MTU)
    raw = preset.fixed[gbps] + on_cable + extra
    xoff = max(preset.floor, int(math.ceil(raw / preset.cell_bytes)) * preset.cell_bytes)
    xon = preset.xon[gbps]
    eight = preset.lanes8(gbps)
    size = {"xoff+xon": xoff + xon + (mtu if eight else 0), "xon": xon, "xoff+minimum": xoff + preset.minimum,
            "minimum": preset.minimum}[preset.size_rule]
    return PresetAnswer(xoff, xon, size, preset.fixed[gbps], on_cable, extra, eight)
