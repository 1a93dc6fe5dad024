"""A spec points a switch at its own pg_profile_lookup.ini (table mode) or at a vendor preset (Broadcom)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tensorfabric.cli.main import main
from tensorfabric.errors import InputError
from tensorfabric.fabric.headroom import headroom_for_port
from tensorfabric.fabric.renderers import render_fabric
from tensorfabric.fabric.spec import load_spec

from .fabric_core_paths import FIXTURES, SPECS


def _spec(tmp_path: Path, asic: object) -> Path:
    data = yaml.safe_load((SPECS / "reference.yaml").read_text())
    data["switches"][0]["asic"] = asic  # leaf1 (SONiC): h1 and h2 on 3 m, the spines on 30 m
    (tmp_path / "tables").mkdir()
    shutil.copy(FIXTURES / "headroom" / "spectrum4.ini", tmp_path / "tables" / "pg_profile_lookup.ini")
    path = tmp_path / "fabric.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_table_mode_from_the_spec_rounds_the_cable_up_to_a_row(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, {"model": "spectrum4", "table": "tables/pg_profile_lookup.ini"}))
    assert spec.switches[0].asic.headroom_mode == "table"
    host_port = headroom_for_port(spec, "leaf1:Ethernet0")  # 400G, 3 m -> the 5m row
    assert host_port is not None
    assert (host_port.model, host_port.xoff_bytes, host_port.xon_bytes, host_port.size_bytes) == (
        "table", 231424, 19456, 250880)
    uplink = headroom_for_port(spec, "leaf1:Ethernet8")  # 400G, 30 m -> the 40m row
    assert uplink is not None and (uplink.xoff_bytes, uplink.size_bytes) == (283648, 303104)
    leaf1 = next(r for r in render_fabric(spec) if r.device == "leaf1")
    profiles = json.loads(leaf1.text)["BUFFER_PROFILE"]
    assert {(p["xoff"], p["size"]) for p in profiles.values()} == {("231424", "250880"), ("283648", "303104")}


def test_broadcom_switch_uses_its_vendor_preset(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, "tomahawk3"))
    assert spec.switches[0].asic.headroom_mode == "vendor"
    room = headroom_for_port(spec, "leaf1:Ethernet0")  # 400G, 3 m, switch MTU 9216: +2 x 116 over the calibration
    assert room is not None and room.model == "vendor:tomahawk3"
    assert room.xoff_bytes == 177_800 and room.size_bytes == 2540 and room.xon_offset_bytes == 2540
    leaf1 = next(r for r in render_fabric(spec) if r.device == "leaf1")
    profile = json.loads(leaf1.text)["BUFFER_PROFILE"]["pg_lossless_400000_3m_profile"]
    assert profile == {"pool": "ingress_lossless_pool", "xon": "2540", "xoff": "177800", "size": "2540",
                       "dynamic_th": "-2", "xon_offset": "2540"}
    data = yaml.safe_load((SPECS / "reference.yaml").read_text())
    data["switches"][0]["asic"] = {"model": "tomahawk3", "headroom": "sonic"}
    (tmp_path / "sonic.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="no SONiC .Lua. constants"):
        headroom_for_port(load_spec(tmp_path / "sonic.yaml"), "leaf1:Ethernet0")


def test_missing_table_is_exit_2_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _spec(tmp_path, {"model": "spectrum4", "table": "tables/nope.ini"})
    assert main(["fabric", "lint", "--fabric", str(path)]) == 2
    err = capsys.readouterr().err
    assert "switches[0].asic" in err and "nope.ini" in err and "does not exist" in err and err.count("\n") == 1


def test_spec_eight_lanes_and_a_sku_group_preset_reach_the_vendor_model(tmp_path: Path) -> None:
    # asic.eight_lanes on Spectrum-4 (400G as 8 x 50G) doubles the vendor xon; a SKU group's preset is a model name.
    eight = load_spec(_spec(tmp_path, {"model": "spectrum4", "eight_lanes": True}))
    room = headroom_for_port(eight, "leaf1:Ethernet0")  # 400G, 3 m, MTU 9216
    assert room is not None and room.model == "vendor:spectrum4" and room.xon_bytes == 38912
    assert room.size_bytes == room.xoff_bytes + 38912 + 9216
    data = yaml.safe_load((SPECS / "reference.yaml").read_text())
    data["switches"][0]["asic"] = "spectrum3-shp-o8c48"
    (tmp_path / "sku.yaml").write_text(yaml.safe_dump(data))
    sku = headroom_for_port(load_spec(tmp_path / "sku.yaml"), "leaf1:Ethernet0")
    assert sku is not None and sku.model == "vendor:spectrum3-shp-o8c48"
    assert sku.xon_bytes == sku.size_bytes == 38912 and "Mellanox-SN4280-O8C40" in " ".join(sku.calibrated_on)
