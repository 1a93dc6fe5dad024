"""The monitor's poll loop as a library (telemetry/poll_loop.py): what it shows, records and returns, without the
CLI; and the single-flight poll it relies on."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from tensorfabric.errors import InputError
from tensorfabric.telemetry.poll_loop import LoopOptions, MonitorSetup, Shown, watch
from tensorfabric.telemetry.single_flight import SingleFlight
from tensorfabric.telemetry.synth import trace


def _storm(tmp_path: Path) -> str:
    path = tmp_path / "storm.jsonl"
    with path.open("w") as handle:
        for samples in trace("storm", polls=14, onset=9 * 15.0 + 1):
            handle.writelines(s.to_json() + "\n" for s in samples)
    return f"replay:{path}"


def test_watch_shows_each_poll_records_its_samples_and_exits_1_on_alerts(tmp_path: Path) -> None:
    shown: list[Shown] = []
    record = tmp_path / "out" / "rec.jsonl"
    outcome = watch(MonitorSetup((_storm(tmp_path),)),
                    LoopOptions(interval_s=0.001, polls=3, record=str(record)), shown.append)
    assert [s.poll_no for s in shown] == [1, 2, 3] and outcome.polls == 3
    assert outcome.exit_code == 1 and {"pause-storm", "storm-origin"} <= {a.detector for a in outcome.alerts}
    assert len(record.read_text().splitlines()) == sum(len(s.result.samples) for s in shown) > 0
    assert not outcome.failed and outcome.findings == ()


def test_once_judges_the_dump_on_its_own(tmp_path: Path) -> None:
    shown: list[Shown] = []
    outcome = watch(MonitorSetup((_storm(tmp_path),)), LoopOptions(once=True), shown.append)
    assert len(shown) == 1 and outcome.polls == 1 and shown[0].findings == outcome.findings


def test_nothing_is_opened_or_bound_for_bad_options(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="at least one --source"):
        watch(MonitorSetup(()), LoopOptions(once=True), lambda shown: None)
    with pytest.raises(InputError, match="not a loopback"):
        watch(MonitorSetup(("rdma:",)), LoopOptions(once=True, listen="0.0.0.0:9108"), lambda shown: None)
    with pytest.raises(InputError, match="sets itself"):
        watch(MonitorSetup(("rdma:",)), LoopOptions(once=True, labels=("job=x",)), lambda shown: None)


def test_a_record_path_that_is_a_symlink_is_refused_before_the_first_poll(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    link = tmp_path / "rec.jsonl"
    os.symlink(target, link)
    shown: list[Shown] = []
    with pytest.raises(InputError, match="symbolic link"):
        watch(MonitorSetup((_storm(tmp_path),)), LoopOptions(once=True, record=str(link)), shown.append)
    assert not shown and target.read_text() == ""


def test_the_json_view_of_a_loop_is_one_line_per_poll(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main

    assert main(["monitor", "--polls", "2", "--interval", "1ms", "--json", "--source", _storm(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all({"time", "alerts", "errors"} == set(json.loads(line)) for line in lines)


def test_single_flight_callers_share_the_call_in_flight_and_its_error() -> None:
    flight: SingleFlight[int] = SingleFlight()
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow() -> int:
        calls.append(1)
        started.set()
        release.wait(5)
        return len(calls)

    results: list[int] = []
    leader = threading.Thread(target=lambda: results.append(flight.run(slow)))
    leader.start()
    started.wait(5)
    follower = threading.Thread(target=lambda: results.append(flight.run(slow)))
    follower.start()
    time.sleep(0.05)
    release.set()
    leader.join(5)
    follower.join(5)
    assert results == [1, 1] and calls == [1]

    def broken() -> int:
        raise OSError("source gone")

    with pytest.raises(OSError, match="source gone"):
        flight.run(broken)
    assert flight.run(lambda: 7) == 7  # a failed call leaves nothing in flight
    assert flight.run(lambda: flight.run(lambda: 2, reentrant=lambda: 3)) == 3  # from inside: no self-wait


def test_a_single_dump_shows_a_one_line_header_and_no_empty_tables(capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main

    from .telemetry_support import FIXTURES

    dump = FIXTURES / "verdicts" / "sonic_pfcwd_flapping_loop.txt"
    assert main(["monitor", "--once", "--source", f"file:{dump}"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "poll 1: 21 samples from 1 source(s)"
    assert lines[1].startswith("no paused share yet") and not any("┃ port" in line for line in lines)
