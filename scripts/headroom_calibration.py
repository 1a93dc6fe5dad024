"""Per-ASIC error table of the headroom models against the vendor tables they are checked on.

For every vendor preset, every row of its calibration table (``tests/fixtures/fabric/headroom/<preset>.ini``,
facts re-typed from SONiC's ``pg_profile_lookup.ini`` files) within the preset's calibrated cable range is
recomputed and compared with the vendor's xoff: the minimum and maximum of (model - vendor) / vendor. For the
Spectrum tables the SONiC dynamic (Lua) model with the same ASIC constants is shown too, which is what the
``sonic`` model gives, and for every table the generic ``ieee`` sum (fibre) -- the models before the presets.

Usage: ``.venv/bin/python scripts/headroom_calibration.py [--json FILE]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tensorfabric.errors import InputError
from tensorfabric.fabric.headroom import ASICS, compute_headroom
from tensorfabric.fabric.headroom_presets import PRESETS
from tensorfabric.fabric.headroom_table import load_table
from tensorfabric.fsutil import atomic_write_json

TABLES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fabric" / "headroom"


def rows() -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for name, preset in PRESETS.items():
        table = load_table(TABLES / f"{name}.ini")
        family = name.removesuffix("-shp")
        vendor: list[float] = []
        lua: list[float] = []
        ieee: list[float] = []
        skipped = 0
        for row in table.rows:
            if row.cable_m > preset.max_cable_m:
                skipped += 1
                continue
            speed = row.speed_mbps * 1e6
            got = compute_headroom(speed, row.cable_m, 9100, "vendor", family,
                                   shared_headroom_pool=preset.shared_headroom_pool)
            vendor.append((got.xoff_bytes - row.xoff) / row.xoff)
            generic = compute_headroom(speed, row.cable_m, 9100, "ieee", medium="fiber")
            ieee.append((generic.xoff_bytes - row.xoff) / row.xoff)
            if family in ASICS:
                try:
                    sonic = compute_headroom(speed, row.cable_m, 9100, "sonic", family,
                                             shared_headroom_pool=preset.shared_headroom_pool,
                                             eight_lanes=preset.lanes8(round(speed / 1e9)))
                except InputError:
                    continue
                lua.append((sonic.xoff_bytes - row.xoff) / row.xoff)
        out.append({"preset": name, "calibrated_on": preset.calibrated_on, "rows": len(vendor),
                    "rows_beyond_cable_cap": skipped, "max_cable_m": preset.max_cable_m,
                    "vendor_min": min(vendor), "vendor_max": max(vendor),
                    "sonic_min": min(lua) if lua else None, "sonic_max": max(lua) if lua else None,
                    "ieee_min": min(ieee), "ieee_max": max(ieee)})
    return out


def _pct(value: object) -> str:
    return "n/a" if value is None else f"{float(value) * 100:+.1f} %"  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--json", type=Path, default=None, help="also write the rows as JSON here")
    args = parser.parse_args()
    table = rows()
    print("| preset | vendor table (sonic-buildimage) | rows | vendor preset xoff error | sonic (Lua) xoff error "
          "| ieee xoff error |")
    print("|---|---|---|---|---|---|")
    for r in table:
        cap = f" (+{r['rows_beyond_cable_cap']} beyond {r['max_cable_m']:g} m refused)" \
            if r["rows_beyond_cable_cap"] else ""
        sku = str(r["calibrated_on"]).removeprefix("sonic-buildimage device/")
        print(f"| {r['preset']} | `{sku}` | {r['rows']}{cap} | {_pct(r['vendor_min'])} .. {_pct(r['vendor_max'])} | "
              f"{_pct(r['sonic_min'])} .. {_pct(r['sonic_max'])} | {_pct(r['ieee_min'])} .. {_pct(r['ieee_max'])} |")
    if args.json is not None:
        atomic_write_json(args.json, {"rows": table})


if __name__ == "__main__":
    main()
