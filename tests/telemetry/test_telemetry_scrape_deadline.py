"""Scrapes never wait on the dead (issue 28, Build 5): sources read in parallel under one deadline, a source
past it served from its last good values marked stale, one reader thread per source at most, and concurrent
scrapes sharing the poll in flight. Timing is asserted only as generous hang bounds."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from tensorfabric.samples import Sample
from tensorfabric.telemetry.clock import PollClock
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.exporter import serve
from tensorfabric.telemetry.sources import Reading

from .conftest import free_port

DEADLINE_S = 0.2
HANG_S = 10.0  # a scrape or poll taking this long is a hang, not slowness


class _Source:
    """Answers ``good`` reads (a counter that grows), then behaves as ``after`` says: 'block' (never returns
    until released), 'slow' (answers after ``slow_s``)."""

    def __init__(self, name: str, clock: PollClock, *, good: int = 1, after: str = "block",
                 slow_s: float = 0.0) -> None:
        self.name, self._clock, self._good, self._after, self._slow_s = name, clock, good, after, slow_s
        self.reads = 0
        self.release = threading.Event()

    def read(self) -> Reading:
        self.reads += 1
        if self.reads > self._good:
            if self._after == "block":
                self.release.wait()
                raise OSError("released")
            time.sleep(self._slow_s)
        return Reading((Sample(self._clock(), "roce_cnp_sent_total", "counter", float(self.reads),
                               {"host": self.name, "device": "mlx5_0", "port": "1"}, self.name),))


@pytest.fixture
def released() -> Iterator[list[_Source]]:
    """Sources a test blocks; released at the end so their reader threads finish."""
    sources: list[_Source] = []
    yield sources
    for source in sources:
        source.release.set()


def _metrics(body: str) -> dict[str, float]:
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def _source_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("source ")]


def test_a_source_past_the_deadline_keeps_its_last_values_marked_stale(released: list[_Source]) -> None:
    clock = PollClock()
    dying = _Source("dying", clock)
    live = _Source("live", clock, good=10**9)
    released.append(dying)
    monitor = Monitor([dying, live], clock=clock, source_deadline_s=DEADLINE_S)
    first = monitor.poll()
    assert not first.errors and not first.stale and monitor.status["dying"].stale_s == 0.0
    time.sleep(0.05)
    second = monitor.poll()  # dying's read now blocks: no answer by the deadline
    assert "no answer within the 0.2 s source deadline" in second.errors["dying"][0]
    assert "served, marked stale" in second.errors["dying"][0]
    assert set(second.stale) == {"dying"} and second.stale["dying"] > 0
    assert [s.labels["host"] for s in second.samples] == ["live"]  # stale values are not re-recorded
    assert {s.labels["host"]: s.value for s in monitor.latest()} == {"dying": 1.0, "live": 2.0}

    port = free_port()
    server, _ = serve(monitor, "127.0.0.1", port, max_age_s=0.0)
    try:
        body = asyncio.run(_scrape_all(port, 1))[0][1]
    finally:
        server.shutdown()
        server.server_close()
    values = _metrics(body)
    assert values['roce_cnp_sent_total{device="mlx5_0",host="dying",port="1"}'] == 1.0  # its last good value
    assert values['tensorfabric_source_up{source="dying"}'] == 0.0
    assert values['tensorfabric_source_stale_seconds{source="dying"}'] > 0.0
    assert values['tensorfabric_source_up{source="live"}'] == 1.0
    assert values['tensorfabric_source_stale_seconds{source="live"}'] == 0.0
    assert values['roce_cnp_sent_total{device="mlx5_0",host="live",port="1"}'] == 3.0  # the scrape polled
    assert dying.reads == 2, "a read still in flight is never restarted"


def test_a_late_answer_is_taken_by_the_next_poll_and_a_long_silence_is_forgotten() -> None:
    clock = PollClock()
    slow = _Source("slow", clock, after="slow", slow_s=DEADLINE_S * 2)
    monitor = Monitor([slow], clock=clock, source_deadline_s=DEADLINE_S, stale_s=0.5)
    monitor.poll()
    assert monitor.poll().stale.keys() == {"slow"}  # its second read outlives this poll's deadline
    time.sleep(DEADLINE_S * 2)
    late = monitor.poll()  # the late answer is taken; a fresh read starts, and it is slow too
    assert [s.value for s in late.samples] == [2.0] and "slow" not in late.errors
    assert slow.reads == 3 and monitor.status["slow"].up

    dead = _Source("dead", clock)
    try:
        monitor = Monitor([dead], clock=clock, source_deadline_s=0.05, stale_s=0.3)
        monitor.poll()
        assert monitor.latest()
        time.sleep(0.35)
        monitor.poll()
        assert not monitor.latest(), "values older than stale_s are forgotten, not frozen forever"
        assert monitor.status["dead"].stale_s is not None and monitor.status["dead"].stale_s > 0.3
        assert "served" not in monitor.status["dead"].last_errors[0]
    finally:
        dead.release.set()


class _Scripted:
    """Read n sleeps ``durations[n - 1]`` seconds, then answers n."""

    name = "scripted"

    def __init__(self, clock: PollClock, durations: list[float]) -> None:
        self._clock, self._durations, self.reads = clock, durations, 0

    def read(self) -> Reading:
        self.reads += 1
        time.sleep(self._durations[self.reads - 1])
        return Reading((Sample(self._clock(), "roce_cnp_sent_total", "counter", float(self.reads),
                               {"host": "h0", "device": "mlx5_0", "port": "1"}, self.name),))


def test_a_source_slower_than_the_deadline_is_read_in_the_background_until_it_is_quick_again() -> None:
    clock = PollClock()
    source = _Scripted(clock, [0.0, DEADLINE_S * 2, DEADLINE_S * 0.75, DEADLINE_S * 0.25, 0.0])
    monitor = Monitor([source], clock=clock, source_deadline_s=DEADLINE_S)
    assert [s.value for s in monitor.poll().samples] == [1.0]
    assert not monitor.poll().samples  # read 2 outlives the deadline
    time.sleep(DEADLINE_S * 2)
    # read 2 took longer than the deadline: read 3 starts but is not waited on; read 2's late answer is served
    assert [s.value for s in monitor.poll().samples] == [2.0]
    time.sleep(DEADLINE_S)
    # read 3 was quick: read 4 is waited on again, and its answer is this poll's
    assert [s.value for s in monitor.poll().samples] == [4.0]
    assert source.reads == 4


def test_concurrent_polls_share_one_collection() -> None:
    clock = PollClock()
    slow = _Source("slow", clock, good=0, after="slow", slow_s=DEADLINE_S / 2)
    monitor = Monitor([slow], clock=clock, source_deadline_s=HANG_S)
    seen: list[object] = []
    monitor.listeners.append(seen.append)
    results: list[object] = []
    start = threading.Barrier(20)

    def poll() -> None:
        start.wait()
        results.append(monitor.poll())

    threads = [threading.Thread(target=poll) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_S)
    assert len(results) == 20
    # every caller got the result of a poll that ran (one, or a couple if a caller came after the first ended)
    assert slow.reads == len(seen) <= 3 and {id(r) for r in results} <= {id(r) for r in seen}


def test_fifty_concurrent_scrapes_against_six_black_holes(released: list[_Source]) -> None:
    clock = PollClock()
    holes = [_Source(f"hole{i}", clock, good=i % 2) for i in range(6)]  # three answered once, three never
    released.extend(holes)
    live = _Source("live", clock, good=10**9)
    monitor = Monitor([live, *holes], clock=clock, source_deadline_s=DEADLINE_S)
    port = free_port()
    server, _ = serve(monitor, "127.0.0.1", port, max_age_s=0.05)
    try:
        scrapes = asyncio.run(_scrape_all(port, 50, rounds=3))
    finally:
        server.shutdown()
        server.server_close()
    assert len(scrapes) == 150  # every one answered 200 within the client's HANG_S: no timeouts
    assert max(elapsed for elapsed, _ in scrapes) < HANG_S
    last = _metrics(scrapes[-1][1])
    for i, hole in enumerate(holes):
        assert last[f'tensorfabric_source_up{{source="{hole.name}"}}'] == 0.0
        series = f'roce_cnp_sent_total{{device="mlx5_0",host="{hole.name}",port="1"}}'
        if i % 2:  # answered once: that value is still served, and how stale it is
            assert last[series] == 1.0 and last[f'tensorfabric_source_stale_seconds{{source="{hole.name}"}}'] > 0
        else:  # never answered: nothing to serve, no age
            assert series not in last and f'tensorfabric_source_stale_seconds{{source="{hole.name}"}}' not in last
    assert last['tensorfabric_source_up{source="live"}'] == 1.0
    assert sorted(_source_threads()).count("source hole0") == 1, "one reader thread per source, not per scrape"
    assert all(hole.reads == 1 + i % 2 for i, hole in enumerate(holes))
    assert live.reads < 150, "concurrent scrapes shared collections"


async def _scrape_all(port: int, scrapers: int, rounds: int = 1) -> list[tuple[float, str]]:
    async def one() -> tuple[float, str]:
        started = time.monotonic()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /metrics HTTP/1.0\r\n\r\n")
        raw = await asyncio.wait_for(reader.read(), HANG_S)
        writer.close()
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200"), head[:40]
        return time.monotonic() - started, body.decode()

    out: list[tuple[float, str]] = []
    for _ in range(rounds):
        out += await asyncio.gather(*(one() for _ in range(scrapers)))
    return out
