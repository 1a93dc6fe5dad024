"""Spawned Gloo ranks: every collective against torch.distributed, mesh subgroups, codec bounds, bucketing.

One spawn per world size runs every check (starting ranks dominates the cost on a small machine); each test
then asserts on its part of the result.
"""

from __future__ import annotations

from typing import Any

import pytest

from tensorfabric.transfer import spawn

from . import _transfer_workers as w

pytestmark = pytest.mark.slow
NUMEL = 1000  # not a multiple of the codec block: exercises padding

_cache: dict[int, list[dict[str, Any]]] = {}


def _results(nranks: int) -> list[dict[str, Any]]:
    if nranks not in _cache:
        _cache[nranks] = spawn(w.suite, nranks, args=(NUMEL,), timeout_s=140)
    return _cache[nranks]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("nranks", [2, 4])
def test_collectives_match_torch_distributed_bit_for_bit(nranks: int) -> None:
    for rank, all_res in enumerate(_results(nranks)):
        res = all_res["exactness"]
        assert res["mismatches"] == [], f"rank {rank}: {res['mismatches']}"
        assert res["transport"] == "gloo/tcp"
        assert res["size"] == nranks
        assert res["table"] == [(r, r, r) for r in range(nranks)]
        calls, nbytes = res["stats"]["all_reduce"]
        # 3 dtypes x (3 ops + async), every one recorded with the tensor's size.
        assert calls == 12 and nbytes > 0
        assert set(res["stats"]) >= {"all_gather", "reduce_scatter", "broadcast", "all_to_all", "batch_send_recv"}


@pytest.mark.timeout(150)
def test_mesh_builds_tp_and_pp_groups_with_group_local_ranks() -> None:
    for rank, all_res in enumerate(_results(4)):
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


@pytest.mark.timeout(150)
@pytest.mark.parametrize("nranks", [2, 4])
def test_codecs_meet_documented_bounds_and_report_exact_wire_bytes(nranks: int) -> None:
    reports = [r["codecs"] for r in _results(nranks)]
    for rank, report in enumerate(reports):
        # codecs x input kinds x dtypes x (sum, avg, pipelined sum, all_gather)
        assert len(report) == 3 * 4 * 2 * 4
        for case, res in report.items():
            assert res["violations"] == 0, f"rank {rank} {case}: max error {res['max_err']}"
            if case.startswith("all_reduce") and not case.endswith("pipelined"):
                assert res["wire"] == res["expected_wire"], case
                assert res["exact_zero"], case
    # Every rank decodes the same bytes, so all ranks hold the same result.
    assert all(r == reports[0] for r in reports[1:])


@pytest.mark.timeout(150)
@pytest.mark.parametrize("nranks", [2, 4])
def test_bucketing_round_trips_mixed_shapes_and_dtypes_in_place(nranks: int) -> None:
    for all_res in _results(nranks):
        res = all_res["bucketing"]
        assert all(res["ok"]), res
        assert all(res["same_storage"])
        assert res["shapes"] == [(3,), (2, 5), (), (7, 1, 2), (1,), (130,), (4,), (2, 2)]
