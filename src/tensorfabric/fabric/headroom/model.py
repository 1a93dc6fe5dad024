"""PFC headroom: how many bytes a lossless priority group must absorb after it sends XOFF.

Four models, selected by name from :data:`MODELS`, plus table mode (:func:`headroom_from_table`, the vendor's own
``pg_profile_lookup.ini`` answered exactly):

* ``vendor`` -- a preset per switch ASIC family calibrated on the vendor's published tables, with the vendor's
  size/xon convention (:mod:`tensorfabric.fabric.headroom.presets`): within 10 % of every vendor row, never below.

* ``sonic`` -- the SONiC dynamic-buffer model (sonic-swss ``cfgmgr/buffer_headroom_mellanox.lua``): per-speed
  pause quanta, cell occupancy of small packets, cable and gearbox delay, rounding up to 1024 bytes.
* ``mlx5-nic`` -- the ConnectX receive-buffer formula of the Linux mlx5 driver (``en/port_buffer.c``
  ``calculate_xoff``), integer arithmetic as in the kernel.
* ``ieee`` -- the generic IEEE 802.1Qbb / Cisco white-paper sum: two maximum frames, the cable both ways,
  interface delay on both sides, the peer's pause reaction time and the PAUSE frame itself.

Every model returns a :class:`HeadroomResult` whose ``terms`` list each summand, so ``--explain`` can show the
whole sum. Speeds are bits per second, lengths metres, sizes bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tensorfabric import roce
from tensorfabric.errors import InputError
from tensorfabric.registry import Registry

if TYPE_CHECKING:
    from tensorfabric.fabric.headroom.table import HeadroomTable
    from tensorfabric.fabric.spec import FabricSpec, LinkSpec

__all__ = [
    "ASICS",
    "MODELS",
    "PAUSE_QUANTA",
    "AsicBuffer",
    "HeadroomResult",
    "HeadroomTerm",
    "ModelName",
    "asic_named",
    "default_lanes",
    "headroom_from_table",
    "least_switch_headroom",
    "compute_headroom",
    "headroom_for_link",
    "headroom_for_port",
]

ModelName = Literal["vendor", "sonic", "mlx5-nic", "ieee"]

# Pause quanta the peer may still send after a PAUSE arrives, by speed in Gb/s: the recipe's table in roce.py
# (IEEE 802.3 31B.3.7 as tabled in sonic-swss buffer_headroom_mellanox.lua), re-exported for callers of this module.
PAUSE_QUANTA: Mapping[int, int] = roce.PAUSE_QUANTA
_QUANTUM_BITS = roce.PAUSE_QUANTUM_BITS
# The IEEE model falls back to the slowest peer response in the table for a speed the table lacks.
_IEEE_FALLBACK_QUANTA = max(roce.PAUSE_QUANTA.values())


@dataclass(frozen=True, slots=True)
class AsicBuffer:
    """Buffer constants of a switch ASIC as the SONiC model uses them (bytes).

    ``peer_response_bytes`` is only the fallback for speeds without a pause-quanta entry.
    ``shared_buffer_bytes`` is the shared (dynamic) pool a lossless PG draws from before XOFF; 0 = unknown.
    """

    name: str
    cell_bytes: int
    pipeline_latency_bytes: int
    mac_phy_delay_bytes: float
    peer_response_bytes: float = 3.8 * 1024
    shared_buffer_bytes: int = 0


# sonic-buildimage platform/mellanox/asic_table.j2: cell 96/144/144/192/192/256 B, pipeline latency 19 KiB
# (42 KiB on Spectrum-6), MAC/PHY delay 0.8 KiB, peer response 3.8 KiB -- the Lua multiplies each by 1024.
ASICS: Registry[AsicBuffer] = Registry("asic", {
    "spectrum1": AsicBuffer("spectrum1", 96, 19 * 1024, 0.8 * 1024),
    "spectrum2": AsicBuffer("spectrum2", 144, 19 * 1024, 0.8 * 1024),
    "spectrum3": AsicBuffer("spectrum3", 144, 19 * 1024, 0.8 * 1024),
    "spectrum4": AsicBuffer("spectrum4", 192, 19 * 1024, 0.8 * 1024),
    "spectrum5": AsicBuffer("spectrum5", 192, 19 * 1024, 0.8 * 1024),
    "spectrum6": AsicBuffer("spectrum6", 256, 42 * 1024, 0.8 * 1024),
})


# SerDes lane rate (Gb/s) of each Spectrum, as the vendor tables show it: the xon of 400G doubles on Spectrum-2/3
# (8 x 50G lanes) and of 800G on Spectrum-4 (8 x 100G). Spectrum-5/6 lane rates are not in our sources.
LANE_GBPS: Mapping[str, int] = {"spectrum1": 25, "spectrum2": 50, "spectrum3": 50, "spectrum4": 100}


def default_lanes(asic: str, speed_bps: float) -> int:
    """Fewest lanes that carry ``speed_bps`` on ``asic``; refuses where the lane rate is unknown and it matters."""
    gbps = speed_bps / 1e9
    lane = LANE_GBPS.get(asic.lower())
    if lane is None:
        if gbps < 400:
            return 4
        raise InputError(f"lanes: the lane count of a {gbps:g}G port on {asic} is not known; give --lanes 4 or 8")
    return min(8, max(1, math.ceil(gbps / lane)))


def asic_named(name: str) -> AsicBuffer:
    try:
        return ASICS[name.lower()]
    except KeyError:
        raise InputError(f"asic: {name!r} is not one of {', '.join(ASICS)}") from None


@dataclass(frozen=True, slots=True)
class HeadroomTerm:
    """One summand (or factor) of a headroom computation, with how it was obtained."""

    name: str
    value: float
    unit: str
    formula: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "formula": self.formula}


@dataclass(frozen=True, slots=True)
class HeadroomResult:
    """Headroom of one lossless priority group.

    ``xoff_bytes``: room needed above the XOFF point; ``xon_bytes``: room kept below it (hysteresis / pipeline);
    ``size_bytes``: what the PG must reserve. ``terms`` explain the sum.
    """

    model: str
    speed_bps: float
    cable_m: float
    mtu: int
    xoff_bytes: int
    xon_bytes: int
    size_bytes: int
    terms: tuple[HeadroomTerm, ...] = field(default=())
    xon_offset_bytes: int | None = None
    """Broadcom only: the XON offset below the XOFF point."""
    dynamic_th: int | None = None
    """The profile's ``dynamic_th`` exponent where the vendor table or preset sets one."""
    calibrated_on: tuple[str, ...] = ()
    """Vendor presets: the SKU tables (sonic-buildimage device directories) the preset was fitted on."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "model": self.model, "speed_bps": self.speed_bps, "cable_m": self.cable_m, "mtu": self.mtu,
            "xoff_bytes": self.xoff_bytes, "xon_bytes": self.xon_bytes, "size_bytes": self.size_bytes,
            "terms": [t.to_dict() for t in self.terms],
        }
        if self.xon_offset_bytes is not None:
            out["xon_offset_bytes"] = self.xon_offset_bytes
        if self.dynamic_th is not None:
            out["dynamic_th"] = self.dynamic_th
        if self.calibrated_on:
            out["calibrated_on"] = list(self.calibrated_on)
        return out


def _ceil_1024(value: float) -> int:
    return int(math.ceil(value / 1024.0)) * 1024


def _quanta(speed_gbps: int) -> int | None:
    return PAUSE_QUANTA.get(speed_gbps)


def _sonic(speed_bps: float, cable_m: float, mtu: int, asic: AsicBuffer, *, lossless_mtu: int = 1024,
           small_packet_pct: int = 100, gearbox_delay_ns: float = 0.0, eight_lanes: bool = False,
           shared_headroom_pool: bool = False) -> HeadroomResult:
    speed_mbps = speed_bps / 1e6
    cell = asic.cell_bytes
    # The Lua's worst case: a 64-byte packet occupies a whole cell.
    worst = cell / 64 if cell > 2 * 64 else 2 * cell / (1 + cell)
    occupancy = (100 - small_packet_pct + small_packet_pct * worst) / 100
    quanta = _quanta(round(speed_bps / 1e9))
    if quanta is not None:
        peer_response = quanta * _QUANTUM_BITS / 8
        peer_formula = f"{quanta} pause quanta x {_QUANTUM_BITS} bit / 8"
    else:
        peer_response = asic.peer_response_bytes
        peer_formula = "ASIC peer_response_time (no pause-quanta entry for this speed)"
    # Upstream divides by 8*1024 although speed*1e9/1e6 already is bit/s x 1000: kept as upstream does it.
    on_cable = 2 * cable_m * speed_mbps * 1e9 / 198_000_000 / (8 * 1024)
    on_gearbox = speed_mbps * gearbox_delay_ns / (8 * 1024)
    propagation = mtu + on_cable + 2 * on_gearbox + asic.mac_phy_delay_bytes + peer_response
    xoff = _ceil_1024(lossless_mtu + propagation * occupancy)
    pipeline = asic.pipeline_latency_bytes * 2 - 1024 if eight_lanes else asic.pipeline_latency_bytes
    xon = _ceil_1024(pipeline)
    if shared_headroom_pool:
        size = xon
    else:
        size = _ceil_1024(xoff + xon + (mtu if eight_lanes else 0))  # the Lua rounds the sum up once more
    terms = (
        HeadroomTerm("cell_occupancy", occupancy, "factor",
                     f"(100 - {small_packet_pct} + {small_packet_pct} x {worst:.4g}) / 100, cell {cell} B"),
        HeadroomTerm("port_mtu", mtu, "bytes", "frame already in flight at the sender"),
        HeadroomTerm("bytes_on_cable", on_cable, "bytes",
                     f"2 x {cable_m:g} m x {speed_mbps:g} Mb/s x 1e9 / 1.98e8 / 8192"),
        HeadroomTerm("bytes_on_gearbox", 2 * on_gearbox, "bytes",
                     f"2 x {speed_mbps:g} x {gearbox_delay_ns:g} ns / 8192"),
        HeadroomTerm("mac_phy_delay", asic.mac_phy_delay_bytes, "bytes", f"ASIC {asic.name}"),
        HeadroomTerm("peer_response", peer_response, "bytes", peer_formula),
        HeadroomTerm("propagation_delay", propagation, "bytes", "sum of the five terms above"),
        HeadroomTerm("lossless_mtu", lossless_mtu, "bytes", "LOSSLESS_TRAFFIC_PATTERN mtu"),
        HeadroomTerm("xoff", xoff, "bytes", "ceil_1024(lossless_mtu + propagation_delay x cell_occupancy)"),
        HeadroomTerm("xon", xon, "bytes",
                     "ceil_1024(pipeline_latency)" + (" x2 - 1024 (8 lanes)" if eight_lanes else "")),
        HeadroomTerm("size", size, "bytes", "xon (shared headroom pool)" if shared_headroom_pool
                     else "xoff + xon" + (" + port_mtu (8 lanes)" if eight_lanes else "")),
    )
    return HeadroomResult("sonic", speed_bps, cable_m, mtu, xoff, xon, size, terms)


def _mlx5(speed_bps: float, cable_m: float, mtu: int, asic: AsicBuffer, *, cell_bytes: int = 128,
          **_: Any) -> HeadroomResult:
    # calculate_xoff(): integer arithmetic, speed floored at 40 Gb/s, cable in whole metres.
    speed_mbps = max(int(speed_bps // 1_000_000), 40_000)
    cable = int(cable_m)
    delay = 301 + 216 * cable // 100
    on_wire = delay * speed_mbps // 1000
    frame = 272 * mtu // 100
    xoff = on_wire + frame
    # update_xoff_threshold(): a lossless buffer must hold xoff + max_mtu + one cell.
    max_mtu = max(mtu, 9216)
    xon = max_mtu + cell_bytes
    size = xoff + xon
    terms = (
        HeadroomTerm("delay_factor", delay, "ns-ish", f"301 + 216 x {cable} m / 100 (integer)"),
        HeadroomTerm("on_wire", on_wire, "bytes", f"delay_factor x {speed_mbps} Mb/s / 1000 (speed floored at 40G)"),
        HeadroomTerm("mtu_term", frame, "bytes", f"272 x {mtu} / 100"),
        HeadroomTerm("xoff", xoff, "bytes", "on_wire + mtu_term (port_buffer.c calculate_xoff)"),
        HeadroomTerm("xon", xon, "bytes", f"max_mtu {max_mtu} + cell {cell_bytes} (room below the XOFF threshold)"),
        HeadroomTerm("size", size, "bytes", "xoff + max_mtu + cell (smallest lossless buffer mlx5 accepts)"),
    )
    return HeadroomResult("mlx5-nic", speed_bps, cable_m, mtu, xoff, xon, size, terms)


# Interface/PHY delay upper bounds per side, bit times (Cisco derivation summarised in lossless-config.md §5.1).
_PHY_BIT_TIMES: Mapping[int, int] = {10: 8192, 25: 6144, 40: 24576, 100: 122880}
# Propagation speed: Cisco WP, 476 ns / 100 m in twin-ax copper, 513 ns / 100 m in single-mode fibre.
_VELOCITY_M_PER_S: Mapping[str, float] = {"copper": 100 / 476e-9, "fiber": 100 / 513e-9}
_PAUSE_FRAME_BYTES = 84  # 64 B PAUSE + 8 B preamble + 12 B inter-frame gap = 672 bit times


def _phy_delay_s(speed_gbps: float) -> tuple[float, str]:
    known = sorted(_PHY_BIT_TIMES)
    below = [s for s in known if s <= speed_gbps]
    ref = below[-1] if below else known[0]
    seconds = _PHY_BIT_TIMES[ref] / (ref * 1e9)
    if ref == speed_gbps:
        return seconds, f"{_PHY_BIT_TIMES[ref]} bit times at {ref}G"
    # No published bound above 100G: keep the same delay in time as the nearest tabled speed.
    return seconds, f"{_PHY_BIT_TIMES[ref]} bit times at {ref}G held constant in time"


def _ieee(speed_bps: float, cable_m: float, mtu: int, asic: AsicBuffer, *, medium: str = "fiber",
          peer_mtu: int | None = None, **_: Any) -> HeadroomResult:
    if medium not in _VELOCITY_M_PER_S:
        raise InputError(f"medium: {medium!r} is not one of {', '.join(_VELOCITY_M_PER_S)}")
    sender_mtu = mtu if peer_mtu is None else peer_mtu
    velocity = _VELOCITY_M_PER_S[medium]
    on_cable = 2 * cable_m * speed_bps / (8 * velocity)
    phy_s, phy_formula = _phy_delay_s(speed_bps / 1e9)
    phy = 2 * phy_s * speed_bps / 8
    found = _quanta(round(speed_bps / 1e9))
    quanta = found if found is not None else _IEEE_FALLBACK_QUANTA
    response = quanta * _QUANTUM_BITS / 8
    total = mtu + sender_mtu + on_cable + phy + response + _PAUSE_FRAME_BYTES
    xoff = int(math.ceil(total))
    xon = mtu
    terms = (
        HeadroomTerm("receiver_mtu", mtu, "bytes", "frame the receiver was sending in front of its PAUSE"),
        HeadroomTerm("sender_mtu", sender_mtu, "bytes", "frame the sender had already started"),
        HeadroomTerm("bytes_on_cable", on_cable, "bytes",
                     f"2 x {cable_m:g} m x rate / (8 x {velocity:.4g} m/s, {medium})"),
        HeadroomTerm("interface_delay", phy, "bytes", f"2 sides x {phy_formula}"),
        HeadroomTerm("pause_response", response, "bytes",
                     f"{quanta} pause quanta x {_QUANTUM_BITS} bit / 8"),
        HeadroomTerm("pause_frame", _PAUSE_FRAME_BYTES, "bytes", "672 bit times"),
        HeadroomTerm("xoff", xoff, "bytes", "ceil(sum of the terms above)"),
        HeadroomTerm("xon", xon, "bytes", "one MTU of hysteresis below the XOFF point"),
        HeadroomTerm("size", xoff + xon, "bytes", "xoff + xon"),
    )
    return HeadroomResult("ieee", speed_bps, cable_m, mtu, xoff, xon, xoff + xon, terms)


def _vendor(speed_bps: float, cable_m: float, mtu: int, asic: AsicBuffer | str, *,
            shared_headroom_pool: bool = False, lanes: int | None = None, eight_lanes: bool | None = None,
            **_: Any) -> HeadroomResult:
    from tensorfabric.fabric.headroom.presets import preset_headroom, preset_named

    preset = preset_named(asic if isinstance(asic, str) else asic.name, shared_headroom_pool=shared_headroom_pool)
    if lanes is None and eight_lanes:
        lanes = 8
    got = preset_headroom(preset, speed_bps, cable_m, mtu, lanes=lanes)
    gbps = round(speed_bps / 1e9)
    size_formula = {"xoff+xon": "xoff + xon" + (" + port_mtu (8 lanes)" if got.lanes8 else ""),
                    "xon": "xon (shared headroom pool: xoff is drawn from the pool)",
                    "xoff+minimum": f"xoff + guaranteed minimum {preset.minimum}",
                    "minimum": f"guaranteed minimum {preset.minimum} (xoff is drawn from the headroom pool)"}
    terms = (
        HeadroomTerm("fixed", got.fixed, "bytes", f"{preset.name} at {gbps}G: frames in flight, MAC/PHY, pause "
                     f"response, cell inflation (fitted on {preset.calibrated_on})"),
        HeadroomTerm("bytes_on_cable", got.on_cable, "bytes",
                     f"{preset.per_gbps_m:g} B/(Gb/s.m) x {gbps} x {cable_m:g} m"),
        HeadroomTerm("mtu_above_9100", got.mtu_extra, "bytes", "2 x max(0, mtu - 9100): calibrated at MTU 9100"),
        HeadroomTerm("xoff", got.xoff, "bytes",
                     f"max({preset.floor}, ceil_{preset.cell_bytes}(sum of the terms above))"),
        HeadroomTerm("xon", got.xon, "bytes", "vendor xon" + (" (8-lane port: doubled)" if got.lanes8 else "")),
        HeadroomTerm("size", got.size, "bytes", size_formula[preset.size_rule]),
    )
    return HeadroomResult(f"vendor:{preset.name}", speed_bps, cable_m, mtu, got.xoff, got.xon, got.size, terms,
                          preset.xon_offset, preset.threshold, tuple(str(t) for t in preset.tables))


_MAX_SPEED_BPS = 1e14
_MAX_CABLE_M = 100_000.0
MODELS: Registry[Callable[..., HeadroomResult]] = Registry("headroom model", {"vendor": _vendor, "sonic": _sonic,
                                                                               "mlx5-nic": _mlx5, "ieee": _ieee})


def compute_headroom(speed_bps: float, cable_m: float, mtu: int, model: str = "sonic",
                     asic: AsicBuffer | str = "spectrum4", **options: Any) -> HeadroomResult:
    """Headroom for one lossless PG at ``speed_bps`` over ``cable_m`` metres with frames up to ``mtu`` bytes.

    ``options`` go to the model: sonic takes ``lossless_mtu``, ``small_packet_pct``, ``gearbox_delay_ns``,
    ``eight_lanes``, ``shared_headroom_pool``; mlx5-nic ``cell_bytes``; ieee ``medium`` and ``peer_mtu``.
    """
    if model not in MODELS:
        raise InputError(f"model: {model!r} is not one of {', '.join(MODELS)}")
    # Bounds far beyond any real port or PFC span, so every result stays a finite integer.
    if not 0 < speed_bps <= _MAX_SPEED_BPS:
        raise InputError(f"speed: {speed_bps!r} must be a positive rate up to 100T, such as '400G'")
    if not 0 < cable_m <= _MAX_CABLE_M:
        raise InputError(f"cable: {cable_m!r} must be a positive length up to 100km, such as '5m'")
    if not 68 <= mtu <= 65536:
        raise InputError(f"mtu: {mtu!r} must be between 68 and 65536 bytes, e.g. 9100")
    if model == "vendor":
        return _vendor(speed_bps, cable_m, mtu, asic, **options)
    buffer = asic_named(asic) if isinstance(asic, str) else asic
    return MODELS[model](speed_bps, cable_m, mtu, buffer, **options)


def headroom_from_table(table: HeadroomTable, speed_bps: float, cable_m: float, mtu: int = 9100, *,
                        round_up: bool = False) -> HeadroomResult:
    """Table mode: the vendor's row for exactly this speed and cable, as SONiC's traditional buffer model uses it
    (``round_up``: the next longer cable row when the table has no row for ``cable_m``)."""
    from tensorfabric.fabric.headroom.table import lookup

    row = lookup(table, speed_bps, cable_m, round_up=round_up)
    where = f"{table.source} line {row.line} ({row.speed_mbps} Mb/s, {row.cable_text})"
    terms = (HeadroomTerm("xoff", row.xoff, "bytes", where), HeadroomTerm("xon", row.xon, "bytes", where),
             HeadroomTerm("size", row.size, "bytes", where))
    return HeadroomResult("table", speed_bps, cable_m, mtu, row.xoff, row.xon, row.size, terms, row.xon_offset,
                          row.threshold)


def least_switch_headroom(speed_bps: float, cable_m: float, mtu: int) -> HeadroomResult:
    """The smallest headroom any known switch ASIC needs here: for a deployed config whose ASIC is unknown, only
    what no ASIC could get away with is too small. Each ASIC counts with its vendor preset where one is calibrated
    for this speed and cable, else with the SONiC (Lua) formula (Spectrum-5 without a shared headroom pool)."""
    from tensorfabric.fabric.headroom.presets import PRESETS

    candidates: list[HeadroomResult] = []
    for name in PRESETS:
        try:
            candidates.append(compute_headroom(speed_bps, cable_m, mtu, "vendor", name))
        except InputError:
            continue  # not calibrated for this speed or cable
    candidates += [compute_headroom(speed_bps, cable_m, mtu, "sonic", name) for name in ASICS
                   if name not in PRESETS]
    return min(candidates, key=lambda r: r.xoff_bytes)


# NIC vendor -> headroom model; vendors without a published receive-buffer formula get the generic sum.
NIC_MODELS: Registry[str] = Registry("NIC vendor", {"nvidia": "mlx5-nic", "mellanox": "mlx5-nic"})


def headroom_for_port(spec: FabricSpec, endpoint: str, *, configured: bool = True) -> HeadroomResult | None:
    """Headroom of the lossless PG behind ``endpoint`` (``device:port``), or ``None`` when it is not cabled.

    ``configured=True`` uses the cable length the device is told (what a renderer writes); ``False`` uses the
    real cable length of the link (what the port needs).
    """
    link = spec.link_at(endpoint)
    if link is None:
        return None
    speed = spec.link_speed(link) or 0.0
    cable = (spec.configured_cable_m(endpoint) if configured else None) or link.cable_length_m
    mtu = spec.port_mtu(endpoint)
    device, _, port = endpoint.partition(":")
    switch = spec.switch(device)
    if switch is not None:
        asic = switch.asic
        mode = asic.headroom_mode
        if mode == "table" and asic.lookup_table is not None:
            return headroom_from_table(asic.lookup_table, speed, cable, mtu, round_up=True)
        if mode == "vendor":
            return compute_headroom(speed, cable, mtu, "vendor", asic.model,
                                    shared_headroom_pool=asic.shared_headroom_pool,
                                    lanes=8 if asic.eight_lanes else None)
        return compute_headroom(speed, cable, mtu, "sonic", asic.buffer(), eight_lanes=asic.eight_lanes,
                                shared_headroom_pool=asic.shared_headroom_pool)
    host = spec.host(device)
    nic = host.nic(port) if host is not None else None
    vendor = nic.vendor.lower() if nic is not None else ""
    model = NIC_MODELS.get(vendor) if vendor in NIC_MODELS else "ieee"
    if model == "ieee":
        return compute_headroom(speed, cable, mtu, model, medium=link.medium)
    return compute_headroom(speed, cable, mtu, model)


def headroom_for_link(spec: FabricSpec, link: LinkSpec, *, configured: bool = True) -> dict[str, HeadroomResult]:
    """Headroom at both ends of ``link``, keyed by endpoint text (``leaf1:Ethernet0``)."""
    out: dict[str, HeadroomResult] = {}
    for end in (link.a, link.b):
        result = headroom_for_port(spec, end, configured=configured)
        if result is not None:
            out[end] = result
    return out
