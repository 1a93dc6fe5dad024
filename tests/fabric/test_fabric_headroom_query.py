"""``fabric headroom``'s two questions as library calls: each model gets only the options it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tensorfabric.fabric.headroom import HeadroomQuery, answer, compute_headroom, model_options, spec_headroom
from tensorfabric.fabric.spec import load_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("query, options", [
    (HeadroomQuery(400e9, 5.0, model="ieee", medium="copper"), {"medium": "copper"}),
    (HeadroomQuery(400e9, 5.0, model="vendor", shared_headroom_pool=True, lanes=8),
     {"shared_headroom_pool": True, "lanes": 8}),
    (HeadroomQuery(400e9, 5.0, model="sonic", asic="spectrum3"),
     {"shared_headroom_pool": False, "lossless_mtu": 1024, "small_packet_pct": 100, "eight_lanes": True}),
    (HeadroomQuery(400e9, 5.0, model="sonic", asic="spectrum4"),
     {"shared_headroom_pool": False, "lossless_mtu": 1024, "small_packet_pct": 100, "eight_lanes": False}),
    (HeadroomQuery(100e9, 5.0, model="mlx5-nic"), {}),
])
def test_each_model_gets_its_own_options(query: HeadroomQuery, options: dict[str, object]) -> None:
    assert model_options(query) == options
    expected = compute_headroom(query.speed_bps, query.cable_m, query.mtu, query.model, query.asic, **options)
    assert answer(query) == expected


def test_spec_headroom_rows_round_trip_through_json() -> None:
    spec = load_spec(EXAMPLES / "fabric.yaml")
    ports = spec_headroom(spec)
    assert ports and all(p.peer is not None for p in ports)
    rows = json.loads(json.dumps([p.to_dict() for p in ports]))
    assert rows[0]["port"] == ports[0].port and rows[0]["needed_xoff_bytes"] == ports[0].needed.xoff_bytes
    assert set(rows[0]) == {"port", "peer", "model", "speed_bps", "cable_m", "mtu", "xoff_bytes", "xon_bytes",
                            "size_bytes", "needed_xoff_bytes"}


def test_renderer_first_line_names_the_model_and_link(capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main

    assert main(["fabric", "headroom", "--speed", "400G", "--cable", "5m", "--model", "sonic",
                 "--asic", "spectrum3"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "sonic model, spectrum3, 400G, 5 m, MTU 9100"


def test_asic_names_add_the_preset_only_families_after_the_modelled_ones() -> None:
    from tensorfabric.fabric.headroom import ASICS, asic_names

    names = asic_names(tuple(ASICS))
    assert names[:len(ASICS)] == tuple(ASICS)
    assert "tomahawk" in names and not any(n.endswith("-shp") for n in names)
    assert len(set(names)) == len(names)
