"""A real Prometheus server scraping two real exporters (`tensorfabric monitor --serve`, subprocesses) whose
host names collide, each fed by a replay of a port paused 100 % of the time that is written as the test runs.

Checks the two things only a real server shows: rates are honest (collect on scrape: the paused fraction
stays within 1 % of 1.0 once the 1-minute window is full) and every rule evaluates with health "ok" when two
exporters report the same host/device/port (no many-to-many matching). Loopback only; about 115 s, started in
the background by the module's first test so that the storm test below runs inside that wait.

And alerts that resolve: the simulator's storm streamed in real time (`simulate --wall-clock`) through `monitor
--serve` into Prometheus with the shipped rules; every alert fires during the storm and resolves after it, and a
healthy replay beside it raises nothing (about 50 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tensorfabric.samples import Sample

from .conftest import free_port
from .telemetry_support import ROOT, RULES

SCRAPE_S = 5
RUN_S = 110
FULL_WINDOW_S = 60 + SCRAPE_S  # rate1m is the whole-window rate once a series has a minute of samples


def _writer(path: Path, stop: threading.Event, t0: float) -> None:
    """Append, every 50 ms, the counters of one host: paused 100 % on priority 3 (rx), plus the series the joins
    in the rules read (FEC bits, ECN marks, CNPs, transitions), all with the same labels in both files."""
    labels = {"host": "h0", "device": "eth0", "port": "1"}
    with path.open("a", encoding="utf-8") as handle:
        while not stop.is_set():
            now = time.time()
            up = now - t0
            rows = [
                Sample(now, "roce_pfc_paused_seconds_total", "counter", up, {**labels, "priority": "3",
                                                                              "direction": "rx"}),
                Sample(now, "roce_pfc_paused_seconds_total", "counter", 0.0, {**labels, "priority": "3",
                                                                               "direction": "tx"}),
                Sample(now, "roce_pfc_pause_transitions_total", "counter", 0.0, {**labels, "priority": "3",
                                                                                  "direction": "rx"}),
                Sample(now, "roce_phy_corrected_bit_errors_total", "counter", 10.0 * up, labels),
                Sample(now, "roce_phy_received_bit_count_total", "counter", 1e11 * up, labels),
                Sample(now, "roce_ecn_marked_packets_total", "counter", 100.0 * up, labels),
                Sample(now, "roce_cnp_sent_total", "counter", 0.0, labels),
            ]
            handle.write("".join(s.to_json() + "\n" for s in rows))
            handle.flush()
            stop.wait(0.05)


def _get(port: int, path: str, **query: str) -> Any:
    url = f"http://127.0.0.1:{port}{path}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _wait_ready(port: int, proc: subprocess.Popen[bytes], what: str, path: str = "/metrics") -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited {proc.returncode}: {proc.stderr.read().decode()[-500:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2).read()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"{what} did not answer on 127.0.0.1:{port}")


def _rates_experiment(prometheus_bin: str, tmp_path: Path) -> dict[str, Any]:
    """Two exporters fed by a port paused 100 % of the time, scraped by a real Prometheus for RUN_S; returns what
    the assertions read (the recording rule's range, the raw counters, rule health, targets)."""
    t0 = time.time() - 1000.0  # a port that has been paused for a while already
    stop = threading.Event()
    replays = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    writers = [threading.Thread(target=_writer, args=(p, stop, t0), daemon=True) for p in replays]
    procs: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    try:
        for w in writers:
            w.start()
        while not all(p.exists() and p.stat().st_size for p in replays):
            time.sleep(0.05)
        exporters = []
        for index, replay in enumerate(replays):
            port = free_port()
            exporters.append(port)
            procs.append(subprocess.Popen(
                [sys.executable, "-c", "import sys; from tensorfabric.cli.main import main; sys.exit(main())",
                 "monitor", "--serve", f"127.0.0.1:{port}", "--interval", "15s", "--source", f"replay:{replay}",
                 "--label", f"cluster=c{index % 1}"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for port, proc in zip(exporters, procs, strict=True):
            _wait_ready(port, proc, "exporter")
        web = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            f"global: {{scrape_interval: {SCRAPE_S}s, evaluation_interval: {SCRAPE_S}s}}\n"
            f"rule_files: ['{RULES}']\n"
            "scrape_configs:\n  - job_name: tensorfabric\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{exporters[0]}', '127.0.0.1:{exporters[1]}']\n")
        prom = subprocess.Popen([prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'db'}",
                                 f"--web.listen-address=127.0.0.1:{web}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(prom)
        _wait_ready(web, prom, "prometheus", "/-/ready")
        started = time.time()
        time.sleep(RUN_S)
        end = time.time()
        return {
            "result": _get(web, "/api/v1/query_range", query='roce:pfc_paused_fraction:rate1m{direction="rx"}',
                           start=f"{started:.3f}", end=f"{end:.3f}", step=str(SCRAPE_S)),
            # each series from its own first scrape (a loaded machine may delay the first one by seconds)
            "raw": _get(web, "/api/v1/query", query=f'roce_pfc_paused_seconds_total{{direction="rx"}}[{RUN_S + 30}s]',
                        time=f"{end:.3f}"),
            "rules": _get(web, "/api/v1/rules"),
            "targets": _get(web, "/api/v1/targets"),
        }
    finally:
        stop.set()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture(scope="module")
def rates_run(prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], dict[str, Any]]]:
    """The rates experiment started in the background when the module's first test asks for it: it is almost all
    waiting for Prometheus' one-minute window, so the storm test runs meanwhile instead of after it."""
    tmp = tmp_path_factory.mktemp("rates")
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["data"] = _rates_experiment(prometheus_bin, tmp)
        except BaseException as exc:  # re-raised in the test that reads the result
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def result() -> dict[str, Any]:
        thread.join(timeout=RUN_S + 180)
        assert not thread.is_alive(), "the rates experiment did not finish"
        if "error" in out:
            raise out["error"]
        return dict(out["data"])

    yield result
    thread.join(timeout=RUN_S + 180)


# --- storm alerts fire during the storm and resolve after it ---------------------------------------------------------

STORM_SCRAPE_S = 3.0
"""Scrape and rule evaluation interval of the storm run; the rules are generated for it (windows of four scrapes,
for: scaled by 3/15), the logic and thresholds are the shipped ones."""
PACE_S = 0.15
"""One simulated snapshot per 150 ms of wall time: 20 per scrape, so where a scrape falls between two snapshots
moves a paused share by 5 % at most (a 100 % paused port reads >= 0.95, never under the 0.9 thresholds)."""
STORM_SNAPSHOTS = 170
TAIL_S = 20.0


HEALTHY_PACE_S = 1.0
"""The healthy fabric's polls: nothing in it is near a threshold, so a coarser pace costs the exporter less."""


def _healthy_writer(path: Path, stop: threading.Event) -> None:
    """Append the synthetic healthy fabric (diurnal load, short pauses, ECN and CNPs working, a trickle of
    retransmissions) one poll per HEALTHY_PACE_S, stamped with the wall clock, until ``stop``: the trace is made at
    that pace, so its per-second rates are the real ones."""
    from tensorfabric.telemetry.synth import trace

    for poll in trace("healthy", polls=100_000, interval_s=HEALTHY_PACE_S, start=time.time()):
        if stop.wait(max(0.0, poll[0].time - time.time())):
            return
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(s.to_json() + "\n" for s in poll))


def _exporter(port: int, replay: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    # --interval above the scrape interval: every scrape polls (collect on scrape) and the background loop never does
    return subprocess.Popen(
        [sys.executable, "-c", "import sys; from tensorfabric.cli.main import main; sys.exit(main())", "monitor",
         "--serve", f"127.0.0.1:{port}", "--interval", f"{STORM_SCRAPE_S + 1:g}s", "--source", f"replay:{replay}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _in_process(path: Path) -> tuple[set[tuple[str, str]], float, float]:
    """(detector, host) the monitor reports anywhere in the stream, and the stream's first and last snapshot times."""
    from tensorfabric.telemetry.engine import Monitor

    by_time: dict[float, list[Sample]] = {}
    for line in path.read_text().splitlines():
        sample = Sample.from_json(line)
        by_time.setdefault(sample.time, []).append(sample)
    monitor = Monitor()
    seen: set[tuple[str, str]] = set()
    for t in sorted(by_time):
        seen |= {(a.detector, a.subject.split()[0]) for a in monitor.ingest(by_time[t])}
    return seen, min(by_time), max(by_time)


def test_storm_alerts_fire_during_the_storm_and_resolve_after_it(
        prometheus_bin: str, tmp_path: Path, rates_run: Callable[[], dict[str, Any]]) -> None:
    """`simulate storm --wall-clock` -> `monitor --serve` -> a real Prometheus with the shipped rules (generated for
    3 s scrapes): every alert the in-process detectors raise on the storm fires in Prometheus during the storm and
    resolves within its for: plus two evaluation intervals of the stream's end; a healthy replay beside it raises
    nothing, not even a pending alert. About 45 s."""
    from tensorfabric.telemetry.rules import AlertRule, Timing, groups, render

    timing = Timing(scrape_s=STORM_SCRAPE_S)
    rules = tmp_path / "rules.yml"
    rules.write_text(render(timing=timing))
    holds = {r.name: r.for_s * timing.scale for _, rs in groups(timing=timing) for r in rs if isinstance(r, AlertRule)}
    storm, healthy = tmp_path / "storm.jsonl", tmp_path / "healthy.jsonl"
    healthy.touch()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    stop = threading.Event()
    writer = threading.Thread(target=_healthy_writer, args=(healthy, stop), daemon=True)
    procs: list[subprocess.Popen[bytes]] = []
    storm_port, healthy_port, web = free_port(), free_port(), free_port()
    try:
        procs.append(_exporter(healthy_port, healthy, env))
        config = tmp_path / "prometheus.yml"
        config.write_text(
            f"global: {{scrape_interval: {STORM_SCRAPE_S:g}s, evaluation_interval: {STORM_SCRAPE_S:g}s, "
            f"scrape_timeout: {STORM_SCRAPE_S:g}s}}\nrule_files: ['{rules}']\n"
            "scrape_configs:\n  - job_name: tensorfabric\n    static_configs:\n"
            f"      - targets: ['127.0.0.1:{storm_port}']\n        labels: {{replay: storm}}\n"
            f"      - targets: ['127.0.0.1:{healthy_port}']\n        labels: {{replay: healthy}}\n")
        prom = subprocess.Popen([prometheus_bin, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'db'}",
                                 f"--web.listen-address=127.0.0.1:{web}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(prom)
        writer.start()
        _wait_ready(healthy_port, procs[0], "healthy exporter")
        _wait_ready(web, prom, "prometheus", "/-/ready")
        started = time.time()
        duration = STORM_SNAPSHOTS * 10e-6
        simulate = subprocess.Popen(
            [sys.executable, "-c", "import sys; from tensorfabric.cli.main import main; sys.exit(main())",
             "simulate", "storm", "--duration", f"{duration * 1e3:g}ms", "--counter-interval", "10us",
             "--counters", str(storm), "--wall-clock", f"{PACE_S:g}s"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(simulate)
        for _ in range(600):  # the file appears when the stream starts, after the simulation (a few seconds)
            if storm.exists() or simulate.poll() is not None:
                break
            time.sleep(0.05)
        assert storm.exists(), simulate.stderr.read().decode()[-500:] if simulate.stderr else ""
        procs.append(_exporter(storm_port, storm, env))
        _wait_ready(storm_port, procs[-1], "storm exporter")
        assert simulate.wait(timeout=STORM_SNAPSHOTS * PACE_S + 60) == 0
        expected, stream_start, stream_end = _in_process(storm)
        time.sleep(max(0.0, stream_end + TAIL_S - time.time()))
        end = time.time()
        alerts = _get(web, "/api/v1/query_range", query="ALERTS", start=f"{started:.3f}", end=f"{end:.3f}",
                      step="1")["data"]["result"]
        health = _get(web, "/api/v1/rules")
        scrapes = _get(web, "/api/v1/query_range", query="scrape_duration_seconds or up == 0", start=f"{started:.3f}",
                       end=f"{end:.3f}", step="1")["data"]["result"]
    finally:
        stop.set()
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    assert expected == {("pause-storm", "h0"), ("storm-origin", "h0")} | {
        ("continuous-pause", h) for h in ("h1", "h2", "h6", "h7", "leaf0", "leaf1", "spine1")}, expected
    slowest = {s["metric"].get("replay", "?") + ("" if "__name__" in s["metric"] else " down"): max(
        float(v) for _, v in s["values"]) for s in scrapes}
    firing: dict[tuple[str, str, str], list[float]] = {}
    for series in alerts:
        labels = series["metric"]
        assert labels.get("replay") != "healthy", f"the healthy replay raised {labels} (slowest scrapes: {slowest})"
        if labels["alertstate"] == "firing" and labels.get("detector") != "telemetry":
            key = (labels["alertname"], labels["detector"], labels.get("host", ""))
            firing.setdefault(key, []).extend(float(t) for t, _ in series["values"])
    assert {(d, h) for _, d, h in firing} == expected, (sorted(firing), slowest)
    report = []
    for (name, _, host), times in sorted(firing.items()):
        first, resolved = min(times), max(times) + 1.0  # the step after the last firing sample
        bound = stream_end + holds[name] + 2 * STORM_SCRAPE_S
        report.append(f"{name} {host}: fired {first - stream_start:.1f}s after the stream began, resolved "
                      f"{resolved - stream_end:+.1f}s after it ended (bound {bound - stream_end:.0f}s)")
        assert stream_start < first < stream_end, f"{name} {host} fired outside the storm"
        assert resolved <= bound, report[-1]
    print("\n".join(report) + f"\nslowest scrape: {slowest}")
    bad = [(r["name"], r["health"], r.get("lastError", "")) for g in health["data"]["groups"] for r in g["rules"]
           if r["health"] != "ok"]
    assert not bad, bad


def test_real_prometheus_rates_and_rule_health(rates_run: Callable[[], dict[str, Any]]) -> None:
    data = rates_run()
    result, raw, rules, targets = data["result"], data["raw"], data["rules"], data["targets"]
    assert all(t["health"] == "up" for t in targets["data"]["activeTargets"])
    series = result["data"]["result"]
    assert len(series) == 2, series  # one per exporter: instance keeps the colliding hosts apart
    first = {s["metric"]["instance"]: float(s["values"][0][0]) for s in raw["data"]["result"]}
    values = [float(v) for s in series for t, v in s["values"]
              if float(t) >= first[s["metric"]["instance"]] + FULL_WINDOW_S]
    assert len(values) >= 2 * ((RUN_S - FULL_WINDOW_S - 15) // SCRAPE_S)
    print(f"roce:pfc_paused_fraction:rate1m over {len(values)} evaluations: min {min(values):.4f} "
          f"max {max(values):.4f}")
    assert 0.99 <= min(values) and max(values) <= 1.01, values
    bad = [(r["name"], r["health"], r.get("lastError", "")) for g in rules["data"]["groups"] for r in g["rules"]
           if r["health"] != "ok"]
    assert not bad, bad
