"""Tensor, pipeline and tensor x pipeline parallelism on spawned Gloo ranks against one unsharded rank."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tensorfabric.errors import InputError
from tensorfabric.inference.runner import RankResult, RunConfig, rank_entry, run_rank
from tensorfabric.inference.sampling import SamplingParams
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.transfer.engines.nixl_engine import available
from tensorfabric.transfer.launch import SpawnError, spawn

from ._inference_threads import one_thread  # noqa: F401 -- autouse fixture

pytestmark = pytest.mark.slow

PROMPTS = ("pipelines and tensors", "tp")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> RunConfig:
    directory = make_tiny(tmp_path_factory.mktemp("par"), tiny_config(layers=4, hidden=64, heads=4, kv_heads=2,
                                                                        vocab=320), seed=3)
    return RunConfig(model_dir=str(directory), prompts=PROMPTS, keep_logits=True, timeout_s=60,
                     sampling=SamplingParams(max_new_tokens=32, stop_at_eos=False))


@pytest.fixture(scope="module")
def reference(base: RunConfig) -> RankResult:
    return run_rank(base)


def _max_diff(a: RankResult, b: RankResult) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a.logits, b.logits, strict=True))


NIXL = pytest.param("nixl", marks=pytest.mark.skipif(not available(), reason="nixl-cu12 is not installed"))


@pytest.mark.parametrize("engine", ["torch", NIXL])
@pytest.mark.parametrize(("tp", "pp"), [(2, 1), (1, 2), (2, 2)])
def test_sharded_greedy_tokens_equal_unsharded(base: RunConfig, reference: RankResult, tp: int, pp: int,
                                               engine: str) -> None:
    results = spawn(rank_entry, tp * pp, args=(replace(base, tp=tp, pp=pp, engine=engine),), timeout_s=120)
    assert len(reference.token_ids[0]) == 32
    for r in results:
        assert r.token_ids == reference.token_ids, f"rank {r.rank} of tp={tp} pp={pp}"
    assert _max_diff(results[-1], reference) <= 1e-4  # the last rank is on the last stage and holds logits
    ops = results[0].comm
    if tp > 1:
        # Rank 0 is on the first stage: 2 all-reduces per layer and 1 all-gather of embedding rows per forward
        # pass, plus 1 all-gather of logits when it is also the last stage; prefill is one forward per
        # microbatch (one per stage by default), then 31 decode forwards.
        forwards = pp + 31
        assert ops["all_reduce"]["calls"] == forwards * 2 * (4 // pp)
        assert ops["all_gather"]["calls"] == forwards * (2 if pp == 1 else 1)
    if pp > 1:
        assert ops["batch_send_recv"]["calls"] > 0 and ops["broadcast"]["calls"] == 32
    if engine == "torch":
        assert results[0].transport == "gloo/tcp"
    else:
        # Every decode-sized collective and pipeline hop went through NIXL over UCX shared memory.
        assert results[0].transport.startswith("nixl/shm(")
        assert all(s["nixl_calls"] == s["calls"] for s in ops.values()), ops


def test_world_size_mismatch_fails_fast_on_every_rank(base: RunConfig) -> None:
    with pytest.raises(SpawnError) as info:
        spawn(rank_entry, 2, args=(replace(base, tp=1, pp=1),), timeout_s=60, grace_s=5)
    assert len(info.value.failures) == 2
    assert all("InputError: world size 2 is not tp x pp" in tb for tb in info.value.failures.values())
    with pytest.raises(InputError, match="world size 3"):
        run_rank(replace(base, tp=2), environ={"RANK": "0", "WORLD_SIZE": "3"})


def test_ranks_times_threads_never_exceed_the_cores() -> None:
    from tensorfabric.inference.runner import torch_threads

    assert torch_threads(2, current=8, cores=2) == 1
    assert torch_threads(1, current=8, cores=2) == 2
    assert torch_threads(3, current=8, cores=2) == 1  # one thread is the floor; the report shows the cost
    assert torch_threads(2, current=1, cores=16) == 1  # never above what OMP_NUM_THREADS chose
    assert torch_threads(4, current=16, cores=16) == 4
