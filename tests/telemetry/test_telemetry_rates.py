"""Counter deltas: wraps, resets, never a negative rate."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.samples import Sample
from tensorfabric.telemetry.rates import RateTracker, counter_delta
from tensorfabric.telemetry.window import Window

WRAP = float(2**32)


def test_wrap_of_a_32_bit_counter() -> None:
    assert counter_delta(WRAP - 10, 5, WRAP) == (15, "wrap")


def test_drop_without_modulus_is_a_reset() -> None:
    assert counter_delta(1_000_000, 40) == (40, "reset")
    # a small 32-bit value going down is a reset too (it was nowhere near the top)
    assert counter_delta(1000, 40, WRAP) == (40, "reset")


def test_tracker_reports_events_and_rates() -> None:
    tracker = RateTracker()
    labels = {"host": "h0", "device": "mlx5_0", "port": "1", "kind": "out_of_sequence"}

    def poll(t: float, value: float) -> list[float]:
        sample = Sample(t, "roce_retransmissions_total", "counter", value, labels)
        return [r.per_second for r in tracker.update([sample])]

    assert poll(0, WRAP - 100) == []
    assert poll(10, 50) == [15.0]  # wrapped: 150 in 10 s
    assert poll(20, 10) == [1.0]  # reset: restarted from zero
    assert poll(20, 99) == []  # same poll time twice: ignored
    assert [e.kind for e in tracker.events] == ["wrap", "reset"]
    # gauges never produce rates
    assert tracker.update([Sample(30, "roce_queue_occupancy_bytes", "gauge", 5, labels)]) == []


def test_window_increase_handles_wraps() -> None:
    labels = {"host": "h0", "device": "mlx5_0", "port": "1", "kind": "packet_seq_err"}
    window = Window([Sample(t, "roce_retransmissions_total", "counter", v, labels)
                     for t, v in ((0, WRAP - 5), (15, 5), (30, 20))])
    key = next(iter(window.series("roce_retransmissions_total")))[0]
    assert window.increase("roce_retransmissions_total", key, 2) == (25, 30)
    assert window.rate("roce_retransmissions_total", key) == 1.0


@given(st.lists(st.floats(min_value=0, max_value=2**32 - 1, allow_nan=False), min_size=2, max_size=30),
       st.booleans())
def test_never_negative(values: list[float], wrapping: bool) -> None:
    for before, after in zip(values, values[1:], strict=False):
        increase, event = counter_delta(before, after, WRAP if wrapping else None)
        assert increase >= 0
        assert (event == "") == (after >= before)
