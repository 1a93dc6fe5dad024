"""PAUSE/XON at their sub-step instant (sim/pausetiming.py): where in the step the counter crossed, the physical
lag, one packet time between XON crossings through one egress, and time owed across a switch."""

from __future__ import annotations

import numpy as np
import pytest

from tensorfabric.sim import EcnConfig, Flow, SimConfig, compile_network, single_switch
from tensorfabric.sim.network import Network
from tensorfabric.sim.pausetiming import PauseTiming
from tensorfabric.sim.pfc import PfcConfig

RATE = 100e9
MTU, HEADER = 4096, 64
XOFF = 15 * MTU


def _setup(cable_m: float, step_s: float, response_s: float) -> tuple[Network, PauseTiming, list[int]]:
    cfg = SimConfig(step_s=step_s, duration_s=1e-3, dcqcn="none", ecn=EcnConfig(enabled=False), mtu=MTU,
                    header_bytes=HEADER, pfc=PfcConfig(xoff_bytes=XOFF, xon_offset_bytes=3 * MTU,
                                                       response_s=response_s))
    net = compile_network(single_switch(4, RATE, cable_m=cable_m), [Flow(f"h{i}", "h0", 1e6) for i in (1, 2, 3)],
                          cfg)
    ports = sorted({int(e) for e in net.seg_in})  # the three NIC -> switch ports, all feeding sw0 -> h0
    return net, PauseTiming(net, cfg, step_s), ports


def _book(timing: PauseTiming, n_e: int, t: int, crossings: dict[int, float], resumes: bool) -> None:
    """Crossings of XOFF (or, with ``resumes``, of XON) at the given fraction of step ``t``."""
    thr = np.full(n_e, float(XOFF - 3 * MTU if resumes else XOFF))
    before, after = thr.copy(), thr.copy()
    for e, f in crossings.items():  # a counter moving 4000 B over the step, through thr at fraction f
        sign = -1.0 if resumes else 1.0
        before[e], after[e] = thr[e] - sign * 4000 * f, thr[e] + sign * 4000 * (1 - f)
    timing.book(t, np.array(sorted(crossings)), before, after, thr, np.full(n_e, resumes))


def test_a_pause_acts_at_crossing_plus_lag() -> None:
    # 200 m (1 us) cables, 0.5 us response, 1 us steps: the lag is 2 x 1 + 0.5 - 1 (the step the engine charges the
    # upstream's bytes) = 1.5 steps. A crossing at 0.75 of step 10 is obeyed at 12.25: the port sends all of step
    # 11 and a quarter of step 12 (the pipeline has it paused from step 11).
    net, timing, ports = _setup(200.0, 1e-6, 0.5e-6)
    assert timing.lag[ports] == pytest.approx(1.5)
    n_e = len(net.edges)
    _book(timing, n_e, 10, {ports[0]: 0.75}, resumes=False)
    paused = np.ones(n_e, dtype=bool)
    assert (f11 := timing.due(11, paused)) is not None and f11[ports[0]] == pytest.approx(1.0)
    assert (f12 := timing.due(12, paused)) is not None and f12[ports[0]] == pytest.approx(0.25)
    assert f12[ports[1]] == 0.0  # the others keep the pipeline's state
    assert timing.due(13, paused) is None


def test_an_xon_acts_at_crossing_plus_lag() -> None:
    # XON crossed at 0.2 of step 10: obeyed at 11.7, so the port sends 0.3 of step 11.
    net, timing, ports = _setup(200.0, 1e-6, 0.5e-6)
    n_e = len(net.edges)
    _book(timing, n_e, 10, {ports[0]: 0.2}, resumes=True)
    frac = timing.due(11, np.zeros(n_e, dtype=bool))
    assert frac is not None and frac[ports[0]] == pytest.approx(0.3)


def test_xon_crossings_through_one_egress_come_one_packet_apart() -> None:
    # Three ports tied at 0.2 of step 10, all draining through sw0 -> h0: a FIFO sends one packet at a time, so
    # they cross XON one packet time (4160 B at 100G: 0.333 steps) apart, in port order.
    net, timing, ports = _setup(200.0, 1e-6, 0.5e-6)
    n_e = len(net.edges)
    _book(timing, n_e, 10, dict.fromkeys(ports, 0.2), resumes=True)
    packet = (MTU + HEADER) * 8 / RATE / 1e-6
    starts = 0.2 + np.arange(3) * packet + 1.5  # each port's instant, in steps after step 10
    f11 = timing.due(11, np.zeros(n_e, dtype=bool))
    assert f11 is not None
    f11 = f11.copy()  # due() reuses its buffer
    f12 = timing.due(12, np.zeros(n_e, dtype=bool))
    assert f12 is not None
    sent = f11[ports] + f12[ports]  # steps 11 and 12 together
    np.testing.assert_allclose(sent, 3.0 - starts, atol=1e-9)
    assert sent[0] > sent[1] > sent[2]


def test_an_instant_inside_the_served_step_is_settled_at_the_next_switch() -> None:
    # 180 m (0.9 us) cables, a one-frame response, 2 us steps: the lag is (1.8 + 0.33) / 2 - 1 = 0.067 steps, so a
    # PAUSE crossed at 0.2 of step 10 should have acted at 10.27, inside the step already served: the port sent
    # 0.73 of a step too many. Its next XON starts that much late: crossed at 0.933 (instant exactly at the
    # pipeline's switch), it sends 1 - 0.73 of that switch step.
    response = (MTU + HEADER) * 8 / RATE
    net, timing, ports = _setup(180.0, 2e-6, response)
    n_e = len(net.edges)
    lag = (2 * 0.9e-6 + response) / 2e-6 - 1
    assert timing.lag[ports] == pytest.approx(lag)
    _book(timing, n_e, 10, {ports[0]: 0.2}, resumes=False)
    assert timing.due(11, np.ones(n_e, dtype=bool)) is not None  # nothing to send on: the owed time waits
    _book(timing, n_e, 20, {ports[0]: 1.0 - lag}, resumes=True)
    frac = timing.due(21, np.zeros(n_e, dtype=bool))
    assert frac is not None and frac[ports[0]] == pytest.approx(1.0 - (1.0 - 0.2 - lag), abs=1e-9)
