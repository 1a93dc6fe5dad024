"""File inputs validated alike: ``file:``, ``replay:`` and ``rdma-file:`` on pasted and broken files, in-process
and through ``tensorfabric monitor``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.cli.main import main
from tensorfabric.errors import ParseError
from tensorfabric.telemetry.sources import open_source
from tensorfabric.telemetry.sources.base import CounterFilter
from tensorfabric.telemetry.sources.generic import GenericBudget
from tensorfabric.telemetry.sources.paste import read_counters

from .telemetry_support import FIXTURES, ctx, find

PASTE = FIXTURES / "paste"
_SAMPLE = '{"time": %d, "metric": "roce_cnp_sent_total", "kind": "counter", "value": %d, "labels": {"host": "h0"}}'


def test_replay_refuses_a_binary_file_at_open(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    with pytest.raises(ParseError, match="not text") as caught:
        open_source(f"replay:{path}", ctx())
    assert "\n" not in str(caught.value)


def test_replay_reads_a_last_record_without_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text(_SAMPLE % (1, 3) + "\n" + _SAMPLE % (2, 5))
    source = open_source(f"replay:{path}", ctx())
    reading = source.read()
    assert [s.value for s in reading.samples] == [3.0, 5.0] and reading.errors == ()
    with path.open("a") as handle:  # the writer goes on: the newline it owed, then the next record
        handle.write("\n" + _SAMPLE % (3, 8) + "\n")
    reading = source.read()
    assert [s.value for s in reading.samples] == [8.0] and reading.errors == ()


def test_replay_reports_a_cut_last_line_once_it_stops_growing(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text(_SAMPLE % (1, 3) + '\n{"time": 2, "met')
    source = open_source(f"replay:{path}", ctx())
    assert source.read().errors == ()  # a writer may be mid-line: wait one poll
    errors = source.read().errors
    assert len(errors) == 1 and ":2:" in errors[0] and "no newline" in errors[0]
    assert source.read().errors == ()  # said once


def test_monitor_exits_2_with_one_line_on_binary_file_inputs(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "dump.bin"
    path.write_bytes(b"\x00" * 64 + b"PK\x03\x04")
    for kind in ("file", "replay"):
        assert main(["monitor", "--once", "--json", "--source", f"{kind}:{path}"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "not text" in err


def test_rdma_file_after_a_prompt_line_reads_every_counter() -> None:
    reading = open_source(f"rdma-file:{PASTE / 'rdma_text_prompt.txt'}", ctx()).read()
    assert len(reading.samples) == 21 and reading.errors == ()


def test_rdma_file_reads_n_a_as_absent_not_as_an_error() -> None:
    reading = open_source(f"rdma-file:{PASTE / 'hw_counters_columns.txt'}", ctx()).read()
    assert reading.errors == ()
    assert find(reading.samples, "roce_bytes_total") == []
    assert find(reading.samples, "roce_link_down_events_total")[0].value == 1


def test_ethtool_file_gives_every_per_queue_key_a_queue(tmp_path: Path) -> None:
    path = tmp_path / "eth0.txt"
    path.write_text("NIC statistics:\n     tx-0.packets: 4\n     rx_queue_1_packets: 5\n     queue_2_tx_cnt: 6\n"
                    "     rx3_bytes: 7\n     [4]: rx_ucast_packets: 8\n     rx_packets: 9\n")
    samples = open_source(f"ethtool-file:{path}", ctx()).read().samples
    assert {(s.labels["name"], s.labels.get("queue", ""), s.value) for s in samples} == {
        ("tx_packets", "0", 4), ("rx_packets", "1", 5), ("tx_cnt", "2", 6), ("rx_bytes", "3", 7),
        ("rx_ucast_packets", "4", 8), ("rx_packets", "", 9)}


def test_monitor_reads_a_ticket_paste_given_as_a_bare_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ticket = tmp_path / "ticket.md"
    ticket.write_text("## What we see\n\n" + (PASTE / "client_server_prompts.txt").read_text())
    assert main(["monitor", "--once", "--json", "--source", str(ticket)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["errors"] == {}
    [(name, read)] = out["read"].items()
    assert name == f"file:{ticket}" and read["used"] == 8 and read["not_understood"] == []
    assert read["summary"].startswith(f"read file:{ticket} as counter output (ethtool -S, RDMA counters")
    assert {s["labels"]["host"] for s in out["samples"]} == {"client", "server"}


@settings(max_examples=25, deadline=None)
@given(text=st.text(alphabet=st.sampled_from(list(" \t\n:|=,/-_.#{}\"0123456789abcPortEthernetQOSrx")), max_size=400))
def test_fuzz_paste_reader_raises_only_parse_errors(text: str) -> None:
    try:
        read_counters(text, name="file:fuzz", ctx=ctx(), budget=GenericBudget(CounterFilter(), "fuzz"), stem="fuzz")
    except ParseError:
        pass
