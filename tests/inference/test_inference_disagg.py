"""Disaggregated prefill/decode on spawned ranks: the tokens of the colocated run, and what a dead peer does."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tensorfabric.cli.run import render_disaggregated
from tensorfabric.errors import InputError
from tensorfabric.inference.disagg import DisaggConfig, DisaggRankResult, launch, parse_split
from tensorfabric.inference.disagg_report import summarize_disagg
from tensorfabric.inference.runner import RunConfig, prepare, run_rank
from tensorfabric.inference.sampling import SamplingParams
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.transfer.engines.nixl_engine import available
from tensorfabric.transfer.launch import SpawnError

from ._inference_threads import one_thread  # noqa: F401 -- autouse fixture

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not available(), reason="needs the NIXL wheel (nixl-cu12)")]

PROMPTS = ("The fabric carries every token between the shards", "kv")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> RunConfig:
    # The CLI's default tiny model (4 layers, 4 KV heads of 32, vocab 512, seed 0).
    directory = make_tiny(tmp_path_factory.mktemp("disagg") / "tiny", tiny_config(), seed=0)
    return RunConfig(model_dir=str(directory), prompts=PROMPTS, timeout_s=30, engine="torch",
                     sampling=SamplingParams(max_new_tokens=32, stop_at_eos=False))


@pytest.fixture(scope="module")
def colocated(base: RunConfig) -> list[list[int]]:
    """One colocated tp=1 run per prompt (a disaggregated run serves each prompt as its own request)."""
    return [run_rank(replace(base, prompts=(p,))).token_ids[0] for p in PROMPTS]


@pytest.mark.parametrize(("prefill", "decode"), [(1, 1), (2, 1), (1, 2)])
def test_disaggregated_greedy_tokens_equal_colocated(base: RunConfig, colocated: list[list[int]], prefill: int,
                                                      decode: int) -> None:
    cfg = DisaggConfig(run=base, prefill=prefill, decode=decode, block_tokens=4)
    results = launch(cfg)
    decoders = [r for r in results if r.role == "decode"]
    assert len(colocated[0]) == 32
    for r in decoders:
        assert r.token_ids == colocated, f"decode rank {r.index} of {prefill}:{decode}"
    record = summarize_disagg(results, cfg, ["a", "b"], base.model_dir)
    report = record.to_dict()
    lengths = [len(ids) for ids in prepare(base).prompts]
    assert lengths[0] > 4 * 8 and lengths[1] < 4  # many blocks, the last partial; and less than one block
    head_bytes = 4 * 32 * 4  # 4 tokens x head_dim 32 x float32
    for req, plen in zip(report["requests"], lengths, strict=True):
        blocks = -(-plen // 4)
        assert req["prompt_tokens"] == plen and req["kv_blocks"] == blocks
        # Every block of 4 layers x K,V x 4 heads crosses exactly once, whatever the two tp degrees.
        assert req["kv_bytes"] == blocks * 4 * 2 * 4 * head_bytes
        assert req["writes"] == 4 * max(prefill, decode) and req["token_ids"] == colocated[req["request"]]
        assert req["ttft_s"]["total_s"] == pytest.approx(sum(v for k, v in req["ttft_s"].items() if k != "total_s"))
    assert report["transport"].startswith("nixl/shm")
    assert all(s > 0 for s in report["connection_setup_s"].values())
    shown = io.StringIO()
    render_disaggregated(record, Console(file=shown))
    assert "TTFT" in shown.getvalue()


def _kill_mid_transfer(base: RunConfig, tmp_path: Path, victim: str) -> tuple[SpawnError, float, dict[str, Any]]:
    """Run 1:1 with prefill paused after posting chunk 0 of request 0, SIGKILL ``victim`` there, then let
    prefill go on. Returns the launch's error, seconds from the kill to the launch returning, the pids."""
    run = replace(base, prompts=(PROMPTS[0],), timeout_s=8, warmup=False)
    cfg = DisaggConfig(run=run, block_tokens=4, chunks=4, pause_dir=str(tmp_path))
    outcome: dict[str, Any] = {}

    def go() -> None:
        try:
            outcome["results"] = launch(cfg, grace_s=20)
        except SpawnError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=go)
    thread.start()
    flag = tmp_path / "paused"
    deadline = time.monotonic() + 60
    while not flag.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    pids = json.loads(flag.read_text())
    os.kill(pids[victim][0], signal.SIGKILL)
    killed = time.monotonic()
    time.sleep(0.3)
    flag.unlink()  # release the paused prefill rank (when it is still alive)
    thread.join(90)
    assert not thread.is_alive()
    assert "error" in outcome, "the run survived a killed rank"
    return outcome["error"], time.monotonic() - killed, pids


def test_killed_decode_makes_prefill_raise_transfer_error_within_the_timeout(base: RunConfig,
                                                                             tmp_path: Path) -> None:
    err, elapsed, _ = _kill_mid_transfer(base, tmp_path, "decode")
    prefill_tb = err.failures[0]
    assert "TransferError" in prefill_tb and "decode rank 0" in prefill_tb, prefill_tb
    assert "process exited" in err.failures[1] or "died" in err.failures[1] or "signal" in err.failures[1]
    assert elapsed < 8 + 5


def test_killed_prefill_makes_decode_raise_having_used_no_partial_block(base: RunConfig, tmp_path: Path) -> None:
    err, elapsed, _ = _kill_mid_transfer(base, tmp_path, "prefill")
    decode_tb = err.failures[1]
    assert "TransferError" in decode_tb and "prefill rank 0" in decode_tb, decode_tb
    # Chunk 0 had notified; the request was incomplete, so nothing of it was read out of the pool.
    assert "1 chunk notification(s) had arrived" in decode_tb
    assert "none of its blocks was used (0 blocks used in all)" in decode_tb
    assert elapsed < 8 + 5


def test_split_and_config_refuse_bad_input(base: RunConfig) -> None:
    assert parse_split("2:1") == (2, 1)
    for bad in ("2", "0:1", "a:b", "1:-1", ""):
        with pytest.raises(InputError, match="PREFILL:DECODE"):
            parse_split(bad)
    with pytest.raises(InputError, match="one instance per side"):
        DisaggConfig(run=base, prefill=2, decode=1, prefill_tp=1).check()
    with pytest.raises(InputError, match="pp"):
        DisaggConfig(run=replace(base, pp=2)).check()
    # Checked before any rank starts: the tiny model's 4 KV heads do not split over a decode tp of 3.
    with pytest.raises(InputError, match="--disaggregate 1:3: the decode side's tp=3 does not divide"):
        DisaggConfig(run=base, prefill=1, decode=3).check()


def test_summary_takes_the_slowest_prefill_rank_and_the_link_rate() -> None:
    send = {"prompt_tokens": 3, "prefill_compute_s": 0.01, "kv_bytes": 500, "kv_blocks": 1, "descriptors": 8,
            "writes": 4, "pack_s": 0.001, "write_s": 0.002, "credit_wait_s": 0.0, "first_token": 7}
    results = [DisaggRankResult(0, "prefill", 0, 0.1, "nixl/tcp(tcp/eth0)", 1.0, [send]),
               DisaggRankResult(1, "prefill", 1, 0.1, "nixl/tcp(tcp/eth0)", 1.0, [dict(send, write_s=0.004)]),
               DisaggRankResult(2, "decode", 0, 0.2, "nixl/tcp(tcp/eth0)", 1.0,
                                [{"request": 0, "kv_wait_s": 0.02, "unpack_s": 0.0, "first_decode_step_s": 0.003,
                                  "step_s": [0.001, 0.002], "blocks": [0], "pool_bytes_read": 1000}], [[7, 8, 9]])]
    cfg = DisaggConfig(run=RunConfig(model_dir="m"), prefill=2, decode=1)
    rep = summarize_disagg(results, cfg, ["x"], "m", link_rate_bps=1e9).to_dict()
    req = rep["requests"][0]
    assert req["kv_bytes"] == 1000 and req["kv_write_s"] == 0.004
    assert req["kv_gbytes_per_s"] == pytest.approx(1000 / 0.004 / 1e9)
    assert req["link_fraction"] == pytest.approx(1000 * 8 / 0.004 / 1e9)
    assert req["ttft_s"]["total_s"] == pytest.approx(0.01 + 0.004 + 0.003)
    assert rep["token_ids"] == [7, 8, 9]


def test_cli_disaggregated_json_matches_colocated(base: RunConfig, colocated: list[list[int]],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main

    code = main(["run", "--model", base.model_dir, "--disaggregate", "2:1", "--prefill-tp", "2", "--decode-tp", "1",
                 "--prompt", PROMPTS[0], "--ignore-eos", "--engine", "torch", "--timeout", "60s", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["token_ids"] == colocated[0]
    req = report["requests"][0]
    assert report["prefill"] == {"ranks": 2, "tp": 2} and report["decode"] == {"ranks": 1, "tp": 1}
    assert set(req["ttft_s"]) == {"prefill_compute_s", "kv_transfer_s", "first_decode_step_s", "total_s"}
    assert req["kv_bytes"] > 0 and req["kv_gbytes_per_s"] > 0 and req["link_fraction"] is None
    assert report["transport"].startswith("nixl/") and set(report["connection_setup_s"]) == {
        "prefill0", "prefill1", "decode0"}


@pytest.mark.parametrize(("argv", "needle"), [(["--disaggregate", "2"], "PREFILL:DECODE"),
                                               (["--disaggregate", "2:1", "--prefill-tp", "1"], "one instance"),
                                               (["--disaggregate", "1:1", "--lab", "3x1gbit"], "needs 2")])
def test_cli_refuses_bad_disaggregation_with_exit_2(base: RunConfig, capsys: pytest.CaptureFixture[str],
                                                     argv: list[str], needle: str) -> None:
    from tensorfabric.cli.main import main

    assert main(["run", "--model", base.model_dir, *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_lab_disaggregated_run_crosses_the_link_over_tcp(base: RunConfig, colocated: list[list[int]],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main
    from tensorfabric.lab.netlink import privileges_missing

    missing = privileges_missing()
    if missing:
        pytest.skip(f"the lab needs network namespaces: {missing}")
    code = main(["run", "--model", base.model_dir, "--disaggregate", "1:1", "--lab", "2x1gbit", "--prompt", PROMPTS[0],
                 "--ignore-eos", "--engine", "torch", "--timeout", "60s", "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["token_ids"] == colocated[0], report
    # The lab forces UCX onto TCP over its interface: shared memory between namespaces would skip the link.
    assert report["transport"].startswith("nixl/tcp(tcp/eth0"), report["transport"]
    req = report["requests"][0]
    # A 256 KiB request is latency-bound and may ride the shaper's burst, so only its presence is asserted.
    assert report["link_rate_bps"] == 1e9 and req["link_fraction"] > 0, req


def test_subgroup_refuses_ranks_outside_the_group_or_without_this_rank() -> None:
    from tensorfabric.transfer.group import init

    world = init("gloo", environ={})  # a world of one: no process group
    for bad in ([1], [], [0, 0]):
        with pytest.raises(InputError, match="subgroup ranks"):
            world.subgroup("x", bad)


def test_sampled_tokens_continue_the_prefill_sides_random_stream(base: RunConfig) -> None:
    run = replace(base, prompts=(PROMPTS[0],), sampling=SamplingParams(max_new_tokens=16, temperature=0.9,
                                                                        top_p=0.9, seed=7, stop_at_eos=False))
    expected = run_rank(run).token_ids
    results = launch(DisaggConfig(run=run))
    assert results[1].token_ids == expected
