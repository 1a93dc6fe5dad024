"""Each detector fires on its labelled scenario within two polls and stays silent on a healthy diurnal day."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors import DETECTORS, Thresholds, load
from tensorfabric.telemetry.detectors.deadlock import find_cycle
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.synth import LINKS, SCENARIOS, trace

LIMITS = Thresholds(links=LINKS)
ONSET_POLL = 10
SHORT = [name for name, s in SCENARIOS.items() if s.detector and not name.startswith("capacity")]


def _first_poll(scenario: str, detector: str, polls: int = 16) -> tuple[int | None, set[str], list[Alert]]:
    monitor = Monitor(limits=LIMITS)
    first: int | None = None
    before: set[str] = set()
    alerts: list[Alert] = []
    # the scenario switches on just after poll ONSET_POLL - 1: poll ONSET_POLL is the first that can see it
    for index, samples in enumerate(trace(scenario, polls=polls, onset=(ONSET_POLL - 1) * 15.0 + 1.0)):
        current = monitor.ingest(samples)
        names = {a.detector for a in current}
        if index < ONSET_POLL:
            before |= names
        if detector in names and first is None:
            first, alerts = index, [a for a in current if a.detector == detector]
    return first, before, alerts


@pytest.mark.parametrize("scenario", SHORT)
def test_detector_fires_on_its_scenario_within_two_polls(scenario: str) -> None:
    detector = SCENARIOS[scenario].detector
    first, before, alerts = _first_poll(scenario, detector)
    assert before == set(), f"alerts before the scenario started: {before}"
    assert first is not None and first - ONSET_POLL < 2, f"{detector} first fired at poll {first}"
    assert all(a.recommendation and a.evidence for a in alerts)


def test_storm_names_the_origin_and_its_victims() -> None:
    _, _, alerts = _first_poll("storm-tree", "storm-origin")
    assert [a.subject for a in alerts] == ["h0 mlx5_0 1 prio 3"]
    assert "h1 mlx5_0 1" in alerts[0].evidence["victims"]


def test_deadlock_reports_the_cycle() -> None:
    _, _, alerts = _first_poll("deadlock", "deadlock")
    assert alerts[0].severity == "critical"
    cycle = alerts[0].evidence["cycle"]
    assert cycle[0] == cycle[-1] and set(cycle) == {"leaf0", "spine0", "leaf1"}


def test_deadlock_without_cabling_is_a_warning() -> None:
    monitor = Monitor(limits=Thresholds())
    for samples in trace("deadlock", polls=14, onset=9 * 15.0 + 1):
        monitor.ingest(samples)
    found = [a for a in monitor.alerts if a.detector == "deadlock"]
    assert [a.severity for a in found] == ["warning"] and found[0].evidence["cycle"] == "unconfirmed"
    assert found[0].evidence["devices"] == ["leaf0 prio 3", "leaf1 prio 3", "spine0 prio 3"]


def test_deadlock_is_not_a_storm() -> None:
    """A storm tree has no cycle: with the cabling known the deadlock detector stays quiet."""
    first, _, _ = _first_poll("storm-tree", "deadlock")
    assert first is None


def test_watchdog_flapping_is_reported_separately() -> None:
    monitor = Monitor(limits=LIMITS)
    states: dict[str, int] = {}
    for index, samples in enumerate(trace("watchdog-flap", polls=14, onset=(ONSET_POLL - 1) * 15.0 + 1.0)):
        for alert in monitor.ingest(samples):
            states.setdefault(str(alert.evidence.get("state")), index)
    # six restorations per poll: more than ten in the flap window by the second poll
    assert states["flapping"] - ONSET_POLL < 2


@pytest.mark.parametrize(("cycle_edges", "has_cycle"), [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
    ({"a": {"b"}, "b": {"c"}, "c": set()}, False),
    ({"a": {"b", "c"}, "c": {"d"}, "d": {"c"}}, True),
])
def test_find_cycle(cycle_edges: dict[str, set[str]], has_cycle: bool) -> None:
    cycle = find_cycle(cycle_edges)
    assert bool(cycle) == has_cycle
    if cycle:
        assert cycle[0] == cycle[-1] and all(b in cycle_edges[a] for a, b in zip(cycle, cycle[1:], strict=False))


@pytest.fixture(scope="module")
def healthy_day() -> dict[str, list[Alert]]:
    """Every alert raised while replaying a healthy 24-hour diurnal trace poll by poll (120 s polls)."""
    monitor = Monitor(limits=LIMITS)
    seen: dict[str, list[Alert]] = defaultdict(list)
    for samples in trace("healthy", polls=24 * 30 + 1, interval_s=120.0, seed=7):
        for alert in monitor.ingest(samples):
            seen[alert.detector].append(alert)
    return seen


@pytest.mark.parametrize("detector", list(DETECTORS))
def test_detector_silent_on_a_healthy_day(detector: str, healthy_day: dict[str, list[Alert]]) -> None:
    assert healthy_day.get(detector, []) == []


def _capacity_alerts(scenario: str, days: float) -> list[Alert]:
    monitor = Monitor(detectors=load(("capacity-trend",)), limits=LIMITS, coarse_step_s=600.0)
    polls = int(days * 144) + 1
    for samples in trace(scenario, polls=polls, interval_s=600.0, onset=0.0,
                         metrics=("roce_pfc_paused_seconds_total",)):
        monitor.ingest(samples)
    return list(monitor.alerts)


def test_capacity_trend_forecasts_and_recommends_resize() -> None:
    alerts = _capacity_alerts("capacity", 3)
    assert alerts, "a fabric-wide rising pause share must be forecast"
    assert all("resize" in a.recommendation for a in alerts)
    days = [a.evidence["budget_crossed_in_days"] for a in alerts if a.evidence["state"] == "trending"]
    assert days and all(0 < d < 14 for d in days)


def test_capacity_trend_on_hot_ports_recommends_rebalancing() -> None:
    alerts = _capacity_alerts("capacity-hot", 3)
    assert {a.subject for a in alerts} == {"h0 mlx5_0 1 prio 3", "leaf0 Ethernet0 prio 3"}
    assert "rebalance" in alerts[0].recommendation and "TP" in alerts[0].recommendation


def test_capacity_needs_two_days_before_claiming_a_trend() -> None:
    assert _capacity_alerts("capacity", 1.5) == []


def test_capacity_trend_silent_on_healthy_days() -> None:
    assert _capacity_alerts("healthy", 3) == []


# --- evidence age: alerts clear when their evidence stops -------------------------------------------------------------

def test_every_alert_carries_its_evidence_age() -> None:
    first, _, alerts = _first_poll("storm-tree", "storm-origin")
    assert first is not None and alerts
    for alert in alerts:
        assert alert.evidence["age_s"] == 0.0 and alert.evidence["poll_interval_s"] == 15.0
        assert alert.evidence["seen_at"] == first * 15.0


def test_an_alert_clears_when_the_series_behind_it_stops() -> None:
    """h1's counters stop arriving (its source ended) while the rest of the fabric keeps reporting: its victim
    alert holds for two late polls and clears at the third, instead of standing on its last two points for ever."""
    monitor = Monitor(limits=LIMITS)
    held: list[int] = []
    for index, samples in enumerate(trace("victim", polls=22, onset=(ONSET_POLL - 1) * 15.0 + 1.0)):
        if index >= 14:
            samples = [s for s in samples if s.labels.get("host") != "h1"]
        if any(a.detector == "continuous-pause" for a in monitor.ingest(samples)):
            held.append(index)
    assert held == list(range(ONSET_POLL, 16)), held  # stopped after poll 13: polls 14 and 15 are late, 16 is gone


def test_aged_alerts_stand_for_two_late_polls_then_go() -> None:
    from tensorfabric.telemetry.detectors.base import aged

    evaluated = [Alert("storm-origin", "critical", "h0 mlx5_0 1 prio 3", 100.0,
                       {"seen_at": 100.0, "age_s": 0.0, "poll_interval_s": 15.0}),
                 Alert("made-by-hand", "warning", "x", 100.0, {})]
    assert [a.evidence["age_s"] for a in aged(evaluated, 30.0)] == [30.0, 30.0]
    assert aged(aged(evaluated, 30.0), 30.0) == aged(evaluated, 30.0)  # the age is the idle time, not a sum
    assert [a.detector for a in aged(evaluated, 38.0)] == ["made-by-hand"]


def test_a_replay_read_to_its_end_clears_its_alerts_and_is_not_unknown() -> None:
    import time

    from tensorfabric.telemetry.sources import Reading

    polls = list(trace("storm-tree", polls=14, interval_s=0.05, onset=0.0))

    class Ended:
        name = "replay:storm"

        def __init__(self) -> None:
            self.left = list(polls)

        def read(self) -> Reading:
            return Reading(tuple(self.left.pop(0)) if self.left else ())

    monitor = Monitor([Ended()], limits=LIMITS)  # type: ignore[list-item]
    for _ in polls:
        monitor.poll()
    assert any(a.detector == "storm-origin" for a in monitor.alerts)
    time.sleep(0.2)  # four of the stream's intervals
    monitor.poll()
    assert monitor.alerts == () and monitor.status["replay:storm"].recognised > 0


def test_every_detector_writes_its_prometheus_rules() -> None:
    from tensorfabric.telemetry.rules import Timing

    for detector in load():
        assert detector.rules is not None, detector.name
        written = detector.rules(Thresholds(), Timing())
        assert written and all(r.detector == detector.name for r in written), detector.name


def test_a_forwarding_class_queue_and_a_voq_count_as_lossless() -> None:
    from tensorfabric.samples import Sample

    def drops(t: float, value: float, queue: str) -> Sample:
        return Sample(t, "roce_discards_total", "counter", value, {"host": "qfx1", "device": "qfx1", "port": "et-0/0/1",
                                                                    "queue": queue, "direction": "tx",
                                                                    "reason": "queue"})

    monitor = Monitor(limits=LIMITS)
    for t, value in ((0.0, 0.0), (15.0, 40.0)):
        monitor.ingest([drops(t, value, q) for q in ("no-loss", "voq3", "best-effort", "voq1")])
    assert sorted(a.subject for a in monitor.alerts) == ["qfx1 et-0/0/1 queue no-loss reason queue",
                                                          "qfx1 et-0/0/1 queue voq3 reason queue"]
