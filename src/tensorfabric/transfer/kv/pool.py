"""The paged KV layout a decode worker registers once, and the descriptor lists that write into it.

Layout (one pool per decode rank, holding that rank's KV heads only)::

    pool[block][layer][k|v][head][token][head_dim]      block = BLOCK_TOKENS tokens (default 16)

so one block of one layer's K (or V) for a run of consecutive heads is one contiguous byte range. A prefill
rank stages its prompt's cache in the same layout (its own heads), and for every (block, layer, k|v) writes the
heads it shares with each decode rank straight to their place in that rank's pool: a prefill tp of 2 and a
decode tp of 1 become two writers into disjoint head ranges of one pool, a decode tp of 2 from a prefill tp of
1 one writer into two pools. The KV heads are resharded by the descriptors themselves, never gathered
afterwards. Adjacent ranges (whole blocks when both sides hold the same heads) are merged into one descriptor.

This module is plain arithmetic on offsets and torch views: it never talks to NIXL (see ``kv_transfer``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["BLOCK_TOKENS", "KVLayout", "Write", "blocks_for", "coalesce", "head_range", "pack", "plan_writes",
           "unpack"]

BLOCK_TOKENS = 16
"""Tokens per block, vLLM's default page size: small enough that a short prompt wastes little, large enough
that a block of one layer and head (16 x 128 x 2 B = 4 KiB for a Llama-3-8B head) is a page-sized write."""


@dataclass(frozen=True)
class KVLayout:
    """Byte layout of a pool (or a prefill rank's staging area) holding heads ``[head_start, head_start +
    kv_heads)`` of every layer."""

    layers: int
    kv_heads: int
    head_dim: int
    block_tokens: int
    elem_bytes: int
    head_start: int = 0

    def __post_init__(self) -> None:
        for name in ("layers", "kv_heads", "head_dim", "block_tokens", "elem_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise InputError(f"KV layout {name} {value!r} must be a positive integer")

    @property
    def head_bytes(self) -> int:
        """One head of one layer's K (or V) for one block."""
        return self.block_tokens * self.head_dim * self.elem_bytes

    @property
    def block_bytes(self) -> int:
        return self.layers * 2 * self.kv_heads * self.head_bytes

    def offset(self, block: int, layer: int, kv: int, head: int) -> int:
        """Byte offset of ``head`` (a global head index) of ``layer``'s K (kv=0) or V (kv=1) in ``block``."""
        local = head - self.head_start
        return block * self.block_bytes + ((layer * 2 + kv) * self.kv_heads + local) * self.head_bytes

    def shape(self, blocks: int) -> tuple[int, int, int, int, int, int]:
        return (blocks, self.layers, 2, self.kv_heads, self.block_tokens, self.head_dim)


@dataclass(frozen=True)
class Write:
    """One descriptor pair: ``nbytes`` from ``src`` (offset in the staging area) to ``dst`` (offset in the
    remote pool)."""

    src: int
    dst: int
    nbytes: int


def blocks_for(tokens: int, block_tokens: int = BLOCK_TOKENS) -> int:
    return -(-tokens // block_tokens)


def head_range(kv_heads: int, tp: int, rank: int) -> tuple[int, int]:
    """Global KV heads ``[start, stop)`` held by tensor-parallel rank ``rank`` (contiguous, in rank order, as
    ``ShardPlan.part`` cuts k_proj/v_proj)."""
    if kv_heads % tp:
        raise InputError(f"{kv_heads} KV heads do not split over tp {tp}")
    per = kv_heads // tp
    return rank * per, (rank + 1) * per


def coalesce(writes: Sequence[Write]) -> list[Write]:
    """Merge each write into the previous one when both its source and destination continue it."""
    out: list[Write] = []
    for w in writes:
        if out and out[-1].src + out[-1].nbytes == w.src and out[-1].dst + out[-1].nbytes == w.dst:
            last = out[-1]
            out[-1] = Write(last.src, last.dst, last.nbytes + w.nbytes)
        else:
            out.append(w)
    return out


def plan_writes(src: KVLayout, dst: KVLayout, src_blocks: Sequence[int], dst_blocks: Sequence[int],
                layers: range) -> list[Write]:
    """Descriptors that copy ``layers`` of the heads ``src`` and ``dst`` share, block ``src_blocks[i]`` of the
    staging area to block ``dst_blocks[i]`` of the pool; [] when they share no head."""
    if (src.layers, src.head_dim, src.block_tokens, src.elem_bytes) != \
            (dst.layers, dst.head_dim, dst.block_tokens, dst.elem_bytes):
        raise InputError(f"KV layouts differ beyond their heads: {src} vs {dst}")
    if len(src_blocks) != len(dst_blocks):
        raise InputError(f"{len(src_blocks)} source blocks for {len(dst_blocks)} destination blocks")
    lo = max(src.head_start, dst.head_start)
    hi = min(src.head_start + src.kv_heads, dst.head_start + dst.kv_heads)
    if lo >= hi:
        return []
    n = (hi - lo) * src.head_bytes
    writes = [Write(src.offset(sb, layer, kv, lo), dst.offset(db, layer, kv, lo), n)
              for sb, db in zip(src_blocks, dst_blocks, strict=True) for layer in layers for kv in (0, 1)]
    return coalesce(writes)


def pack(keys: Sequence[torch.Tensor], values: Sequence[torch.Tensor], tokens: int, out: torch.Tensor,
         layout: KVLayout, layers: range | None = None) -> int:
    """Copy the first ``tokens`` slots of per-layer caches (``[kv_heads, >= tokens, head_dim]``) into ``out``
    (a uint8 area of at least that many blocks) in block layout; the blocks used. The tail of the last block
    is zeroed, so no stale bytes of an earlier request travel. ``layers``: only these (default all)."""
    import torch.nn.functional as F

    nb = blocks_for(tokens, layout.block_tokens)
    dtype = keys[0].dtype
    view = out[:nb * layout.block_bytes].view(dtype).view(layout.shape(nb))
    span = nb * layout.block_tokens
    for layer in layers if layers is not None else range(len(keys)):
        for kv, src in ((0, keys[layer]), (1, values[layer])):
            dst = view[:, layer, kv]  # [nb, heads, block_tokens, head_dim]
            full = src[:, :tokens]
            if span > tokens:
                full = F.pad(full, (0, 0, 0, span - tokens))
            dst.copy_(full.reshape(layout.kv_heads, nb, layout.block_tokens, layout.head_dim).transpose(0, 1))
    return nb


def unpack(pool: torch.Tensor, layout: KVLayout, blocks: Sequence[int], tokens: int, dtype: torch.dtype
           ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per-layer K and V (``[kv_heads, tokens, head_dim]``, fresh tensors) read from ``blocks`` of ``pool``."""
    import torch

    total = pool.numel() // layout.block_bytes
    view = pool[:total * layout.block_bytes].view(dtype).view(layout.shape(total))
    index = torch.tensor(list(blocks), dtype=torch.long)
    picked = view.index_select(0, index)  # [nb, layers, 2, heads, bt, hd], a copy
    span = len(blocks) * layout.block_tokens
    per = picked.permute(1, 2, 3, 0, 4, 5).reshape(layout.layers, 2, layout.kv_heads, span, layout.head_dim)
    keys = [per[layer, 0, :, :tokens].clone() for layer in range(layout.layers)]
    values = [per[layer, 1, :, :tokens].clone() for layer in range(layout.layers)]
    return keys, values
