"""Synthetic, labelled counter traces: a healthy fabric with a diurnal load, and one scenario per detector.

The fabric is small and fixed: hosts h0-h3 (NIC mlx5_0 port 1) on leaf0/leaf1, both leaves on spine0, and a
leaf0-leaf1 peer link that lets a three-switch cycle form. Priority 3 is the lossless class. Each poll emits
every counter as the device would (cumulative, base units), so traces go through exactly the path live
samples take. A scenario switches on at ``onset`` seconds; before that the trace is the healthy one.

Used by the tests (each detector must fire on its scenario within two polls and stay silent on a healthy day)
and by ``docs/telemetry.md`` to show real monitor output without hardware.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from tensorfabric import roce
from tensorfabric.samples import Sample
from tensorfabric.telemetry.metrics import METRICS
from tensorfabric.topology import Endpoint

__all__ = ["LINKS", "SCENARIOS", "Scenario", "diurnal_load", "trace"]

DAY_S = 86400.0
LINK_BPS = 100e9
PRIO = str(roce.LOSSLESS_PRIORITY)

HOSTS = ("h0", "h1", "h2", "h3")
# switch ports: (switch, port, peer device, peer port)
SWITCH_PORTS = (
    ("leaf0", "Ethernet0", "h0", "1"), ("leaf0", "Ethernet4", "h1", "1"), ("leaf0", "Ethernet8", "spine0", "Ethernet0"),
    ("leaf0", "Ethernet12", "leaf1", "Ethernet12"),
    ("leaf1", "Ethernet0", "h2", "1"), ("leaf1", "Ethernet4", "h3", "1"), ("leaf1", "Ethernet8", "spine0", "Ethernet4"),
    ("leaf1", "Ethernet12", "leaf0", "Ethernet12"),
    ("spine0", "Ethernet0", "leaf0", "Ethernet8"), ("spine0", "Ethernet4", "leaf1", "Ethernet8"),
)
LINKS: tuple[tuple[Endpoint, Endpoint], ...] = tuple(
    (Endpoint(sw, port), Endpoint(peer, peer_port)) for sw, port, peer, peer_port in SWITCH_PORTS if sw < peer)


@dataclass(frozen=True, slots=True)
class Scenario:
    """What a scenario changes, per port: overrides of the per-second behaviour below."""

    name: str
    detector: str
    description: str


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("healthy", "", "diurnal load, short pauses, ECN working, no loss"),
    Scenario("storm", "pause-storm", "h0's NIC sends pause continuously; its storm prevention fires"),
    Scenario("storm-tree", "storm-origin", "h0 pauses leaf0 continuously; the pause reaches h1 and spine0"),
    Scenario("victim", "continuous-pause", "h1 is paused by leaf0 all the time, no XON, nothing sent"),
    Scenario("watchdog", "pfc-watchdog", "leaf0 Ethernet0 queue 3 declared stormed by the PFC watchdog"),
    Scenario("watchdog-flap", "pfc-watchdog", "the watchdog restores and re-detects six times per poll"),
    Scenario("spreading", "congestion-spreading", "leaf and spine ports relay pause (30 % both ways)"),
    Scenario("deadlock", "deadlock", "leaf0 -> spine0 -> leaf1 -> leaf0 all paused, queues stuck"),
    Scenario("loss", "lossless-loss", "h2 drops lossless packets for lack of host buffer"),
    Scenario("ecn-ignored", "ecn-misconfig", "h3 receives CNPs on QPs without congestion control"),
    Scenario("ecn-no-cnp", "ecn-misconfig", "h3 sees CE marks but sends no CNPs"),
    Scenario("pause-without-ecn", "ecn-misconfig", "h3 is paused 20 % of the time and sees no ECN marks"),
    Scenario("capacity", "capacity-trend", "paused share grows on every lossless port, day after day"),
    Scenario("capacity-hot", "capacity-trend", "paused share grows on h0 only (placement problem)"),
    Scenario("link", "link-health", "h2's link has uncorrected symbol errors and flaps"),
)}


def diurnal_load(t: float) -> float:
    """Offered load 0.2-0.8 of line rate, peaking mid-afternoon."""
    return 0.5 + 0.3 * math.sin(2 * math.pi * (t / DAY_S - 0.375))


class _Counters:
    def __init__(self) -> None:
        self.values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}

    def add(self, metric: str, labels: dict[str, str], amount: float) -> None:
        key = (metric, tuple(sorted(labels.items())))
        self.values[key] = self.values.get(key, 0.0) + max(amount, 0.0)

    def set(self, metric: str, labels: dict[str, str], value: float) -> None:
        self.values[(metric, tuple(sorted(labels.items())))] = value


def _growth(name: str, t: float, onset: float, host: str) -> float:
    """Extra paused share from a capacity scenario: +1 % of time per day since onset."""
    if name == "capacity" or (name == "capacity-hot" and host in ("h0", "leaf0:Ethernet0")):
        return max(0.0, t - onset) / DAY_S * 0.01
    return 0.0


def trace(scenario: str = "healthy", *, polls: int = 40, interval_s: float = 15.0, onset: float | None = None,
          start: float = 0.0, seed: int = 0, metrics: Collection[str] = ()) -> Iterator[list[Sample]]:
    """Yield one list of Samples per poll (only ``metrics`` when given). ``onset`` defaults to mid-trace."""
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario {scenario!r} is not one of {', '.join(SCENARIOS)}")
    rng = random.Random(seed)
    on_at = start + (polls // 2) * interval_s if onset is None else onset
    counters = _Counters()
    for index in range(polls):
        t = start + index * interval_s
        active = scenario if t > on_at else "healthy"
        if index:
            _advance(counters, active, scenario, t, interval_s, on_at, rng)
        else:
            _advance(counters, "healthy", scenario, t, 0.0, on_at, rng)
        yield [Sample(t, metric, METRICS[metric].kind, value, dict(labels), f"synth:{scenario}")
               for (metric, labels), value in counters.values.items() if not metrics or metric in metrics]


def _advance(c: _Counters, active: str, name: str, t: float, dt: float, onset: float, rng: random.Random) -> None:
    load = diurnal_load(t) * (1 + 0.05 * rng.uniform(-1, 1))
    for host in HOSTS:
        nic = {"host": host, "device": "mlx5_0", "port": "1"}
        prio = {**nic, "priority": PRIO}
        rx_pause = 0.002 * load + _growth(name, t, onset, host)
        tx_pause = 0.001 * load
        marks_per_s = 2000.0 * load
        cnp_ratio, ignored, sent_pkts, transitions = 0.5, 0.0, LINK_BPS * load / 8 / 4096, 50.0 * load
        discards, uncorrected, downs, storm_err = 0.0, 0.0, 0.0, 0.0
        if active == "storm" and host == "h0":
            tx_pause, rx_pause, storm_err = 1.0, 0.0, 1.0
        if active == "storm-tree" and host == "h0":
            tx_pause, rx_pause = 1.0, 0.0
        if active in ("storm-tree", "victim") and host == "h1":
            rx_pause, transitions, sent_pkts = 1.0, 0.0, 0.0
        if active == "loss" and host == "h2":
            discards = 5.0 / dt if dt else 0.0
        if active == "link" and host == "h2":
            uncorrected, downs = 3.0 / dt if dt else 0.0, 1.0 / dt if dt else 0.0
        if host == "h3":
            if active == "ecn-ignored":
                ignored = 100.0
            if active == "ecn-no-cnp":
                cnp_ratio = 0.0
            if active == "pause-without-ecn":
                rx_pause, marks_per_s = 0.2, 0.0
        for direction, share in (("rx", rx_pause), ("tx", tx_pause)):
            labels = {**prio, "direction": direction}
            c.add("roce_pfc_paused_seconds_total", labels, min(share, 1.0) * dt)
            c.add("roce_pfc_pause_frames_total", labels, min(share, 1.0) * dt / 335.5e-6)
        c.add("roce_pfc_pause_transitions_total", {**prio, "direction": "rx"}, transitions * dt)
        c.add("roce_packets_total", {**prio, "direction": "tx"}, sent_pkts * dt)
        c.add("roce_bytes_total", {**prio, "direction": "tx"}, sent_pkts * 4096 * dt)
        c.add("roce_ecn_marked_packets_total", nic, marks_per_s * dt)
        c.add("roce_cnp_sent_total", nic, marks_per_s * cnp_ratio * dt)
        c.add("roce_cnp_handled_total", nic, marks_per_s * 0.5 * dt)
        c.add("roce_cnp_ignored_total", nic, ignored * dt)
        c.add("roce_discards_total", {**prio, "direction": "rx", "reason": "host_buffer"}, discards * dt)
        c.add("roce_retransmissions_total", {**nic, "kind": "out_of_sequence"}, 0.05 * dt * rng.random())
        c.add("roce_pause_storm_error_events_total", nic, storm_err * dt / 15.0)
        c.add("roce_pause_storm_warning_events_total", nic, storm_err * dt / 15.0)
        bits = LINK_BPS * load * dt
        c.add("roce_phy_received_bit_count_total", nic, bits)
        c.add("roce_phy_corrected_bit_errors_total", nic, bits * 1e-9)
        c.add("roce_phy_uncorrected_symbols_total", nic, uncorrected * dt)
        c.add("roce_link_down_events_total", nic, downs * dt)
    _switches(c, active, name, t, dt, onset, load)


def _switches(c: _Counters, active: str, name: str, t: float, dt: float, onset: float, load: float) -> None:
    cycle_rx = {("leaf0", "Ethernet8"), ("spine0", "Ethernet4"), ("leaf1", "Ethernet12")}
    cycle_tx = {("spine0", "Ethernet0"), ("leaf1", "Ethernet8"), ("leaf0", "Ethernet12")}
    for switch, port, _, _ in SWITCH_PORTS:
        base = {"host": switch, "device": switch, "port": port}
        queue = {**base, "queue": PRIO}
        rx_pause, tx_pause = 0.001 * load + _growth(name, t, onset, f"{switch}:{port}"), 0.002 * load
        dequeue, occupancy, detected, restored, stormed = LINK_BPS * load / 8 / 4096, 4096.0 * load, 0.0, 0.0, 0.0
        if active in ("storm", "storm-tree") and (switch, port) == ("leaf0", "Ethernet0"):
            rx_pause, dequeue, occupancy = 1.0, 0.0, 1e6
        if active == "storm-tree" and (switch, port) == ("spine0", "Ethernet0"):
            rx_pause = 0.8
        if active == "storm-tree" and switch == "leaf0" and port != "Ethernet0":
            tx_pause = 0.8
        if active == "spreading" and port in ("Ethernet8", "Ethernet12"):
            rx_pause = tx_pause = 0.3
        if active == "deadlock":
            if (switch, port) in cycle_rx:
                rx_pause, dequeue, occupancy = 1.0, 0.0, 2e6
            if (switch, port) in cycle_tx:
                tx_pause = 1.0
        if (switch, port) == ("leaf0", "Ethernet0") and active in ("watchdog", "watchdog-flap"):
            detected, stormed = (1.0, 1.0) if active == "watchdog" else (6.0, 0.0)
            restored = 6.0 if active == "watchdog-flap" else 0.0
        for direction, share in (("rx", rx_pause), ("tx", tx_pause)):
            labels = {**base, "priority": PRIO, "direction": direction}
            c.add("roce_pfc_paused_seconds_total", labels, min(share, 1.0) * dt)
        c.add("roce_queue_packets_total", queue, dequeue * dt)
        c.set("roce_queue_occupancy_bytes", queue, occupancy)
        c.add("roce_pfcwd_storms_detected_total", queue, detected if dt else 0.0)
        c.add("roce_pfcwd_storms_restored_total", queue, restored if dt else 0.0)
        c.set("roce_pfcwd_stormed", queue, stormed)
