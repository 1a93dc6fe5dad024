"""Vendor-calibrated headroom presets per switch ASIC family, each with its vendor's buffer convention.

A preset's formula is the physics of the headroom sum with its speed-dependent part measured by the vendor::

    xoff = max(floor, ceil_cell(fixed(speed) + k x speed_Gbps x cable_m + 2 x max(0, mtu - 9100)))

``fixed(speed)`` holds what does not grow with the cable at one speed (the two frames in flight, MAC/PHY latency,
the peer's pause-quanta response, cell inflation of small packets); ``k`` is the cable's bytes per Gb/s per metre
both ways, cell inflation included. Both were fitted (never below any row, smallest worst over-estimate) to the
SKU tables a preset names in ``tables`` for port MTU 9100, SONiC's default; a larger MTU adds two frames' worth.
``floor`` is the vendor table's smallest xoff where the vendor clamps small ports to one value. The documented
error table (docs/fabric.md, ``scripts/headroom_table.py``) is recomputed by the tests from fixture copies of
those tables.

SKUs of one ASIC family differ by up to 1.6x (SN4700-O8C48 and SN4700-C128 on Spectrum-3 with a shared headroom
pool), so a family name picks the family's *envelope*: the preset of the SKU group whose table is highest, which is
at or above every table of the family that we hold. A SKU group's own preset (``spectrum3-shp-o8c48``...) is the
tight one; :func:`preset_named` also takes the SKU directory name (``Mellanox-SN4280-O8C40``).

Conventions (what ``size`` and ``xon`` mean differ by vendor):

* Spectrum, no shared headroom pool: ``size = xoff + xon`` (plus the port MTU on 8-lane ports, whose ``xon`` doubles).
* Spectrum with a shared headroom pool (SHP): ``size = xon``; ``xoff`` is only the PG's claim on the shared pool.
* Broadcom Trident2: ``size = xoff + minimum``; Trident3 / Tomahawk family: ``size = minimum`` (the guaranteed
  cells) and xoff is drawn from the headroom pool; ``xon_offset`` and the ``dynamic_th`` exponent as the vendor sets.

A speed the preset was not calibrated for, or a cable longer than its calibration (the vendor tables stop growing
or copy rows there: the long-cable cap), is an InputError naming the calibrated range and pointing at table mode --
never an extrapolation. Lanes: on Spectrum a port of 8 SerDes lanes doubles xon (and adds the port MTU to size
without SHP); a lane count the ASIC's SerDes cannot carry the speed on is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry

__all__ = ["CALIBRATION_MTU", "PRESETS", "AsicPreset", "CalibrationTable", "PresetAnswer", "preset_headroom",
           "preset_named"]

SizeRule = Literal["xoff+xon", "xon", "xoff+minimum", "minimum"]
CALIBRATION_MTU = 9100


@dataclass(frozen=True, slots=True)
class CalibrationTable:
    """One vendor table a preset was fitted on: its sonic-buildimage SKU directory and, when not all of its rows
    were used, the speeds (Gb/s) that were."""

    sku_dir: str
    speeds: tuple[int, ...] = ()

    @property
    def sku(self) -> str:
        return self.sku_dir.rsplit("/", 1)[-1]

    @property
    def label(self) -> str:
        """The SKU name, with the speeds used when not all were."""
        only = f" ({', '.join(f'{s}G' for s in self.speeds)} rows)" if self.speeds else ""
        return self.sku + only

    def __str__(self) -> str:
        return f"sonic-buildimage device/{self.sku_dir}" + self.label.removeprefix(self.sku)


@dataclass(frozen=True, slots=True)
class AsicPreset:
    name: str
    vendor: Literal["nvidia", "broadcom"]
    tables: tuple[CalibrationTable, ...]
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
    lane_gbps: int = 0
    """SerDes lane rate of the ASIC (Gb/s); 0 where it is not known (Spectrum-5/6: a lane count is taken as given)
    or lanes do not matter (Broadcom tables have no lane dependence)."""
    skus: tuple[str, ...] = field(default=())
    """SKU directory names that share the calibration tables' rows (symlinks in sonic-buildimage)."""

    @property
    def calibrated_on(self) -> str:
        return "; ".join(str(t) for t in self.tables)

    def calibrated_range(self) -> str:
        speeds = sorted(self.fixed)
        return (f"{', '.join(f'{g}G' for g in speeds)} up to {self.max_cable_m:g}m, on "
                f"{', '.join(t.label for t in self.tables)}")

    def lanes8(self, speed_gbps: int) -> bool:
        # The vendor's xon doubles on ports of 8 lanes (400G on 50G-lane ASICs, 800G on 100G-lane ones).
        return self.vendor == "nvidia" and self.xon[speed_gbps] > min(self.xon.values())


_SP_XON = 19456  # ceil_1024(19 KiB pipeline latency), every Spectrum table
_MLNX = "mellanox/"
# SerDes lane rates (Gb/s); Spectrum-5/6 rates are not in our sources, so their lane counts are taken as given.
_LANES = {"spectrum1": 25, "spectrum2": 50, "spectrum3": 50, "spectrum4": 100}


def _spectrum(name: str, tables: tuple[CalibrationTable, ...], fixed: dict[int, int], k: float, *, shp: bool,
              xon8: dict[int, int] | None = None, max_cable: float = 300.0, skus: tuple[str, ...] = ()
              ) -> AsicPreset:
    xon = dict.fromkeys(fixed, _SP_XON) | (xon8 or {})
    return AsicPreset(name, "nvidia", tables, 1024, fixed, k, 0, max_cable, xon, "xon" if shp else "xoff+xon",
                      shared_headroom_pool=shp, lane_gbps=_LANES.get(name.split("-")[0], 0), skus=skus)


def _t(sku_dir: str, *speeds: int) -> CalibrationTable:
    return CalibrationTable(sku_dir, tuple(speeds))


_SN2700, _SN3700, _SN3800 = "x86_64-mlnx_msn2700-r0/", "x86_64-mlnx_msn3700-r0/", "x86_64-mlnx_msn3800-r0/"
_SN4600C, _SN4700 = "x86_64-mlnx_msn4600c-r0/", "x86_64-mlnx_msn4700-r0/"
_SN4280, _SN5600, _SN5640 = "x86_64-nvidia_sn4280-r0/", "x86_64-nvidia_sn5600-r0/", "x86_64-nvidia_sn5640-r0/"

PRESETS: Registry[AsicPreset] = Registry("headroom preset", {p.name: p for p in (
    # SN2201's 100M and 1G rows stay refused: at 300m they copy the 10G row's size (56320 with xoff 29696).
    _spectrum("spectrum1", (_t(_MLNX + _SN2700 + "ACS-MSN2700"),
                            _t(_MLNX + "x86_64-nvidia_sn2201-r0/ACS-SN2201")),
              {10: 29573, 25: 29620, 40: 29779, 50: 29544, 100: 30415}, 2.468, shp=False,
              skus=("ACS-MSN2010", "ACS-MSN2100", "ACS-MSN2410", "ACS-MSN2740")),
    _spectrum("spectrum1-shp", (_t(_MLNX + _SN2700 + "Mellanox-SN2700-D48C8"),
                                _t(_MLNX + _SN2700 + "Mellanox-SN2700-D40C8S8")),
              {10: 22436, 25: 22946, 40: 22787, 50: 22340, 100: 23175}, 1.856, shp=True,
              skus=("Mellanox-SN2700", "Mellanox-SN2700-C28D8", "Mellanox-SN2700-D44C10")),
    # SN3800 has no 200G ports; Spectrum-2's 200G rows are SN3700's, so the family answers 200G from them.
    _spectrum("spectrum2", (_t(_MLNX + _SN3800 + "ACS-MSN3800"), _t(_MLNX + _SN3700 + "ACS-MSN3700", 200)),
              {10: 35105, 25: 38541, 40: 41389, 50: 44313, 100: 54833, 200: 32864}, 2.976, shp=False),
    _spectrum("spectrum2-shp", (_t(_MLNX + _SN3800 + "Mellanox-SN3800-D112C8"),),
              {10: 25750, 25: 28533, 40: 30293, 50: 32490, 100: 39867}, 2.188, shp=True,
              skus=("Mellanox-SN3800-C64", "Mellanox-SN3800-D100C12S2", "Mellanox-SN3800-D24C52",
                    "Mellanox-SN3800-D28C49S1", "Mellanox-SN3800-D28C50")),
    _spectrum("spectrum2-sn3700", (_t(_MLNX + _SN3700 + "ACS-MSN3700"),),
              {10: 32658, 25: 33004, 40: 33351, 50: 33240, 100: 32688, 200: 33617}, 2.836, shp=False,
              skus=("ACS-MSN3700C", "ACS-MSN3420")),
    _spectrum("spectrum3", (_t(_MLNX + _SN4700 + "ACS-MSN4700"),),
              {10: 32621, 25: 32890, 40: 33202, 50: 33055, 100: 32317, 200: 32890, 400: 33011}, 2.951, shp=False,
              xon8={400: 37888}, skus=("ACS-MSN4410", "ACS-MSN4600", "ACS-MSN4600C", "ACS-SN4800")),
    # The family's SHP envelope: SN4700-C128's rows are the highest Spectrum-3 SHP rows (up to 1.6x SN4700-O8C48).
    _spectrum("spectrum3-shp", (_t(_MLNX + _SN4700 + "Mellanox-SN4700-C128"),
                                _t(_MLNX + _SN4600C + "Mellanox-SN4600C-D112C8")),
              {10: 24788, 25: 26752, 40: 30543, 50: 33285, 100: 59902, 200: 66556, 400: 114680}, 2.031, shp=True,
              xon8={400: 38912},
              skus=("Mellanox-SN4700-A96C8V8", "Mellanox-SN4700-O28", "Mellanox-SN4700-O8V48",
                    "Mellanox-SN4700-V48C32", "Mellanox-SN4600C-C64", "Mellanox-SN4600C-D100C12S2",
                    "Mellanox-SN4600C-D48C40")),
    _spectrum("spectrum3-shp-o8c48", (_t(_MLNX + _SN4700 + "Mellanox-SN4700-O8C48"),
                                      _t(_MLNX + _SN4280 + "Mellanox-SN4280-O8C40")),
              {10: 16318, 25: 17433, 40: 19906, 50: 21554, 100: 39012, 200: 43208, 400: 75152}, 1.332, shp=True,
              xon8={400: 38912},
              skus=("Mellanox-SN4700-O32", "Mellanox-SN4700-V64", "Mellanox-SN4280-C48", "Mellanox-SN4280-O28",
                    "Mellanox-SN4280-O4X96", "Mellanox-SN4280-O8C80", "Mellanox-SN4280-O8V40")),
    _spectrum("spectrum3-shp-d24c52", (_t(_MLNX + _SN4600C + "Mellanox-SN4600C-D24C52"),),
              {10: 18404, 25: 19384, 40: 21560, 50: 24360, 100: 42576}, 1.446, shp=True, max_cable=2000.0),
    _spectrum("spectrum4", (_t(_MLNX + _SN5600 + "ACS-SN5600"),),
              {10: 44859, 25: 48282, 40: 56556, 50: 62503, 100: 111693, 200: 127130, 400: 223539, 800: 241253},
              3.943, shp=False, xon8={800: 38912}, skus=("ACS-SN5400", "Mellanox-SN5600-O128")),
    # The family's SHP envelope: SN5600-V256's rows are above SN5600-C224O8's and -C256S1's everywhere.
    _spectrum("spectrum4-shp", (_t(_MLNX + _SN5600 + "Mellanox-SN5600-V256"),),
              {10: 33811, 25: 35526, 40: 41515, 50: 45452, 100: 78616, 200: 89811, 400: 154021, 800: 167754},
              2.514, shp=True, xon8={800: 38912}),
    # Beyond 40m the C224O8 table is not monotone (10G at 250m below 10G at 5m): nothing to fit there.
    _spectrum("spectrum4-shp-c224o8", (_t(_MLNX + _SN5600 + "Mellanox-SN5600-C224O8"),),
              {10: 20422, 25: 21358, 40: 24342, 50: 26332, 100: 44468, 200: 51048, 400: 85712, 800: 94624}, 1.171,
              shp=True, xon8={800: 38912}, max_cable=40.0,
              skus=("Mellanox-SN5610N-C224O8", "Mellanox-SN5610N-C256S2")),
    _spectrum("spectrum4-shp-c256s1", (_t(_MLNX + _SN5600 + "Mellanox-SN5600-C256S1"),),
              {10: 20414, 25: 21421, 40: 24312, 50: 26458, 100: 44248, 200: 50608, 400: 84832, 800: 93888}, 1.324,
              shp=True, xon8={800: 38912}),
    _spectrum("spectrum5-shp", (_t(_MLNX + _SN5640 + "Mellanox-SN5640-C512S2"),
                                _t(_MLNX + _SN5640 + "Mellanox-SN5640-C512X2")),
              {10: 20462, 25: 21529, 50: 26606, 100: 44129, 200: 50841, 400: 86321}, 1.333, shp=True,
              max_cable=1000.0, skus=("Mellanox-SN5640-C448O16", "Mellanox-SN5640-C508O1X2", "Mellanox-SN5640-O128X2")),
    # Spectrum-6's one table (every SN6600/SN6810 SKU links to it); its 10G/25G rows exist at 5m only.
    AsicPreset("spectrum6", "nvidia", (_t(_MLNX + "x86_64-nvidia_sn6600_ld-r0/ACS-SN6600_LD"),), 1024,
               {10: 20411, 25: 21331, 100: 43338, 200: 47256, 400: 79152, 800: 141920}, 1.389, 0, 300.0,
               dict.fromkeys((10, 25, 100, 200, 400, 800), 43008), "xoff+xon",
               skus=("Mellanox-SN6600_LD-P128C2", "Mellanox-SN6600_LD-P64O128C2", "ACS-SN6810_LD")),
    AsicPreset("trident2", "broadcom", (_t("common/profiles/td2/gen/BALANCED"),), 208,
               {1: 0, 10: 0, 40: 44833, 50: 45017, 100: 46562}, 1.516, 40560, 300.0,
               dict.fromkeys((1, 10, 40, 50, 100), 18432), "xoff+minimum", minimum=1248, xon_offset=2496,
               threshold=-1),
    AsicPreset("trident3", "broadcom", (_t("dell/x86_64-dellemc_s5232f_c3538-r0/DellEMC-S5232f-C32"),), 256,
               {10: 45893, 25: 64647, 40: 76358, 50: 92503, 100: 160174}, 3.749, 0, 300.0,
               dict.fromkeys((10, 25, 40, 50, 100), 2048), "minimum", minimum=1024, xon_offset=2048, threshold=-3),
    AsicPreset("tomahawk", "broadcom", (_t("dell/x86_64-dell_z9100_c2538-r0/Force10-Z9100-C32"),), 208,
               {10: 35685, 25: 52811, 40: 66194, 50: 89398, 100: 163820}, 3.498, 0, 300.0,
               dict.fromkeys((10, 25, 40, 50, 100), 2288), "minimum", minimum=1248, xon_offset=2288, threshold=-3),
    AsicPreset("tomahawk2", "broadcom", (_t("dell/x86_64-dellemc_z9264f_c3538-r0/DellEMC-Z9264f-C64"),), 208,
               {10: 37968, 25: 51615, 40: 64717, 50: 76398, 100: 134491}, 3.083, 0, 300.0,
               dict.fromkeys((10, 25, 40, 50, 100), 2288), "minimum", minimum=1248, xon_offset=2288, threshold=-3),
    AsicPreset("tomahawk3", "broadcom", (_t("dell/x86_64-dellemc_z9332f_d1508-r0/DellEMC-Z9332f-O32"),), 254,
               {100: 67782, 400: 175370}, 1.661, 0, 2000.0,
               {100: 2540, 400: 2540}, "minimum", minimum=2540, xon_offset=2540, threshold=-2),
)})


def _by_sku() -> dict[str, str]:
    out: dict[str, str] = {}
    for name, preset in PRESETS.items():
        for sku in (*(t.sku for t in preset.tables if not t.speeds), *preset.skus):
            out.setdefault(sku.lower(), name)
    return out


def preset_named(name: str, *, shared_headroom_pool: bool = False) -> AsicPreset:
    """The preset ``name``: a family (``spectrum3``; with SHP its ``-shp`` envelope), a SKU group's preset
    (``spectrum3-shp-o8c48``) or a SONiC SKU directory name (``Mellanox-SN4280-O8C40``, ``ACS-MSN3700``)."""
    key = name.lower()
    if key not in PRESETS:
        key = _by_sku().get(key, key)
    if key in PRESETS and (PRESETS[key].shared_headroom_pool or not shared_headroom_pool):
        return PRESETS[key]
    if shared_headroom_pool and f"{key}-shp" in PRESETS:
        return PRESETS[f"{key}-shp"]
    if shared_headroom_pool and key in PRESETS:
        raise InputError(f"asic: {name!r} has no shared-headroom-pool preset; SHP presets: "
                         f"{', '.join(n for n in PRESETS if PRESETS[n].shared_headroom_pool)}")
    raise InputError(f"asic: {name!r} is not one of {', '.join(PRESETS)} (or a SONiC SKU name they were "
                     "calibrated on)")


@dataclass(frozen=True, slots=True)
class PresetAnswer:
    xoff: int
    xon: int
    size: int
    fixed: int
    on_cable: float
    mtu_extra: int
    lanes8: bool


def _eight_lanes(preset: AsicPreset, gbps: int, lanes: int | None) -> bool:
    native = preset.lanes8(gbps)
    if lanes is None or preset.vendor != "nvidia":
        return native
    if preset.lane_gbps == 0:
        return lanes >= 8 or native
    if gbps > lanes * preset.lane_gbps:
        fewest = math.ceil(gbps / preset.lane_gbps)
        raise InputError(f"lanes: {gbps}G on {lanes} lanes needs {gbps / lanes:g}G per lane; {preset.name}'s SerDes "
                         f"lanes are {preset.lane_gbps}G (give --lanes {fewest})")
    return lanes >= 8


def preset_headroom(preset: AsicPreset, speed_bps: float, cable_m: float, mtu: int, *,
                    lanes: int | None = None) -> PresetAnswer:
    gbps = round(speed_bps / 1e9)
    if abs(gbps * 1e9 - speed_bps) > 1e-3 * speed_bps or gbps not in preset.fixed:
        raise InputError(f"speed: {speed_bps / 1e9:g}G is not calibrated for {preset.name} (calibrated: "
                         f"{preset.calibrated_range()}); use the switch's pg_profile_lookup.ini with --table")
    if cable_m > preset.max_cable_m:
        raise InputError(f"cable: {cable_m:g}m is beyond {preset.name}'s calibrated {preset.max_cable_m:g}m (the "
                         f"longest cable of the vendor rows it was fitted on; calibrated: "
                         f"{preset.calibrated_range()}); use the switch's pg_profile_lookup.ini with --table")
    eight = _eight_lanes(preset, gbps, lanes)
    on_cable = preset.per_gbps_m * gbps * cable_m
    extra = 2 * max(0, mtu - CALIBRATION_MTU)
    raw = preset.fixed[gbps] + on_cable + extra
    xoff = max(preset.floor, int(math.ceil(raw / preset.cell_bytes)) * preset.cell_bytes)
    xon = preset.xon[gbps]
    # An 8-lane port the table has as 4 lanes: twice the table's xon, the larger of the two 8-lane values the
    # Spectrum tables show (37 888 = 2 x 19 456 - 1024 on ACS-MSN4700, 38 912 on ACS-SN5600 and the SHP SKUs).
    if eight and not preset.lanes8(gbps):
        xon = 2 * min(preset.xon.values())
    size = {"xoff+xon": xoff + xon + (mtu if eight else 0), "xon": xon, "xoff+minimum": xoff + preset.minimum,
            "minimum": preset.minimum}[preset.size_rule]
    return PresetAnswer(xoff, xon, size, preset.fixed[gbps], on_cable, extra, eight)
