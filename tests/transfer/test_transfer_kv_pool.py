"""The paged KV layout and its descriptor lists: resharding heads by descriptors reproduces the cache exactly."""

from __future__ import annotations

import pytest
import torch

from tensorfabric.errors import InputError
from tensorfabric.transfer.kv.pool import KVLayout, Write, blocks_for, coalesce, head_range, pack, plan_writes, unpack


def _cache(layers: int, heads: int, tokens: int, hd: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(1)
    keys = [torch.randn(heads, tokens + 3, hd, generator=g) for _ in range(layers)]
    values = [torch.randn(heads, tokens + 3, hd, generator=g) for _ in range(layers)]
    return keys, values


def _apply(writes: list[Write], src: torch.Tensor, dst: torch.Tensor) -> None:
    for w in writes:
        dst[w.dst:w.dst + w.nbytes] = src[w.src:w.src + w.nbytes]


@pytest.mark.parametrize(("ptp", "dtp"), [(1, 1), (2, 1), (1, 2), (2, 4), (4, 2)])
def test_descriptors_reshard_heads_exactly(ptp: int, dtp: int) -> None:
    layers, heads, hd, bt, tokens = 3, 4, 8, 4, 10  # 10 tokens: 3 blocks, the last one partial
    keys, values = _cache(layers, heads, tokens, hd)
    nb = blocks_for(tokens, bt)
    dst_blocks = [5, 2, 7]  # a block table, not 0..n-1: the pool is paged
    pools = []
    for d in range(dtp):
        a, b = head_range(heads, dtp, d)
        pools.append((KVLayout(layers, b - a, hd, bt, 4, a), torch.zeros(8 * layers * 2 * (b - a) * bt * hd * 4,
                                                                           dtype=torch.uint8)))
    for p in range(ptp):
        a, b = head_range(heads, ptp, p)
        src = KVLayout(layers, b - a, hd, bt, 4, a)
        staging = torch.full((nb * src.block_bytes,), 255, dtype=torch.uint8)
        assert pack([k[a:b] for k in keys], [v[a:b] for v in values], tokens, staging, src) == nb
        for dst, pool in pools:
            _apply(plan_writes(src, dst, list(range(nb)), dst_blocks, range(layers)), staging, pool)
    for dst, pool in pools:
        got_k, got_v = unpack(pool, dst, dst_blocks, tokens, torch.float32)
        a, b = dst.head_start, dst.head_start + dst.kv_heads
        for layer in range(layers):
            assert torch.equal(got_k[layer], keys[layer][a:b, :tokens])
            assert torch.equal(got_v[layer], values[layer][a:b, :tokens])


def test_same_heads_coalesce_to_one_descriptor_per_block_run() -> None:
    lay = KVLayout(layers=4, kv_heads=2, head_dim=8, block_tokens=16, elem_bytes=2)
    writes = plan_writes(lay, lay, [0, 1, 2], [3, 4, 9], range(4))
    # Blocks 0,1 land in 3,4 (adjacent) -> one write; block 2 lands in 9 -> another.
    assert writes == [Write(0, 3 * lay.block_bytes, 2 * lay.block_bytes),
                      Write(2 * lay.block_bytes, 9 * lay.block_bytes, lay.block_bytes)]


def test_half_the_heads_write_one_range_per_layer_and_kv() -> None:
    src = KVLayout(4, 1, 8, 16, 2, head_start=1)
    dst = KVLayout(4, 2, 8, 16, 2, head_start=0)
    writes = plan_writes(src, dst, [0], [0], range(4))
    assert len(writes) == 8 and all(w.nbytes == src.head_bytes for w in writes)
    assert writes[0].dst == dst.head_bytes  # head 1 sits after head 0 in the pool


def test_disjoint_heads_plan_nothing_and_mismatches_refuse() -> None:
    assert plan_writes(KVLayout(2, 1, 8, 4, 4, 0), KVLayout(2, 1, 8, 4, 4, 1), [0], [0], range(2)) == []
    with pytest.raises(InputError, match="differ"):
        plan_writes(KVLayout(2, 1, 8, 4, 4), KVLayout(2, 1, 8, 8, 4), [0], [0], range(2))
    with pytest.raises(InputError, match="blocks"):
        plan_writes(KVLayout(2, 1, 8, 4, 4), KVLayout(2, 1, 8, 4, 4), [0, 1], [0], range(2))
    with pytest.raises(InputError, match="split"):
        head_range(4, 3, 0)
    with pytest.raises(InputError, match="block_tokens"):
        KVLayout(2, 1, 8, 0, 4)


def test_coalesce_keeps_non_adjacent_writes() -> None:
    assert coalesce([Write(0, 0, 4), Write(4, 8, 4)]) == [Write(0, 0, 4), Write(4, 8, 4)]
    assert coalesce([Write(0, 8, 4), Write(4, 12, 4), Write(8, 16, 1)]) == [Write(0, 8, 9)]
