"""Exporter scrape cost: 64 NICs x ~150 ethtool counters, polled, run through the detectors and rendered.

Measures, in one run and on this machine:
  * scrape with poll: read + parse 64 `ethtool -S` dumps, update history, run all detectors, render;
  * render only: what a Prometheus scrape costs when the monitor polls in the background (what
    `monitor --serve` does), with the cached text renderer and, for comparison, through prometheus_client;
  * baselines: the file reads alone (I/O floor) and prometheus_client's own registry rendering the same
    number of series from stock labelled Counters;
  * CPU share of one core when polling every 15 s (CPU seconds per poll / 15). The sources get the clock
    `tensorfabric monitor` gives them: a PollClock over a live clock (real time moves on while the 64 files are
    read), so one poll is one time; UNFROZEN_POLLS polls without it show what that saves;
  * the same after a long history (steady state of a monitor that has run for two weeks): the capacity
    detector keeps one point per 5 minutes for 14 days of every pause-time series, the other detectors 25
    minutes at full rate. The two weeks are fed cheaply: ``Monitor.ingest`` of the pause-time series (the only
    long-history metric, same labels and values the ethtool files give) at the 5-minute coarse step, with
    the detectors switched off meanwhile (their verdicts on that partial data are not what is measured). Then
    the 64 files are polled for real: 100 polls to fill the 25-minute window, and LONG_POLLS = 240 measured
    polls -- one hour, so the hourly capacity-trend run over the full 14 days is in the mean.
Prints a table and writes benchmarks/results/exporter_scrape.json. Targets from issue 7: median scrape
< 50 ms, polling every 15 s < 1 % of one core.
"""

from __future__ import annotations

import gc
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tensorfabric.fsutil import atomic_write_json, atomic_write_text
from tensorfabric.samples import Sample
from tensorfabric.telemetry.clock import PollClock
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.exporter import render, render_fast
from tensorfabric.telemetry.exposition import TextRenderer
from tensorfabric.telemetry.sources import SourceContext, open_source

NICS = 64
REPEATS = 40
UNFROZEN_POLLS = 6
POLL_INTERVAL_S = 15.0
DEADLINE_S = 5.0  # what `tensorfabric monitor` gives every source (--source-deadline): one reader thread each
OUT = Path(__file__).resolve().parent / "results" / "exporter_scrape.json"
HISTORY_S = 14 * 86400.0  # the capacity detector's lookback
COARSE_STEP_S = 300.0  # Monitor's default coarse_step_s
WARM_POLLS = 100  # 25 minutes: the longest short lookback at full rate
LONG_POLLS = 240  # one hour of polls: one capacity-trend run


def ethtool_dump(nic: int, step: int) -> str:
    """An mlx5-like `ethtool -S` dump with ~150 keys; values grow with ``step`` like a live device."""
    lines = ["NIC statistics:"]
    base = 1000 * (nic + 1) + step * 997
    for direction in ("rx", "tx"):
        for prio in range(8):
            for key in ("bytes", "packets", "pause", "pause_duration", "pause_transition"):
                lines.append(f"     {direction}_prio{prio}_{key}: {base * (prio + 1)}")
        for key in ("packets_phy", "bytes_phy", "discards_phy", "pause_ctrl_phy", "unicast_phy", "multicast_phy"):
            lines.append(f"     {direction}_{key}: {base}")
    for prio in range(8):
        for key in ("discards", "buf_discard", "cong_discard", "marked"):
            lines.append(f"     rx_prio{prio}_{key}: {step}")
    for key in ("rx_crc_errors_phy", "rx_symbol_err_phy", "rx_pcs_symbol_err_phy", "rx_corrected_bits_phy",
                "rx_bits_phy", "link_down_events_phy", "rx_buffer_passed_thres_phy", "tx_pause_storm_warning_events",
                "tx_pause_storm_error_events", "outbound_pci_stalled_rd", "outbound_pci_stalled_wr",
                "rx_out_of_buffer", "tx_tso_packets", "rx_csum_complete", "rx_vport_rdma_unicast_packets",
                "rx_vport_rdma_unicast_bytes", "tx_vport_rdma_unicast_packets", "tx_vport_rdma_unicast_bytes"):
        lines.append(f"     {key}: {step if 'err' in key or 'events' in key or 'stalled' in key else base}")
    return "\n".join(lines) + "\n"


class LiveClock:
    """Benchmark time: poll ``step`` starts at step * 15 s and real time moves on while the files are read, as
    it does for a live monitor (each ``ethtool -S`` read comes a little after the previous one)."""

    def __init__(self) -> None:
        self.base, self.started = 0.0, time.perf_counter()

    def at_step(self, step: float) -> None:
        self.base, self.started = step * POLL_INTERVAL_S, time.perf_counter()

    def __call__(self) -> float:
        return self.base + time.perf_counter() - self.started


def pause_seconds(nic: int, step: float, direction: str, prio: int) -> float:
    """``{direction}_prio{prio}_pause_duration`` of ``ethtool_dump(nic, step)``, in seconds as the source gives it."""
    return (1000 * (nic + 1) + step * 997) * (prio + 1) * 1e-6


def long_history(tmp: Path) -> dict[str, float]:
    """Poll CPU of a monitor that has run for HISTORY_S: median and mean over LONG_POLLS polls (see docstring)."""
    paths = [tmp / f"long{i}.txt" for i in range(NICS)]
    live = LiveClock()
    clock = PollClock(live)  # what `tensorfabric monitor` wires: one time per poll for every source
    ctx = SourceContext(host="bench", clock=clock)
    sources = []
    for i, path in enumerate(paths):
        atomic_write_text(path, ethtool_dump(i, 0))
        sources.append(open_source(f"ethtool-file:{path}@eth{i}", ctx))
    monitor = Monitor(sources, clock=clock, source_deadline_s=DEADLINE_S)
    detectors, monitor.detectors = monitor.detectors, []
    series = [(i, d, p, {"host": "bench", "device": f"eth{i}", "port": "1", "direction": d, "priority": str(p)},
               sources[i].name) for i in range(NICS) for d in ("rx", "tx") for p in range(8)]
    first_poll = int(HISTORY_S / POLL_INTERVAL_S)
    for k in range(int(HISTORY_S / COARSE_STEP_S)):
        t = k * COARSE_STEP_S
        step = t / POLL_INTERVAL_S
        monitor.ingest([Sample(t, "roce_pfc_paused_seconds_total", "counter", pause_seconds(i, step, d, p), labels,
                               name) for i, d, p, labels, name in series])
    monitor.detectors = detectors
    cpu_s = []
    for n in range(WARM_POLLS + LONG_POLLS):
        step = first_poll + n
        for i, path in enumerate(paths):
            path.write_text(ethtool_dump(i, step))
        live.at_step(step)
        cpu0 = time.process_time()
        monitor.poll()
        if n >= WARM_POLLS:
            cpu_s.append(time.process_time() - cpu0)
    coarse = max(len(points) for points in monitor._coarse["roce_pfc_paused_seconds_total"].values())
    return {"history_days": HISTORY_S / 86400, "coarse_points_per_series": coarse, "polls": LONG_POLLS,
            "poll_cpu_s_median": statistics.median(cpu_s), "poll_cpu_s_mean": statistics.fmean(cpu_s),
            "poll_cpu_s_max": max(cpu_s),
            "cpu_share_of_one_core_at_15s": statistics.fmean(cpu_s) / POLL_INTERVAL_S}


def per_source_times(tmp: Path) -> dict[str, float]:
    """The same polls with the live clock handed to the sources directly (no PollClock): each source is read
    at its own time, so every poll is 64 poll times and the detectors run 64 times. What PollClock saves."""
    paths = [tmp / f"plain{i}.txt" for i in range(NICS)]
    live = LiveClock()
    ctx = SourceContext(host="bench", clock=live)
    for i, path in enumerate(paths):
        atomic_write_text(path, ethtool_dump(i, 0))
    monitor = Monitor([open_source(f"ethtool-file:{p}", ctx) for p in paths], clock=live,
                      source_deadline_s=DEADLINE_S)
    cpu_s = []
    for step in range(1, UNFROZEN_POLLS + 1):
        for i, path in enumerate(paths):
            path.write_text(ethtool_dump(i, step))
        live.at_step(step)
        cpu0 = time.process_time()
        monitor.poll()
        cpu_s.append(time.process_time() - cpu0)
    return {"polls": UNFROZEN_POLLS, "poll_cpu_s_median": statistics.median(cpu_s[1:]),
            "cpu_share_of_one_core_at_15s": statistics.median(cpu_s[1:]) / POLL_INTERVAL_S}


def main() -> int:
    from prometheus_client import CollectorRegistry, Counter, generate_latest

    with tempfile.TemporaryDirectory() as tmp:
        paths = [Path(tmp) / f"eth{i}.txt" for i in range(NICS)]
        for i, path in enumerate(paths):
            atomic_write_text(path, ethtool_dump(i, 0))
        keys = ethtool_dump(0, 0).count(":") - 1
        live = LiveClock()
        clock = PollClock(live)  # what `tensorfabric monitor` wires: one time per poll for every source
        ctx = SourceContext(host="bench", clock=clock)
        monitor = Monitor([open_source(f"ethtool-file:{p}", ctx) for p in paths], clock=clock,
                          source_deadline_s=DEADLINE_S)

        def advance(step: int) -> None:
            for i, path in enumerate(paths):
                path.write_text(ethtool_dump(i, step))
            live.at_step(step)

        renderer = TextRenderer()
        scrape_ms, render_ms, client_ms, poll_cpu_s, io_ms = [], [], [], [], []
        for step in range(1, REPEATS + 1):
            advance(step)
            t0 = time.perf_counter()
            for path in paths:
                path.read_text()
            io_ms.append((time.perf_counter() - t0) * 1e3)
            cpu0, t0 = time.process_time(), time.perf_counter()
            monitor.poll()  # read + parse 64 dumps, history, every detector
            poll_wall = time.perf_counter() - t0
            poll_cpu_s.append(time.process_time() - cpu0)
            t0 = time.perf_counter()
            body = render_fast(monitor, renderer)
            render_ms.append((time.perf_counter() - t0) * 1e3)
            scrape_ms.append(poll_wall * 1e3 + render_ms[-1])
            if step % 5 == 0:
                t0 = time.perf_counter()
                render(monitor)
                client_ms.append((time.perf_counter() - t0) * 1e3)
        series = sum(1 for line in body.decode().splitlines() if line and not line.startswith("#"))

        registry = CollectorRegistry()
        counter = Counter("baseline_counter", "stock prometheus_client counter", ["host", "device", "key"],
                          registry=registry)
        for i in range(series):
            counter.labels("bench", f"eth{i % NICS}", f"k{i}").inc(i)
        stock_ms = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            generate_latest(registry)
            stock_ms.append((time.perf_counter() - t0) * 1e3)
        del monitor, registry, counter
        gc.collect()
        unfrozen = per_source_times(Path(tmp))
        steady = long_history(Path(tmp))

    result = {
        "nics": NICS, "ethtool_keys_per_nic": keys, "series_exported": series, "repeats": REPEATS,
        "scrape_with_poll_ms": {"median": statistics.median(scrape_ms), "max": max(scrape_ms)},
        "render_only_ms": {"median": statistics.median(render_ms), "max": max(render_ms)},
        "render_through_prometheus_client_ms": {"median": statistics.median(client_ms)},
        "baseline_file_reads_ms": {"median": statistics.median(io_ms)},
        "baseline_stock_client_render_ms": {"median": statistics.median(stock_ms)},
        "poll_cpu_s_median": statistics.median(poll_cpu_s),
        "cpu_share_of_one_core_at_15s": statistics.median(poll_cpu_s) / POLL_INTERVAL_S,
        "poll_cpu_s_mean": statistics.fmean(poll_cpu_s),
        "poll_cpu_after_long_history": steady,
        "poll_cpu_without_poll_clock": unfrozen,
        "targets": {"scrape_median_ms": 50, "cpu_share": 0.01},
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(), "note": "shared 2-core VM"},
    }
    atomic_write_json(OUT, result)
    print(f"{NICS} NICs x {keys} ethtool keys -> {series} exported series, {REPEATS} repeats")
    print(f"scrape incl. poll + detectors : median {result['scrape_with_poll_ms']['median']:7.2f} ms "
          f"(max {result['scrape_with_poll_ms']['max']:.2f})")
    print(f"render only (background poll) : median {result['render_only_ms']['median']:7.2f} ms   target < 50 ms")
    print(f"same via prometheus_client    : median "
          f"{result['render_through_prometheus_client_ms']['median']:7.2f} ms")
    print(f"baseline: read the 64 files   : median {result['baseline_file_reads_ms']['median']:7.2f} ms")
    print(f"baseline: stock client render : median {result['baseline_stock_client_render_ms']['median']:7.2f} ms")
    print(f"CPU per poll {result['poll_cpu_s_median'] * 1e3:.1f} ms (mean {result['poll_cpu_s_mean'] * 1e3:.1f}) -> "
          f"{result['cpu_share_of_one_core_at_15s']:.3%} of one core at a 15 s interval   target < 1 %")
    print(f"after {steady['history_days']:.0f} days of history ({steady['coarse_points_per_series']:.0f} coarse "
          f"points/series), {LONG_POLLS} polls: CPU per poll median {steady['poll_cpu_s_median'] * 1e3:.1f} ms, "
          f"mean {steady['poll_cpu_s_mean'] * 1e3:.1f} ms (max {steady['poll_cpu_s_max'] * 1e3:.1f}) -> "
          f"{steady['cpu_share_of_one_core_at_15s']:.3%} of one core")
    print(f"without one time per poll (each source stamped when read): CPU per poll median "
          f"{unfrozen['poll_cpu_s_median'] * 1e3:.0f} ms -> {unfrozen['cpu_share_of_one_core_at_15s']:.2%} of one core")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
