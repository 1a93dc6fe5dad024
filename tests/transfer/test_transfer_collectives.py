"""Spawned Gloo ranks: every collective against torch.distributed, mesh subgroups, codec bounds, bucketing.

One spawn per world size runs every check (starting ranks dominates the cost on a small machine); each test
then asserts on its part of the result.
"""

from __future__ import annotations

from typing import Any

import pytest

from tensorfabric.transfer import spawn
from tensorfabric.transfer.engines.nixl_engine import available

from . import _transfer_workers as w

pytestmark = pytest.mark.slow
NUMEL = 1000  # not a multiple of the codec block: exercises padding

_cache: dict[tuple[int, str], list[dict[str, Any]]] = {}
NIXL = pytest.param("nixl", marks=pytest.mark.skipif(not available(), reason="nixl-cu12 is not installed "
                                                     "(pip install 'tensorfabric[nixl]')"))


def _results(nranks: int, engine: str = "torch") -> list[dict[str, Any]]:
    if (nranks, engine) not in _cache:
        _cache[(nranks, engine)] = spawn(w.suite, nranks, args=(NUMEL, engine), timeout_s=200)
    return _cache[(nranks, engine)]


@pytest.mark.timeout(220)
@pytest.mark.parametrize("engine", ["torch", NIXL])
@pytest.mark.parametrize("nranks", [2, 4])
def test_collectives_match_torch_distributed_bit_for_bit(nranks: int, engine: str) -> None:
    for rank, all_res in enumerate(_results(nranks, engine)):
        res = all_res["exactness"]
        assert res["mismatches"] == [], f"rank {rank}: {res['mismatches']}"
        assert res["size"] == nranks and res["engine"] == engine
        assert res["table"] == [(r, r, r) for r in range(nranks)]
        calls, nbytes = res["stats"]["all_reduce"]
        # 3 dtypes x (4 ops + async), every one recorded with the tensor's size.
        assert calls == 15 and nbytes > 0
        assert set(res["stats"]) >= {"all_gather", "reduce_scatter", "broadcast", "all_to_all", "batch_send_recv"}
        if engine == "torch":
            assert res["transport"] == "gloo/tcp"
            assert not any(res["nixl"].values())
        else:
            # UCX's own lane report: shared memory between two local processes, Gloo for what is too big.
            assert res["transport"].startswith("nixl/shm(") and res["transport"].endswith("+gloo/tcp")
            # Every small collective went through NIXL; reduce_scatter/all_to_all are never routed.
            assert res["nixl"]["all_reduce"] >= 15 and res["nixl"]["broadcast"] == 3 * nranks
            assert res["nixl"]["all_gather"] == 6 and res["nixl"]["batch_send_recv"] == 3
            assert res["nixl"]["reduce_scatter"] == 0 and res["nixl"]["all_to_all"] == 0


@pytest.mark.timeout(220)
@pytest.mark.parametrize("engine", ["torch", NIXL])
def test_mesh_builds_tp_and_pp_groups_with_group_local_ranks(engine: str) -> None:
    for rank, all_res in enumerate(_results(4, engine)):
        res = all_res["mesh"]
        pp, tp = divmod(rank, 2)
        assert res["tp"]["ranks"] == (2 * pp, 2 * pp + 1)
        assert res["pp"]["ranks"] == (tp, tp + 2)
        assert res["tp"]["name"] == f"world.tp{pp}" and res["pp"]["name"] == f"world.pp{tp}"
        assert res["tp"]["rank"] == tp and res["pp"]["rank"] == pp
        assert res["tp"]["sum"] == float(4 * pp + 1)
        assert res["pp"]["sum"] == float(2 * tp + 2)
        # broadcast src=1 is group rank 1: global 2pp+1 in TP, global tp+2 in PP.
        assert res["tp"]["bcast"] == float(2 * pp + 1) and res["pp"]["bcast"] == float(tp + 2)


@pytest.mark.timeout(220)
@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("engine", ["torch", NIXL])
def test_codecs_meet_documented_bounds_and_report_exact_wire_bytes(nranks: int, engine: str) -> None:
    reports = [r["codecs"] for r in _results(nranks, engine)]
    for rank, report in enumerate(reports):
        # codecs x input kinds x dtypes x (sum, avg, pipelined sum, all_gather)
        assert len(report) == 4 * 4 * 2 * 4
        for case, res in report.items():
            assert res["violations"] == 0, f"rank {rank} {case}: max error {res['max_err']}"
            if case.startswith("all_reduce") and not case.endswith("pipelined"):
                assert res["wire"] == res["expected_wire"], case
                assert res["exact_zero"], case
    # Every rank decodes the same bytes, so all ranks hold the same result.
    assert all(r == reports[0] for r in reports[1:])


@pytest.mark.timeout(220)
@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("engine", ["torch", NIXL])
def test_bucketing_round_trips_mixed_shapes_and_dtypes_in_place(nranks: int, engine: str) -> None:
    for all_res in _results(nranks, engine):
        res = all_res["bucketing"]
        assert all(res["ok"]), res
        assert all(res["same_storage"])
        assert res["shapes"] == [(3,), (2, 5), (), (7, 1, 2), (1,), (130,), (4,), (2, 2)]


@pytest.mark.timeout(220)
@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("engine", ["torch", NIXL])
def test_compressed_collectives_through_nixl_pieces_equal_the_gloo_route(nranks: int, engine: str) -> None:
    routes = [r["codec_routes"] for r in _results(nranks, engine)]
    for rank, by_codec in enumerate(routes):
        for name, res in by_codec.items():
            assert res["all_reduce_equal"] and res["all_gather_equal"], f"rank {rank} {name}: {res}"
    # ... and every rank holds the same all_reduce result.
    assert all(r == routes[0] for r in routes[1:])


@pytest.mark.timeout(120)
def test_a_nixl_write_is_announced_by_the_next_non_blocking_take() -> None:
    """Over UCX's TCP transport (as between lab hosts) a write completes only after the peer's ack, and NIXL
    sends its notification from the writer's next state check; over shared memory it completes at once."""
    if not available():
        pytest.skip("nixl-cu12 is not installed (pip install 'tensorfabric[nixl]')")
    results = spawn(w.notify_suite, 2, timeout_s=100, env={"UCX_TLS": "tcp", "UCX_NET_DEVICES": "lo"})
    res = results[0]["notify"]
    assert results[0]["transport"].startswith("nixl/tcp("), results[0]["transport"]
    # The round that counts is the last one: its preconditions held (earlier rounds may have failed them).
    assert res["blocked"] and not res["blocked"][-1], res
    assert res["received"][-1], f"rank 1 never saw rank 0's write: {res}"


@pytest.mark.timeout(120)
def test_inline_all_reduce_bytes_are_settled_before_every_torch_collective() -> None:
    """Over UCX's TCP transport (as between lab hosts), where a notification the socket cannot take at once
    waits in UCX's buffer for the sender's next progress: a rank that left a compressed all_reduce for a
    Gloo collective without settling could hold a peer that still waits for its bytes (a timeout here)."""
    if not available():
        pytest.skip("nixl-cu12 is not installed (pip install 'tensorfabric[nixl]')")
    results = spawn(w.inline_suite, 3, timeout_s=100, env={"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"})
    for rank, res in enumerate(results):
        assert res["transport"].startswith("nixl/tcp("), res["transport"]
        assert all(res["unsettled_after"]) and len(res["unsettled_after"]) == 12, (rank, res)
        assert all(res["settled_after_gloo"]), (rank, res)
        assert all(res["credit_whole"]), (rank, res)
    assert all(r["sums"] == results[0]["sums"] for r in results)  # every rank decoded the same bytes


@pytest.mark.timeout(220)
@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("engine", ["torch", NIXL])
def test_lateness_is_the_wait_for_the_last_rank_and_unknown_across_clocks(nranks: int, engine: str) -> None:
    results = [r["arrivals"] for r in _results(nranks, engine)]
    last = nranks - 1
    for rank, res in enumerate(results):
        late = res["late"]
        assert late is not None and set(late) == {"all_reduce", "barrier"}
        # Rank r entered the all_reduce 60 ms per rank later than rank 0, so it waited for the last rank.
        want = 0.06 * (last - rank)
        assert want - 0.01 <= late["all_reduce"] <= want + 0.03, (rank, late)
        assert res["other_clock"] is None and res["uneven"] is None
