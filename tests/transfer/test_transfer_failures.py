"""Failure paths: a killed or stalled peer becomes TransferError in time; the launcher reports every rank."""

from __future__ import annotations

import time

import pytest

from tensorfabric.errors import TransferError
from tensorfabric.transfer import SpawnError, free_port, spawn, under_torchrun
from tensorfabric.transfer.engines.nixl_engine import available
from tensorfabric.transfer.launch import torchrun_env

from . import _transfer_light as light
from . import _transfer_workers as w

PEER_TIMEOUT_S = 10.0


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_rank_killed_mid_collective_makes_the_other_raise_transfer_error() -> None:
    with pytest.raises(SpawnError) as info:
        spawn(w.killed_peer, 2, args=(PEER_TIMEOUT_S,), timeout_s=50, grace_s=PEER_TIMEOUT_S + 10)
    err = info.value
    assert "exited with code 17" in err.failures[1]
    survivor = err.results[0]
    assert survivor["error"] is not None, "the surviving rank finished a collective with a dead peer"
    assert survivor["op"] == "all_reduce" and survivor["group"] == "world" and survivor["peer"] == 1
    assert "suspect rank 1" in survivor["error"]
    assert survivor["seconds"] < PEER_TIMEOUT_S + 5  # within the group's timeout (plus scheduling slack)


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.skipif(not available(), reason="nixl-cu12 is not installed (pip install 'tensorfabric[nixl]')")
def test_rank_killed_during_a_nixl_collective_makes_the_other_raise_transfer_error() -> None:
    with pytest.raises(SpawnError) as info:
        spawn(w.killed_peer, 2, args=(PEER_TIMEOUT_S, "nixl", 1000), timeout_s=50, grace_s=PEER_TIMEOUT_S + 10)
    survivor = info.value.results[0]
    assert survivor["error"] is not None, "the surviving rank finished a NIXL collective with a dead peer"
    assert survivor["op"] == "all_reduce" and survivor["group"] == "world" and survivor["peer"] == 1
    assert "through nixl" in survivor["error"] and "suspect rank 1" in survivor["error"]
    assert "exited" in survivor["error"]  # noticed by the liveness check, not only by the timeout
    assert survivor["seconds"] < PEER_TIMEOUT_S + 5


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.skipif(not available(), reason="nixl-cu12 is not installed (pip install 'tensorfabric[nixl]')")
def test_stalled_peer_times_out_through_nixl_naming_it() -> None:
    survivor, _ = spawn(w.stalled_peer, 2, args=(3.0, "nixl"), timeout_s=40)
    assert survivor["error"] is not None, "rank 0 finished a NIXL all_reduce its peer never joined"
    assert survivor["peer"] == 1 and survivor["op"] == "all_reduce" and "timed out after 3 s" in survivor["error"]
    assert survivor["seconds"] < 3.0 + 5


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_stalled_peer_times_out_with_transfer_error_naming_it() -> None:
    survivor, _ = spawn(w.stalled_peer, 2, args=(3.0,), timeout_s=40)
    assert survivor["error"] is not None, "rank 0 finished an all_reduce its peer never joined"
    assert survivor["peer"] == 1 and survivor["op"] == "all_reduce" and survivor["group"] == "world"
    assert "timed out" in survivor["error"]


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_missing_peer_at_rendezvous_fails_init_within_the_timeout() -> None:
    survivor, _ = spawn(w.missing_peer, 2, args=(3.0,), timeout_s=40)
    assert survivor["error"] is not None, "init succeeded without its peer"
    assert survivor["op"] == "init" and survivor["group"] == "world"
    assert "rendezvous of 2 ranks" in survivor["error"]
    assert survivor["seconds"] < 3.0 + 10  # the timeout, plus scheduling slack on a loaded machine


@pytest.mark.timeout(60)
def test_a_raising_rank_brings_its_traceback_back() -> None:
    with pytest.raises(SpawnError) as info:
        spawn(light.raises, 2, timeout_s=40)
    assert "ValueError: rank one breaks on purpose" in info.value.failures[1]
    assert info.value.results == {0: 0}
    assert isinstance(info.value, TransferError)


@pytest.mark.timeout(60)
def test_launch_timeout_kills_ranks_and_reports_their_stacks() -> None:
    t0 = time.monotonic()
    with pytest.raises(SpawnError) as info:
        spawn(light.hangs, 2, timeout_s=4)
    assert time.monotonic() - t0 < 30
    assert "timed out after 4 s" in str(info.value)
    for rank in (0, 1):
        assert "still running" in info.value.failures[rank]
        assert "hangs" in info.value.failures[rank]  # faulthandler's stack names the function


@pytest.mark.timeout(60)
def test_ranks_get_a_torchrun_style_environment() -> None:
    port = free_port()
    envs = spawn(light.echo_env, 2, timeout_s=40, env={"EXTRA": "yes"}, master_port=port)
    for rank, env in enumerate(envs):
        assert env == {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": "2",
                       "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2", "EXTRA": "yes"}
        assert under_torchrun(env)


def test_under_torchrun_and_env_helpers() -> None:
    assert not under_torchrun({})
    assert not under_torchrun({"RANK": "0", "WORLD_SIZE": "2"})
    env = torchrun_env(1, 4, 2222, parent={})
    assert env["OMP_NUM_THREADS"] == "1" and env["RANK"] == "1"
    assert "OMP_NUM_THREADS" not in torchrun_env(0, 4, 2222, parent={"OMP_NUM_THREADS": "3"})
    with pytest.raises(TransferError, match="nprocs"):
        spawn(light.raises, 0)


@pytest.mark.timeout(60)
def test_a_rank_failure_is_one_line_naming_the_rank_the_class_and_the_message() -> None:
    from tensorfabric.errors import InputError
    from tensorfabric.transfer.launch import SpawnInputError

    with pytest.raises(SpawnError) as info:
        spawn(light.input_error, 2, timeout_s=40)
    err = info.value
    assert str(err) == "rank 1 failed: InputError: 3 KV heads do not split over tp 2 (1 other rank stopped after it)"
    assert isinstance(err, SpawnInputError) and isinstance(err, InputError)  # bad input found in a rank: exit 2
    assert "Traceback" in err.detail() and "--- rank 0 ---" in err.detail()


@pytest.mark.timeout(60)
def test_a_stopped_rank_ends_the_launch_within_its_timeout_plus_two_seconds() -> None:
    t0 = time.monotonic()
    with pytest.raises(SpawnError) as info:
        spawn(light.stops_itself, 2, timeout_s=4)
    elapsed = time.monotonic() - t0
    assert elapsed < 4 + 2, f"the launch took {elapsed:.1f} s with --timeout 4 s"  # a bound, the acceptance's
    assert "timed out after 4 s" in str(info.value) and "\n" not in str(info.value)


def test_the_line_says_whether_the_other_ranks_failed_on_their_own_or_were_stopped() -> None:
    from tensorfabric.transfer.spawn import RankFailure

    dead = RankFailure(0, "", "process exited with code -9 without a result")
    raised = RankFailure(1, "TransferError", "recv from rank 0 timed out")
    stopped = RankFailure(2, "", "was stopped after the first failure")
    assert str(SpawnError("x", {0: dead, 1: raised}, first=0)) == \
        "rank 0 process exited with code -9 without a result (1 other rank failed too)"
    assert str(SpawnError("x", {0: dead, 2: stopped}, first=0)).endswith("(1 other rank stopped after it)")
    assert str(SpawnError("x", {0: dead, 1: raised, 2: stopped}, first=0)).endswith(
        "(2 other ranks: 1 failed too, 1 stopped after it)")
