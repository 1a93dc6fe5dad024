"""A real Prometheus server scraping two real exporters (`tensorfabric monitor --serve`, subprocesses) whose
host names collide, each fed by a replay of a port paused 100 % of the time that is written as the test runs.

Checks the two things only a real server shows: rates are honest (collect on scrape: the paused fraction
stays within 1 % of 1.0 once the 1-minute window is full) and every rule evaluates with health "ok" when two
exporters report the same host/device/port (no many-to-many matching). Loopback only; about 100 s.
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
from pathlib import Path
from typing import Any

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


def test_real_prometheus_rates_and_rule_health(prometheus_bin: str, tmp_path: Path) -> None:
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
        result = _get(web, "/api/v1/query_range", query='roce:pfc_paused_fraction:rate1m{direction="rx"}',
                      start=f"{started:.3f}", end=f"{end:.3f}", step=str(SCRAPE_S))
        # each series from its own first scrape (a loaded machine may delay the first one by seconds)
        raw = _get(web, "/api/v1/query", query=f'roce_pfc_paused_seconds_total{{direction="rx"}}[{RUN_S + 30}s]',
                   time=f"{end:.3f}")
        rules = _get(web, "/api/v1/rules")
        targets = _get(web, "/api/v1/targets")
    finally:
        stop.set()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
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
