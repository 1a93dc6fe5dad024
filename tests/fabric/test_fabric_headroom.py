"""PFC headroom models: hand-worked upstream arithmetic, published tables, and sweeps over 10G..800G x 1..300 m."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.errors import InputError
from tensorfabric.fabric.headroom import ASICS, PAUSE_QUANTA, compute_headroom, headroom_for_link
from tensorfabric.fabric.spec import load_spec
from tensorfabric.units import parse_rate

from .fabric_core_paths import SPECS

SPEEDS = ["10G", "25G", "40G", "50G", "100G", "200G", "400G", "800G"]
CABLES = [1, 3, 5, 7, 10, 30, 40, 100, 150, 300]
MODELS = ["sonic", "mlx5-nic", "ieee"]


# --- SONiC dynamic model (sonic-swss cfgmgr/buffer_headroom_mellanox.lua), hand-worked -----------------------------

def test_sonic_100g_5m_by_hand() -> None:
    # Spectrum-4: cell 192 B > 2*64, so worst_case_factor = 192/64 = 3; small_packet_pct 100 ->
    #   cell_occupancy = (100 - 100 + 100*3)/100 = 3.
    # peer_response   = 394 quanta * 512 / 8                      = 25 216 B
    # bytes_on_cable  = 2 * 5 * 100 000 * 1e9 / 198 000 000 / 8192 = 616.52 B
    # mac_phy_delay   = 0.8 * 1024                                = 819.2 B
    # propagation     = 9100 + 616.52 + 0 + 819.2 + 25 216         = 35 751.72 B
    # xoff = ceil_1024(1024 + 35 751.72 * 3) = ceil_1024(108 279.2) = 106 * 1024 = 108 544
    # xon  = ceil_1024(19 * 1024) = 19 456; size = 108 544 + 19 456 = 128 000
    r = compute_headroom(100e9, 5, 9100, "sonic", "spectrum4")
    assert (r.xoff_bytes, r.xon_bytes, r.size_bytes) == (108_544, 19_456, 128_000)
    terms = {t.name: t.value for t in r.terms}
    assert terms["peer_response"] == 25_216
    assert terms["bytes_on_cable"] == pytest.approx(616.52, abs=0.01)
    assert terms["cell_occupancy"] == 3


def test_sonic_400g_40m_by_hand() -> None:
    # peer_response = 905 * 64 = 57 920; bytes_on_cable = 2*40*400 000*1e9/1.98e8/8192 = 19 728.9
    # propagation = 9100 + 19 728.9 + 819.2 + 57 920 = 87 568.1; * 3 = 262 704.3; + 1024 = 263 728.3
    # xoff = ceil_1024 -> 258 * 1024 = 264 192; size = 264 192 + 19 456 = 283 648
    r = compute_headroom(400e9, 40, 9100, "sonic", "spectrum4")
    assert (r.xoff_bytes, r.xon_bytes, r.size_bytes) == (264_192, 19_456, 283_648)


def test_sonic_spectrum1_small_cell_by_hand() -> None:
    # Spectrum-1: cell 96 B is not > 128, so worst_case_factor = 2*96/(1+96) = 1.9794; occupancy 1.9794.
    # 100G 5 m: propagation 35 751.72 (as above); * 1.9794 = 70 767.3; + 1024 = 71 791.3 -> 71 * 1024 = 72 704
    r = compute_headroom(100e9, 5, 9100, "sonic", "spectrum1")
    assert r.xoff_bytes == 72_704
    assert r.xon_bytes == 19_456


def test_sonic_eight_lanes_and_shared_pool() -> None:
    # 8-lane ports: pipeline = 2*19 456 - 1024 = 37 888 -> xon 37 888; size = ceil_1024(xoff + xon + port_mtu),
    # the Lua's last rounding.
    r = compute_headroom(800e9, 5, 9100, "sonic", "spectrum4", eight_lanes=True)
    assert r.xon_bytes == 37_888
    assert r.size_bytes == -(-(r.xoff_bytes + 37_888 + 9100) // 1024) * 1024
    # With a shared headroom pool the PG reserves only xon.
    shp = compute_headroom(400e9, 5, 9100, "sonic", "spectrum4", shared_headroom_pool=True)
    assert shp.size_bytes == shp.xon_bytes == 19_456


@pytest.mark.parametrize(("speed", "cable", "xoff", "size"), [
    # lossless-config.md §5.2 table (Spectrum-4/5 constants, port MTU 9100, no SHP)
    (100e9, 5, 108_544, 128_000), (100e9, 40, 121_856, 141_312), (100e9, 100, 144_384, 163_840),
    (200e9, 5, 121_856, 141_312), (200e9, 40, 147_456, 166_912), (200e9, 100, 192_512, 211_968),
    (400e9, 5, 211_968, 231_424), (400e9, 40, 264_192, 283_648), (400e9, 100, 353_280, 372_736),
])
def test_sonic_table(speed: float, cable: float, xoff: int, size: int) -> None:
    r = compute_headroom(speed, cable, 9100, "sonic", "spectrum5")
    assert (r.xoff_bytes, r.size_bytes) == (xoff, size)


def test_sonic_spectrum6_pipeline() -> None:
    assert compute_headroom(400e9, 5, 9100, "sonic", "spectrum6").xon_bytes == 42 * 1024


def test_sonic_unknown_speed_uses_peer_response_time() -> None:
    # 300G has no pause-quanta entry: peer_response falls back to 3.8 KiB = 3891.2 B.
    r = compute_headroom(300e9, 5, 9100, "sonic")
    assert {t.name: t.value for t in r.terms}["peer_response"] == pytest.approx(3891.2)


# --- mlx5 NIC (drivers/net/ethernet/mellanox/mlx5/core/en/port_buffer.c) ------------------------------------------

@pytest.mark.parametrize(("speed", "cable", "mtu", "xoff"), [
    # lossless-config.md §5.3 table
    (100e9, 3, 4200, 42_124), (100e9, 3, 9000, 55_180), (100e9, 7, 4200, 43_024), (100e9, 7, 9000, 56_080),
    (100e9, 30, 4200, 47_924), (100e9, 30, 9000, 60_980), (200e9, 7, 4200, 74_624), (200e9, 7, 9000, 87_680),
    (200e9, 30, 4200, 84_424), (200e9, 30, 9000, 97_480), (400e9, 7, 4200, 137_824), (400e9, 7, 9000, 150_880),
    (400e9, 30, 4200, 157_424), (400e9, 30, 9000, 170_480),
])
def test_mlx5_table(speed: float, cable: float, mtu: int, xoff: int) -> None:
    # e.g. 100G 3 m MTU 4200: 216*3//100 = 6; (301+6)*100 000//1000 = 30 700; 272*4200//100 = 11 424 -> 42 124
    r = compute_headroom(speed, cable, mtu, "mlx5-nic")
    assert r.xoff_bytes == xoff
    # size >= xoff + max(mtu, 9216) + cell (update_xoff_threshold)
    assert r.size_bytes == xoff + max(mtu, 9216) + 128


def test_mlx5_speed_floor_40g() -> None:
    # speeds below 40G are computed as 40G
    slow = compute_headroom(10e9, 7, 9000, "mlx5-nic")
    assert slow.xoff_bytes == compute_headroom(40e9, 7, 9000, "mlx5-nic").xoff_bytes


# --- generic IEEE / Cisco form -----------------------------------------------------------------------------------

def test_ieee_cisco_worked_example() -> None:
    # 100G, 100 m fibre, MTU 9216: 2 MTUs 18 432 + cable 2*100*1e11/(8*1.949e8) = 12 825 + PHY 2*122 880/8 = 30 720
    # + response 394*64 = 25 216 + PAUSE 84 = 87 277 B (the reference's ~87 KB)
    r = compute_headroom(100e9, 100, 9216, "ieee", medium="fiber")
    assert r.xoff_bytes == 87_277
    copper = compute_headroom(100e9, 100, 9216, "ieee", medium="copper")
    assert copper.xoff_bytes < r.xoff_bytes  # twin-ax propagates faster (476 vs 513 ns / 100 m)


# --- sweeps: every model over 10G..800G and 1..300 m ---------------------------------------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_sweep_monotonic(model: str) -> None:
    for speed_text in SPEEDS:
        speed = parse_rate(speed_text)
        previous = 0
        for cable in CABLES:
            r = compute_headroom(speed, cable, 9100, model)
            assert r.xoff_bytes > 0 and r.xon_bytes > 0
            assert r.size_bytes >= r.xoff_bytes
            assert r.xoff_bytes >= previous, (model, speed_text, cable)
            previous = r.xoff_bytes
            if model == "sonic":
                assert r.xoff_bytes % 1024 == 0 and r.xon_bytes % 1024 == 0
            assert any(t.name == "xoff" and t.value == r.xoff_bytes for t in r.terms)
    # faster links need more headroom for the same cable
    for cable in (1, 300):
        values = [compute_headroom(parse_rate(s), cable, 9100, model).xoff_bytes for s in SPEEDS]
        assert values == sorted(values), (model, cable, values)


def test_pause_quanta_table_matches_reference() -> None:
    assert PAUSE_QUANTA[10] == 67 and PAUSE_QUANTA[100] == 394 and PAUSE_QUANTA[800] == 905
    assert [ASICS[f"spectrum{i}"].cell_bytes for i in range(1, 7)] == [96, 144, 144, 192, 192, 256]


def test_headroom_for_link_both_ends() -> None:
    spec = load_spec(SPECS / "reference.yaml")
    link = spec.links[0]  # leaf1:Ethernet0 -- h1:eth0, 400G, 3 m
    both = headroom_for_link(spec, link)
    # A Spectrum-4 switch sizes with the preset calibrated on SN5600's table (the Lua is below it at 400G).
    assert both["leaf1:Ethernet0"].model == "vendor:spectrum4" and both["h1:eth0"].model == "mlx5-nic"
    assert both["leaf1:Ethernet0"].mtu == 9216 and both["h1:eth0"].mtu == 9000
    assert both["leaf1:Ethernet0"].xoff_bytes == compute_headroom(400e9, 3, 9216, "vendor").xoff_bytes


@pytest.mark.parametrize(("args", "word"), [
    ((0.0, 5.0, 9100, "sonic"), "speed"), ((100e9, -5.0, 9100, "sonic"), "cable"),
    ((100e9, 5.0, 10, "sonic"), "mtu"), ((100e9, 5.0, 9100, "bogus"), "model"),
    ((100e9, math.inf, 9100, "ieee"), "cable"),
])
def test_bad_input(args: tuple[float, float, int, str], word: str) -> None:
    with pytest.raises(InputError, match=word):
        compute_headroom(*args)


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True, allow_infinity=True),
       st.integers(min_value=-10, max_value=100_000), st.sampled_from(MODELS + ["x"]))
def test_fuzz_only_input_errors(speed: float, cable: float, mtu: int, model: str) -> None:
    try:
        r = compute_headroom(speed, cable, mtu, model)
    except InputError:
        return
    assert r.xoff_bytes > 0 and r.size_bytes >= r.xoff_bytes


def test_non_nvidia_nic_uses_the_generic_model() -> None:
    import yaml

    from tensorfabric.fabric.headroom import headroom_for_port
    from tensorfabric.fabric.lint import lint
    from tensorfabric.fabric.spec import parse_spec

    data = yaml.safe_load((SPECS / "reference.yaml").read_text())
    data["hosts"][0]["nics"][0]["vendor"] = "broadcom"
    spec = parse_spec(data)
    r = headroom_for_port(spec, "h1:eth0")
    assert r is not None and r.model == "ieee"
    assert r.xoff_bytes == compute_headroom(400e9, 3, 9000, "ieee", medium="copper").xoff_bytes
    assert lint(spec) == []
