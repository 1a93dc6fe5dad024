"""An exporter that survives its sources: per-source deadlines against black-hole sources, HEAD, refused label
names, loopback by resolved address, a busy port, and `monitor --once` exit codes."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.errors import InputError
from tensorfabric.samples import Sample
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.exporter import parse_listen, serve
from tensorfabric.telemetry.sources import Reading, open_source

from .conftest import free_port
from .telemetry_support import FIXTURES, ctx

DEADLINE_S = 0.3


@pytest.fixture
def black_holes() -> Iterator[list[int]]:
    """Six TCP listeners that accept connections and never answer (a hung switch agent)."""
    listeners, accepted = [], []
    stop = threading.Event()
    for _ in range(6):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.settimeout(0.1)
        listeners.append(sock)

    def accept_forever() -> None:
        while not stop.is_set():
            for sock in listeners:
                try:
                    accepted.append(sock.accept()[0])
                except OSError:
                    pass

    thread = threading.Thread(target=accept_forever, daemon=True)
    thread.start()
    try:
        yield [s.getsockname()[1] for s in listeners]
    finally:
        stop.set()
        thread.join(timeout=5)
        for sock in listeners + accepted:
            sock.close()


def _replay(path: Path) -> Path:
    path.write_text("".join(Sample(float(t), "roce_pfc_paused_seconds_total", "counter", float(t),
                                   {"host": "h0", "device": "eth0", "port": "1", "priority": "3",
                                    "direction": "rx"}).to_json() + "\n" for t in range(0, 60, 15)))
    return path


def test_black_hole_sources_cost_their_deadline_not_the_scrape(black_holes: list[int], tmp_path: Path) -> None:
    pytest.importorskip("redis")
    sources = [open_source(f"sonic-redis:127.0.0.1:{port}@sw{i}", ctx()) for i, port in enumerate(black_holes)]
    sources.append(open_source(f"replay:{_replay(tmp_path / 'r.jsonl')}", ctx()))
    monitor = Monitor(sources, source_deadline_s=DEADLINE_S)
    port = free_port()
    server, _ = serve(monitor, "127.0.0.1", port, threading.Lock(), max_age_s=0.0)
    times = []
    try:
        for _ in range(100):
            started = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            conn.request("GET", "/metrics")
            body = conn.getresponse().read().decode()
            conn.close()
            times.append(time.monotonic() - started)
    finally:
        server.shutdown()
        server.server_close()
    print(f"100 scrapes, 6 black holes + 1 replay, deadline {DEADLINE_S} s: median "
          f"{sorted(times)[50] * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms")
    assert max(times) <= DEADLINE_S + 0.1, f"slowest scrape {max(times):.3f} s"
    assert 'tensorfabric_source_up{source="replay:' in body and "roce_pfc_paused_seconds_total{" in body
    down = [line for line in body.splitlines() if line.startswith("tensorfabric_source_up{") and line.endswith(" 0.0")]
    assert len(down) == 6
    assert all(not monitor.status[s.name].up for s in sources[:6]) and monitor.status[sources[6].name].up


class _Labelled:
    name = "labelled"

    def read(self) -> Reading:
        good = {"host": "h0", "device": "eth0", "port": "1"}
        return Reading((Sample(1.0, "roce_cnp_sent_total", "counter", 1.0, {**good, "__name__": "x"}, "b"),
                        Sample(1.0, "roce_cnp_sent_total", "counter", 2.0, {**good, "bad-label": "x"}, "b"),
                        Sample(1.0, "bad metric", "counter", 2.0, good, "b"),
                        Sample(1.0, "roce_cnp_handled_total", "counter", 3.0, good, "b")))


def test_reserved_and_invalid_names_are_refused_at_the_source_and_head_works() -> None:
    monitor = Monitor([_Labelled()])
    result = monitor.poll()
    assert len(result.errors["labelled"]) == 3 and not monitor.status["labelled"].up
    assert [s.metric for s in monitor.latest()] == ["roce_cnp_handled_total"]
    port = free_port()
    server, _ = serve(monitor, "127.0.0.1", port, threading.Lock())
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("HEAD", "/metrics")
        head = conn.getresponse()
        assert head.status == 200 and int(head.getheader("Content-Length") or 0) > 0 and head.read() == b""
        conn.request("GET", "/metrics")
        body = conn.getresponse().read().decode()
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    assert "__name__" not in body and "bad-label" not in body and 'roce_cnp_handled_total{' in body


def test_loopback_is_judged_by_the_resolved_address() -> None:
    def fake(answers: dict[str, list[str]]):  # type: ignore[no-untyped-def]
        return lambda host, port: answers[host]

    resolve = fake({"127.evil.example": ["203.0.113.7"], "localhost": ["127.0.0.1", "::1"], "db": ["10.0.0.2"]})
    with pytest.raises(InputError, match="203.0.113.7"):
        parse_listen("127.evil.example:9108", resolve=resolve)
    assert parse_listen("localhost:9108", resolve=resolve) == ("localhost", 9108)
    assert parse_listen("db:9108", resolve=resolve, allow_remote=True) == ("db", 9108)
    assert parse_listen("[::1]:9108") == ("::1", 9108)


def test_busy_port_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        code = main(["monitor", "--serve", f"127.0.0.1:{port}", "--polls", "1", "--source",
                     f"rdma-json:{FIXTURES / 'rdma_statistic.json'}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "already in use" in err[0]


def test_once_exits_1_when_a_source_failed_and_2_for_an_unusable_spec(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    good = f"rdma-json:{FIXTURES / 'rdma_statistic.json'}"
    garbage = f"ethtool-file:{FIXTURES / 'ethtool_garbage.txt'}"
    assert main(["monitor", "--once", "--json", "--source", good]) == 0
    capsys.readouterr()
    assert main(["monitor", "--once", "--json", "--source", good, "--source", garbage]) == 1
    out = json.loads(capsys.readouterr().out)
    assert garbage in out["errors"] and out["samples"]
    assert main(["monitor", "--once", "--source", f"replay:{tmp_path / 'missing.jsonl'}"]) == 2
    assert main(["monitor", "--once", "--source", "rdma-file:/nonexistent@mlx5_0"]) == 2


def test_junk_replay_keeps_a_bounded_error_summary(tmp_path: Path) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n" * 100_000)
    monitor = Monitor([open_source(f"replay:{junk}", ctx())])
    errors = monitor.poll().errors[f"replay:{junk}"]
    assert len(errors) <= 21 and any("99981 more lines" in e for e in errors)


def test_replay_follows_rotation_and_truncation(tmp_path: Path) -> None:
    path = _replay(tmp_path / "r.jsonl")
    source = open_source(f"replay:{path}", ctx())
    assert len(source.read().samples) == 4
    path.write_text(Sample(100.0, "roce_cnp_sent_total", "counter", 1.0, {"host": "h0"}).to_json() + "\n")
    assert [s.time for s in source.read().samples] == [100.0]  # truncated: read again from the start
    rotated = tmp_path / "new.jsonl"
    _replay(rotated)
    rotated.replace(path)  # logrotate: a new file under the old name
    assert len(source.read().samples) == 4


def test_lab_source_after_lab_down_is_down() -> None:
    """Every host of a torn-down lab fails its iproute2 call: the lab source reports them and is down."""
    from tensorfabric.errors import DiscoveryError
    from tensorfabric.telemetry.sources import SourceContext
    from tensorfabric.telemetry.sources.lab import LabSource
    from tensorfabric.telemetry.sources.netdev import NetdevSource

    def gone(argv: object) -> str:
        raise DiscoveryError("ip netns exec demo-h0 ip -s -j link show exited 1: Cannot open network namespace")

    lab = object.__new__(LabSource)  # what Lab.attach would have built, with the namespaces gone
    lab.name = "lab:demo"
    lab._hosts = [NetdevSource(f"lab:demo/h{i}", SourceContext(host=f"h{i}", run=gone)) for i in range(2)]
    monitor = Monitor([lab])
    result = monitor.poll()
    assert not monitor.status["lab:demo"].up and len(result.errors["lab:demo"]) == 2


class _Wide:
    """Enough series that the response cannot sit in the socket buffers of a client that vanished."""

    name = "wide"

    def read(self) -> Reading:
        return Reading(tuple(Sample(1.0, "roce_nic_stat_total", "counter", float(i),
                                    {"host": "h0", "device": "eth0", "port": "1", "name": f"c{i:06d}" + "x" * 80},
                                    "w") for i in range(60_000)))


def test_a_client_that_disconnects_mid_response_is_one_log_line(caplog: pytest.LogCaptureFixture,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    import struct

    monitor = Monitor([_Wide()])
    monitor.poll()
    port = free_port()
    server, _ = serve(monitor, "127.0.0.1", port, threading.Lock())
    try:
        with caplog.at_level("WARNING", logger="tensorfabric.telemetry.exporter"):
            for _ in range(3):
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
                sock.recv(100)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN
                sock.close()
            deadline = time.monotonic() + 10
            while not [r for r in caplog.records if "ended early" in r.getMessage()] and time.monotonic() < deadline:
                time.sleep(0.05)
        # the server still answers
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("HEAD", "/metrics")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        server.shutdown()
        server.server_close()
    early = [r for r in caplog.records if "ended early" in r.getMessage()]
    assert early and all("\n" not in r.getMessage() and r.exc_info is None for r in early)
    assert "Traceback" not in capsys.readouterr().err


def test_an_idle_connection_is_dropped_after_the_idle_timeout() -> None:
    monitor = Monitor([open_source(f"rdma-json:{FIXTURES / 'rdma_statistic.json'}", ctx())])
    port = free_port()
    server, _ = serve(monitor, "127.0.0.1", port, threading.Lock(), idle_timeout_s=0.3)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as idle:
            assert idle.recv(100) == b""  # the server hung up on a client that said nothing
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("label", "message"), [("host=x", "sets itself"), ("__x=1", "label name"),
                                                ("cluster", "KEY=VALUE")])
def test_constant_labels_the_exporter_owns_are_refused(label: str, message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["monitor", "--once", "--label", label, "--source",
                 f"rdma-json:{FIXTURES / 'rdma_statistic.json'}"]) == 2
    assert message in capsys.readouterr().err
