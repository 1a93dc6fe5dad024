"""``tensorfabric run``'s reports as records: the ``--json`` of a colocated and of a disaggregated run is
byte-identical to what the verb printed before they were records, and each has one human renderer."""

from __future__ import annotations

import dataclasses
import io
import json

import pytest
from rich.console import Console

import tensorfabric.inference.tokenizer as tokenizer
from report_inputs import GOLDEN, TINY_DIR, disagg_config, disagg_results, rank_result, run_config, texts
from tensorfabric.cli._common import PIPE_WIDTH
from tensorfabric.cli.run import render, render_disaggregated
from tensorfabric.inference.disagg_report import DisaggReport, disagg_report, summarize_disagg
from tensorfabric.inference.report import RunReport, run_report


def _piped() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, highlight=False, soft_wrap=False, width=PIPE_WIDTH), buf


def _run(batch: int) -> RunReport:
    return run_report(rank_result(batch), run_config(batch), texts(batch), TINY_DIR)


@pytest.mark.parametrize(("name", "batch"), [("run_single", 1), ("run_batch", 3)])
def test_run_json_is_the_dict_the_verb_printed_before(name: str, batch: int) -> None:
    assert _run(batch).to_json() == (GOLDEN / f"{name}.json").read_text()


@pytest.mark.parametrize(("name", "batch"), [("run_single", 1), ("run_batch", 3)])
@pytest.mark.parametrize("streamed", [False, True])
def test_run_human_form_is_unchanged(name: str, batch: int, streamed: bool) -> None:
    con, buf = _piped()
    render(_run(batch), con, streamed)
    golden = GOLDEN / f"{name}{'_streamed' if streamed else ''}.txt"
    assert buf.getvalue() == golden.read_text()


def test_generated_text_is_never_markup_or_emoji() -> None:
    con, buf = _piped()
    render(_run(1), con)
    assert "generated[0]: \ufffdh :smile: [bold]x[/]" in buf.getvalue()


def test_run_report_is_frozen_and_typed() -> None:
    report = _run(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.tp = 3  # type: ignore[misc]
    reduce = next(c for c in report.comm if c.op == "all_reduce")
    assert reduce.move_s == pytest.approx(reduce.seconds - reduce.wait_s)
    gather = next(c for c in report.comm if c.op == "all_gather")
    assert gather.move_s is None and gather.late_s is None  # no NIXL call; lateness unknown
    assert [c.op for c in report.comm] == sorted(c.op for c in report.comm)


class _Tok:
    def __init__(self, batch: int) -> None:
        self.pairs: dict[tuple[int, ...], str] = {(5 + i, 6, 7): t for i, t in enumerate(texts(batch))}

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.pairs[tuple(ids)]


def _disagg(monkeypatch: pytest.MonkeyPatch, requests: int, prefill: int, rate: float | None) -> DisaggReport:
    monkeypatch.setattr(tokenizer, "load_tokenizer", lambda directory: _Tok(requests))
    results, cfg = disagg_results(requests, prefill), disagg_config(requests, prefill)
    return disagg_report(results, cfg, rate)


CASES = [("disagg", 2, 2, None), ("disagg_one", 1, 1, None), ("disagg_lab", 2, 2, 1e9)]


@pytest.mark.parametrize(("name", "requests", "prefill", "rate"), CASES)
def test_disaggregated_json_and_human_form_are_unchanged(name: str, requests: int, prefill: int, rate: float | None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    report = _disagg(monkeypatch, requests, prefill, rate)
    assert report.to_json() == (GOLDEN / f"{name}.json").read_text()
    con, buf = _piped()
    render_disaggregated(report, con)
    assert buf.getvalue() == (GOLDEN / f"{name}.txt").read_text()


def test_summary_without_texts_to_show_has_no_text_shown_key() -> None:
    report = summarize_disagg(disagg_results(), disagg_config(), texts(2), "m", link_rate_bps=2.5e9)
    assert report.text_shown is None
    assert report.to_json() == (GOLDEN / "disagg_summary.json").read_text()


def test_disaggregated_record_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    report = _disagg(monkeypatch, 2, 2, 1e9)
    first = report.requests[0]
    assert first.ttft_s == pytest.approx(first.prefill_compute_s + first.kv_write_s + first.first_decode_step_s)
    assert first.link_fraction == pytest.approx(first.kv_gbytes_per_s * 8 / 1.0)
    doc = json.loads(report.to_json())
    assert doc["mode"] == "disaggregated" and list(doc["transports"]) == ["prefill0", "prefill1", "decode0"]
    assert doc["text_shown"][1] == "tab\\x09here\\x1b[2J"  # control bytes escaped for the terminal

