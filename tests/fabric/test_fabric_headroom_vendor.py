"""Headroom against the vendors' own tables: table mode answers every row exactly; every formula preset is within
10 % of the vendor xoff on every row of the table it was calibrated on, and never below it.

The fixtures in ``tests/fixtures/fabric/headroom`` re-type the rows of SONiC's ``pg_profile_lookup.ini`` files
(each file's header names the SKU directory), one per ASIC family and buffer mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.cli.main import main
from tensorfabric.errors import InputError, ParseError
from tensorfabric.fabric.headroom import compute_headroom, headroom_from_table
from tensorfabric.fabric.headroom_presets import PRESETS
from tensorfabric.fabric.headroom_table import load_table, parse_table

from .fabric_core_paths import FIXTURES

TABLES = FIXTURES / "headroom"
FILES = sorted(TABLES.glob("*.ini"))


def test_every_preset_has_its_calibration_table() -> None:
    assert {p.stem for p in FILES} == set(PRESETS)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_table_mode_reproduces_every_row(path: Path) -> None:
    table = load_table(path)
    assert len(table.rows) >= 10
    for row in table.rows:
        got = headroom_from_table(table, row.speed_mbps * 1e6, row.cable_m)
        assert (got.xoff_bytes, got.xon_bytes, got.size_bytes) == (row.xoff, row.xon, row.size), row
        assert (got.dynamic_th, got.xon_offset_bytes) == (row.threshold, row.xon_offset), row


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_within_10_percent_of_vendor_xoff_and_never_below(name: str) -> None:
    preset = PRESETS[name]
    table = load_table(TABLES / f"{name}.ini")
    checked = 0
    for row in table.rows:
        speed, shp = row.speed_mbps * 1e6, preset.shared_headroom_pool
        family = name.removesuffix("-shp")
        if row.cable_m > preset.max_cable_m:
            with pytest.raises(InputError, match="--table"):
                compute_headroom(speed, row.cable_m, 9100, "vendor", family, shared_headroom_pool=shp)
            continue
        got = compute_headroom(speed, row.cable_m, 9100, "vendor", family, shared_headroom_pool=shp)
        assert row.xoff <= got.xoff_bytes <= 1.10 * row.xoff, (row, got.xoff_bytes)
        assert got.xon_bytes == row.xon, row
        # The vendor's size convention; never below the vendor's reservation.
        assert row.size <= got.size_bytes <= 1.10 * row.size, (row, got.size_bytes)
        if preset.vendor == "broadcom":
            assert (got.xon_offset_bytes, got.dynamic_th) == (row.xon_offset, row.threshold)
        checked += 1
    assert checked >= 10


def test_conventions() -> None:
    # Spectrum without SHP reserves xoff + xon; with SHP only xon; Trident2 xoff + minimum; Tomahawk the minimum.
    sp = compute_headroom(100e9, 5, 9100, "vendor", "spectrum4")
    assert sp.size_bytes == sp.xoff_bytes + sp.xon_bytes
    shp = compute_headroom(100e9, 5, 9100, "vendor", "spectrum4", shared_headroom_pool=True)
    assert shp.size_bytes == shp.xon_bytes == 19_456
    eight = compute_headroom(800e9, 5, 9100, "vendor", "spectrum4")
    assert eight.xon_bytes == 38_912 and eight.size_bytes == eight.xoff_bytes + 38_912 + 9100
    td2 = compute_headroom(40e9, 40, 9100, "vendor", "trident2")
    assert td2.size_bytes == td2.xoff_bytes + 1248
    th = compute_headroom(100e9, 40, 9100, "vendor", "tomahawk")
    assert th.size_bytes == 1248 and th.xon_offset_bytes == 2288 and th.dynamic_th == -3
    # A bigger MTU than the calibration's 9100 adds two frames; a smaller one never lowers the vendor's value.
    assert compute_headroom(100e9, 40, 9216, "vendor", "tomahawk").xoff_bytes > th.xoff_bytes
    assert compute_headroom(100e9, 40, 4200, "vendor", "tomahawk").xoff_bytes == th.xoff_bytes


@pytest.mark.parametrize(("args", "match"), [
    ((200e9, 5, "tomahawk"), "not calibrated for tomahawk"),
    ((100e9, 301, "spectrum2"), "beyond spectrum2's calibrated 300m"),
    ((100e9, 5, "spectrum6"), "is not one of"),
])
def test_presets_refuse_what_they_were_not_calibrated_for(args: tuple[float, float, str], match: str) -> None:
    speed, cable, asic = args
    with pytest.raises(InputError, match=match):
        compute_headroom(speed, cable, 9100, "vendor", asic)


def test_table_mode_refuses_what_the_table_lacks() -> None:
    table = load_table(TABLES / "spectrum4.ini")
    with pytest.raises(InputError, match=r"7m is not in .*it lists 5m, 40m, 300m"):
        headroom_from_table(table, 100e9, 7)
    with pytest.raises(InputError, match="1.6T is not in|1.60Tbit/s is not in"):
        headroom_from_table(table, 1.6e12, 5)


def test_cli_table_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fabric", "headroom", "--table", str(TABLES / "spectrum4.ini"), "--speed", "100G", "--cable", "5m",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["model"], data["xoff_bytes"], data["xon_bytes"], data["size_bytes"]) == ("table", 113664, 19456,
                                                                                        133120)
    assert main(["fabric", "headroom", "--table", str(TABLES / "tomahawk3.ini"), "--speed", "400G", "--cable",
                 "2000m"]) == 0
    out = capsys.readouterr().out
    assert "xoff 1498092 B" in out and "xon_offset 2540 B" in out
    assert main(["fabric", "headroom", "--table", str(TABLES / "spectrum4.ini"), "--speed", "100G", "--cable",
                 "7m"]) == 2
    assert "it lists 5m, 40m, 300m" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "match"), [
    ("100000 5m 1 2 3\n", "columns"),
    ("100000 5 1 2 3 0\n", "'5m' or '300m'"),
    ("100G 5m 1 2 3 0\n", "speed"),
    ("100000 5m 1 2 -3 0\n", "xoff"),
    ("100000 5m 1 2 3 0\n100000 5m 1 2 3 0\n", "listed twice"),
    ("# only comments\n", "no profile rows"),
])
def test_table_parser_refuses_malformed_lines(text: str, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        parse_table(text)


@settings(max_examples=200)
@given(st.text(max_size=300))
def test_table_parser_raises_only_parse_errors(text: str) -> None:
    try:
        parse_table(text)
    except ParseError:
        pass


def test_table_parser_on_a_10mb_line() -> None:
    with pytest.raises(ParseError):
        parse_table("1" * 10_000_000)
    with pytest.raises(ParseError):
        parse_table("100000 5m " + "9" * 3_000_000 + " 1 1 0")


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["fabric", "headroom", *args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, dict)
    return data


def test_sonic_model_flags(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--model", "sonic", "--speed", "400G", "--cable", "5m"]
    plain = _json(capsys, *base, "--asic", "spectrum4")
    assert (plain["xoff_bytes"], plain["xon_bytes"], plain["size_bytes"]) == (211_968, 19_456, 231_424)
    # 400G on Spectrum-3 runs on 8 x 50G lanes: xon doubles (as SN4700's table has it); --lanes 4 overrides.
    sp3 = _json(capsys, *base, "--asic", "spectrum3")
    assert sp3["xon_bytes"] == 37_888
    assert _json(capsys, *base, "--asic", "spectrum3", "--lanes", "4")["xon_bytes"] == 19_456
    assert _json(capsys, *base, "--asic", "spectrum4", "--lanes", "8")["xon_bytes"] == 37_888
    shp = _json(capsys, *base, "--asic", "spectrum4", "--shared-headroom-pool")
    assert shp["size_bytes"] == shp["xon_bytes"] == 19_456
    # Fewer small packets -> less cell inflation; a bigger lossless MTU adds to xoff.
    fewer = _json(capsys, *base, "--asic", "spectrum4", "--small-packet-pct", "0")
    bigger = _json(capsys, *base, "--asic", "spectrum4", "--lossless-mtu", "4096")
    assert int(fewer["xoff_bytes"]) < 211_968 < int(bigger["xoff_bytes"])  # type: ignore[call-overload]
    # Spectrum-6's lane rate is not in our sources: a 400G port needs --lanes.
    assert main(["fabric", "headroom", *base, "--asic", "spectrum6"]) == 2
    assert "give --lanes 4 or 8" in capsys.readouterr().err


def test_vendor_is_the_default_model_and_shp_flag_selects_its_calibration(capsys: pytest.CaptureFixture[str]) -> None:
    plain = _json(capsys, "--speed", "800G", "--cable", "40m")
    assert plain["model"] == "vendor:spectrum4" and plain["xoff_bytes"] >= 362_496  # SN5600 800G 40m row
    shp = _json(capsys, "--speed", "800G", "--cable", "40m", "--shared-headroom-pool")
    assert shp["model"] == "vendor:spectrum4-shp" and shp["size_bytes"] == shp["xon_bytes"] == 38_912
    assert main(["fabric", "headroom", "--speed", "100G", "--cable", "5m", "--asic", "tomahawk",
                 "--shared-headroom-pool"]) == 2
    assert "has no shared-headroom-pool preset" in capsys.readouterr().err
