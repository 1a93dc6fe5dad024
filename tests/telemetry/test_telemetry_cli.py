"""`tensorfabric monitor` in-process: --once --json, --record/replay, live view, --serve, bad input."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.telemetry.synth import LINKS, trace

from .conftest import free_port
from .telemetry_support import FIXTURES


def _write_trace(path: Path, scenario: str, polls: int = 14) -> Path:
    with path.open("w") as handle:
        for samples in trace(scenario, polls=polls, onset=9 * 15.0 + 1):
            handle.writelines(s.to_json() + "\n" for s in samples)
    return path


def test_once_json_on_fixture_sources(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["monitor", "--host", "h9", "--once", "--json",
                 "--source", f"ethtool-file:{FIXTURES / 'ethtool_mlx5.txt'}@eth2",
                 "--source", f"sysfs:{FIXTURES / 'sysfs'}",
                 "--source", f"rdma-json:{FIXTURES / 'rdma_statistic.json'}"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["alerts"] == []
    # sysfs hw_counters and rdma statistic both read mlx5_0: the second reader's copies are dropped, and said so
    [(name, [message])] = out["errors"].items()
    assert name.startswith("rdma-json:") and "already read by sysfs:" in message
    metrics = {s["metric"] for s in out["samples"]}
    assert {"roce_pfc_paused_seconds_total", "roce_bytes_total", "roce_cnp_sent_total"} <= metrics
    assert {s["labels"]["host"] for s in out["samples"]} == {"h9"}


def test_replay_of_a_storm_exits_1_with_alerts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_trace(tmp_path / "storm.jsonl", "storm")
    code = main(["monitor", "--once", "--json", "--source", f"replay:{path}"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert {"pause-storm", "storm-origin"} <= {a["detector"] for a in out["alerts"]}


def test_links_confirm_a_deadlock_cycle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_trace(tmp_path / "deadlock.jsonl", "deadlock")
    links = tmp_path / "links.yaml"
    links.write_text("".join(f"- {a} {b}\n" for a, b in LINKS))
    assert main(["monitor", "--once", "--json", "--source", f"replay:{path}", "--links", str(links),
                 "--detector", "deadlock"]) == 1
    alerts = json.loads(capsys.readouterr().out)["alerts"]
    assert [a["severity"] for a in alerts] == ["critical"] and alerts[0]["subject"].startswith("cycle ")


def test_record_then_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "rec.jsonl"
    source = f"ethtool-file:{FIXTURES / 'ethtool_mlx5.txt'}@eth2"
    assert main(["monitor", "--polls", "2", "--interval", "1ms", "--json", "--record", str(record),
                 "--source", source]) == 0
    lines = record.read_text().splitlines()
    capsys.readouterr()
    assert main(["monitor", "--once", "--json", "--source", f"replay:{record}"]) == 0
    assert len(json.loads(capsys.readouterr().out)["samples"]) == len(lines)


def test_live_view_renders_ports_alerts_and_source_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_trace(tmp_path / "victim.jsonl", "victim")
    bad = tmp_path / "bad.txt"
    bad.write_text("garbage\n")
    assert main(["monitor", "--polls", "2", "--interval", "1ms", "--source", f"replay:{path}",
                 "--source", f"ethtool-file:{bad}"]) == 1
    out = capsys.readouterr().out
    assert "paused" in out and "continuous-pause" in out and "Source errors" in out and "h1 mlx5_0 1" in out


def test_serve_exports_while_polling() -> None:
    port = free_port()
    codes: list[int] = []
    source = f"rdma-json:{FIXTURES / 'rdma_statistic.json'}"
    runner = threading.Thread(target=lambda: codes.append(main(
        ["monitor", "--serve", f"127.0.0.1:{port}", "--polls", "40", "--interval", "0.1s", "--source", source])))
    runner.start()
    body = ""
    try:
        # A loaded CI machine may take seconds to import and bind, and the server answers (with no counters yet)
        # before the first poll has finished: scrape until the counters arrive or the monitor exits.
        for _ in range(400):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                if "roce_cnp_handled_total" in body:
                    break
            except OSError:
                pass
            if not runner.is_alive():
                break
            time.sleep(0.05)
    finally:
        runner.join(timeout=60)
    assert "roce_cnp_handled_total" in body and 'tensorfabric_source_up{source="rdma-json:' in body
    assert codes == [0]


@pytest.mark.parametrize(("argv", "message"), [
    (["monitor", "--once"], "at least one --source"),
    (["monitor", "--once", "--source", "bogus:1"], "KIND:ARG"),
    (["monitor", "--source", "rdma:", "--serve", "0.0.0.0:9108"], "not a loopback"),
    (["monitor", "--once", "--source", "rdma:", "--set", "budget=2"], "--set"),
    (["monitor", "--once", "--source", "rdma:", "--set", "capacity_budget_fraction=lots"], "not a number"),
    (["monitor", "--once", "--source", "rdma:", "--detector", "nope"], "detector"),
    (["monitor", "--once", "--source", "rdma:", "--interval", "soon"], "duration"),
])
def test_bad_input_exits_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_links_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    links = tmp_path / "links.yaml"
    links.write_text("- just-one-end\n")
    assert main(["monitor", "--once", "--source", "rdma:", "--links", str(links)]) == 2
    assert "two endpoints" in capsys.readouterr().err


def test_serve_counts_and_records_the_polls_scrapes_make(tmp_path: Path) -> None:
    """With --serve the scrapes poll; --polls counts them and --record keeps their samples."""
    port = free_port()
    record = tmp_path / "rec.jsonl"
    codes: list[int] = []
    source = f"rdma-json:{FIXTURES / 'rdma_statistic.json'}"
    runner = threading.Thread(target=lambda: codes.append(main(
        ["monitor", "--serve", f"127.0.0.1:{port}", "--polls", "3", "--interval", "60s", "--record", str(record),
         "--source", source])))
    runner.start()
    scrapes = 0
    try:
        for _ in range(400):
            if not runner.is_alive():
                break
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
                scrapes += 1
            except OSError:
                pass
            time.sleep(1.1)  # past the 1 s cache, so each scrape polls
    finally:
        runner.join(timeout=60)
    assert codes == [0] and scrapes >= 2  # the first poll is the loop's, the others were scrapes'
    times = {json.loads(line)["time"] for line in record.read_text().splitlines()}
    assert len(times) == 3


def test_sysfs_source_takes_both_spellings_of_the_root_and_refuses_others(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = FIXTURES.parent / "sysfs" / "mlx5-roce"  # a captured host: the doctor reads the same tree
    runs = []
    for given in (tree, tree / "sys"):
        assert main(["monitor", "--host", "h1", "--once", "--json", "--source", f"sysfs:{given}"]) == 0
        out = json.loads(capsys.readouterr().out)
        runs.append(sorted((s["metric"], s["value"], sorted(s["labels"].items())) for s in out["samples"]))
    assert runs[0] == runs[1] and any(m == "roce_link_speed_bytes_per_second" for m, _, _ in runs[0])
    assert main(["monitor", "--once", "--source", f"sysfs:{tmp_path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"sysfs root {str(tmp_path)!r} holds no sys/class/" in err


def test_polls_that_read_nothing_new_print_a_line_not_the_tables_again(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _write_trace(tmp_path / "storm.jsonl", "storm")
    main(["monitor", "--source", f"replay:{path}", "--polls", "4", "--interval", "0.01s"])
    out = capsys.readouterr().out
    assert out.count("Alerts (") == 1 and out.count("nothing new") == 3
    # one storm on one NIC is one row per detector and device, at the highest severity
    rows = [line for line in out.splitlines() if "pause-storm" in line]
    assert len(rows) == len({line.split("│")[3].split()[0] for line in rows})
