"""Counter semantics through Monitor itself: glitches, 32-bit wraps vs resets, pause quanta across a speed change,
the paused fraction's bounds, negative values. Each case is one that used to raise an alert; none may now."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tensorfabric.samples import Sample
from tensorfabric.telemetry.detectors.base import paused_fractions
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.exporter import render
from tensorfabric.telemetry.sources import Reading
from tensorfabric.telemetry.sources.sonic_redis import QuantaState, port_samples

H0 = {"host": "h0", "device": "eth0", "port": "1"}
WRAP = 2.0**32


class _Scripted:
    def __init__(self, name: str, polls: list[Callable[[], list[Sample]]]) -> None:
        self.name = name
        self._polls = iter(polls)

    def read(self) -> Reading:
        return Reading(tuple(next(self._polls)()))


def _run(polls: list[list[Sample]]) -> Monitor:
    monitor = Monitor([_Scripted("s", [lambda p=p: p for p in polls])])  # type: ignore[misc]
    for _ in polls:
        monitor.poll()
    return monitor


def _paused(t: float, value: float, direction: str, **extra: str) -> Sample:
    return Sample(t, "roce_pfc_paused_seconds_total", "counter", value,
                  {**H0, "priority": "3", "direction": direction, **extra}, "s")


def test_a_small_decrease_is_a_glitch_not_a_reset() -> None:
    # 1000 s of pause over a long uptime, 1 % now; one read comes back 1 ms low. Read as a reset, the whole
    # 1000 s would land in one 15 s interval: a 100 % paused port and a critical pause storm.
    values = [1000.0, 1000.15, 1000.149, 1000.30, 1000.45]
    monitor = _run([[_paused(15.0 * i, v, "tx")] for i, v in enumerate(values)])
    assert monitor.alerts == ()
    assert [e.kind for e in monitor.counter_events] == ["glitch"]
    window = monitor.window()
    labels = tuple(sorted({**H0, "priority": "3", "direction": "tx"}.items()))
    assert [v for _, v in window.points("roce_pfc_paused_seconds_total", labels)] == pytest.approx(
        [1000.0, 1000.15, 1000.15, 1000.30, 1000.45])
    # Prometheus sees the held value too: its rate() would read any decrease as a reset
    assert "1000.45" in render(monitor).decode()


def test_32_bit_wrap_and_reset_are_told_apart_by_width_and_magnitude() -> None:
    def retrans(t: float, value: float) -> Sample:
        return Sample(t, "roce_retransmissions_total", "counter", value, {**H0, "kind": "out_of_sequence"}, "s")

    def cnp(t: float, value: float) -> Sample:
        return Sample(t, "roce_cnp_handled_total", "counter", value, H0, "s")

    monitor = _run([
        [retrans(0.0, WRAP - 6), cnp(0.0, 5e9)],
        [retrans(15.0, 5), cnp(15.0, 5e9 + 3)],  # 32-bit near the top -> small: a wrap (+11)
        [retrans(30.0, 8), cnp(30.0, 3)],  # a 64-bit counter has no width to wrap at: a reset
        [retrans(45.0, 10), cnp(45.0, 6)],
    ])
    assert [(e.metric, e.kind) for e in monitor.counter_events] == [("roce_retransmissions_total", "wrap"),
                                                                     ("roce_cnp_handled_total", "reset")]
    window = monitor.window()
    steps = [inc for _, _, inc in window.increases(
        "roce_retransmissions_total", tuple(sorted({**H0, "kind": "out_of_sequence"}.items())))]
    assert steps == [11, 3, 2]
    assert monitor.alerts == ()


def test_32_bit_reset_raises_no_alert() -> None:
    def retrans(t: float, value: float) -> Sample:
        return Sample(t, "roce_retransmissions_total", "counter", value, {**H0, "kind": "out_of_sequence"}, "s")

    monitor = _run([[retrans(0.0, 3e9)], [retrans(15.0, 10)], [retrans(30.0, 12)]])
    assert [e.kind for e in monitor.counter_events] == ["reset"]
    assert monitor.alerts == ()  # the old rule called this a wrap: +1.29e9 in 15 s, far over the baseline


def test_pause_quanta_use_the_speed_in_force_when_they_accrued() -> None:
    # 3 % paused throughout; the port renegotiates from 100G to 25G between the second and third poll
    state: QuantaState = {}
    quanta = 0.0
    polls = []
    for i, speed in enumerate([100e9, 100e9, 25e9, 25e9]):
        if i:
            quanta += 0.45 * speed / 512.0  # 0.45 s of pause in 15 s, counted in quanta at this speed
        fields = {"SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION": str(int(quanta)),
                  "SAI_PORT_STAT_PFC_3_RX_PKTS": str(100 * i), "SAI_PORT_STAT_PFC_3_ON2OFF_RX_PKTS": str(99 * i)}
        polls.append(port_samples(fields, time=15.0 * i, labels=dict(H0), source="s", speed_bps=speed, errors=[],
                                  quanta=state))
    monitor = _run(polls)
    assert monitor.alerts == ()
    fractions = [f for _, f in paused_fractions(monitor.window(), "rx", intervals=1)]
    assert fractions == [pytest.approx(0.03, rel=1e-3)]
    # converting the whole counter at today's speed: 2.7 s paused in 45 s instead of 1.35 s, the 100G quanta
    # counted 4x too long -- 12 % paused in the interval of the speed change, and an ECN alert
    total = port_samples({"SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION": str(int(quanta))}, time=45.0, labels=dict(H0),
                         source="s", speed_bps=25e9, errors=[])[0].value
    assert total == pytest.approx(2.7, rel=1e-3)
    converted = [s for s in polls[-1] if s.metric == "roce_pfc_paused_seconds_total"][0].value
    assert converted == pytest.approx(1.35, rel=1e-3)


def test_paused_fraction_is_clamped_to_one() -> None:
    # the counter and the poll clock disagree a little: 15.3 s of pause "in" 15 s; XON in between, so no victim
    def transitions(t: float, v: float) -> Sample:
        return Sample(t, "roce_pfc_pause_transitions_total", "counter", v,
                      {**H0, "priority": "3", "direction": "rx"}, "s")

    monitor = _run([[_paused(0.0, 0.0, "rx"), transitions(0.0, 0)],
                    [_paused(15.0, 15.3, "rx"), transitions(15.0, 40)]])
    assert paused_fractions(monitor.window(), "rx")[0][1] == 1.0
    assert monitor.alerts == ()


def test_negative_counter_values_are_refused_as_bad_input() -> None:
    monitor = _run([[_paused(0.0, 1.0, "tx")], [_paused(15.0, -5.0, "tx")], [_paused(30.0, 1.1, "tx")]])
    assert monitor.alerts == ()
    assert monitor.counter_events == []  # never stored, so never a "reset"
    assert monitor.status["s"].errors_total == 1
    labels = tuple(sorted({**H0, "priority": "3", "direction": "tx"}.items()))
    assert [v for _, v in monitor.window().points("roce_pfc_paused_seconds_total", labels)] == [1.0, 1.1]


def test_negative_ethtool_value_is_an_error_line() -> None:
    from tensorfabric.telemetry.sources.ethtool import parse_ethtool_stats

    values, errors = parse_ethtool_stats("NIC statistics:\n     rx_prio3_pause: -4\n     tx_prio3_pause: 4\n")
    assert values == {"tx_prio3_pause": 4.0} and "negative counter value -4" in errors[0]
