"""The Llama-family decoder, computed on one rank's shard.

Numerics follow transformers' LlamaForCausalLM (RMSNorm in float32, rotary tables in float32, softmax in
float32) so logits match it to float32 rounding. Tensor-parallel communication goes through a ``TPComm``:
two all-reduces per layer (after o_proj and after down_proj), one all-gather of embedding rows for the
vocab-parallel embedding and one all-gather of vocab-parallel logits.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tensorfabric.inference.config import ModelConfig
from tensorfabric.inference.plan import ShardPlan
from tensorfabric.inference.weights import LayerWeights, ShardWeights

if TYPE_CHECKING:
    import torch

__all__ = ["KVCache", "LocalComm", "ShardedLlama", "TPComm", "rope_inv_freq"]


class TPComm(Protocol):
    """The tensor-parallel collectives the model needs. ``phase`` is ``prefill`` or ``decode``."""

    def reduce(self, t: torch.Tensor, phase: str) -> torch.Tensor: ...

    def gather_last(self, t: torch.Tensor) -> torch.Tensor: ...

    def gather_rows(self, t: torch.Tensor) -> torch.Tensor: ...


class LocalComm:
    """tp = 1: nothing to exchange."""

    def reduce(self, t: torch.Tensor, phase: str) -> torch.Tensor:
        return t

    def gather_last(self, t: torch.Tensor) -> torch.Tensor:
        return t

    def gather_rows(self, t: torch.Tensor) -> torch.Tensor:
        return t


def rope_inv_freq(cfg: ModelConfig) -> torch.Tensor:
    """Rotary inverse frequencies, with linear or Llama-3 scaling applied."""
    import torch

    dim = cfg.head_dim
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    r = cfg.rope
    if r.kind == "linear":
        return inv / r.factor
    if r.kind == "llama3":
        # Llama 3.1: long wavelengths are slowed by ``factor``, short ones kept, the band between blended.
        low_wavelen = r.original_max_position_embeddings / r.low_freq_factor
        high_wavelen = r.original_max_position_embeddings / r.high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / r.factor, inv)
        smooth = (r.original_max_position_embeddings / wavelen - r.low_freq_factor) / (
            r.high_freq_factor - r.low_freq_factor)
        blended = (1 - smooth) * scaled / r.factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return torch.where(medium, blended, scaled)
    return inv


@dataclass
class KVCache:
    """Per-layer key/value tensors ``[batch, local kv heads, max_len, head_dim]`` plus the padding mask."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    valid: torch.Tensor  # [batch, max_len] bool: False at left padding
    positions: torch.Tensor  # [batch, max_len] rotary position of each cache slot


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    import torch

    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    import torch

    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class ShardedLlama:
    """One rank's part of the decoder: its pipeline stage's layers, its tensor-parallel slices."""

    def __init__(self, cfg: ModelConfig, plan: ShardPlan, weights: ShardWeights, comm: TPComm,
                 dtype: torch.dtype) -> None:
        self.cfg, self.plan, self.w, self.comm, self.dtype = cfg, plan, weights, comm, dtype
        self.heads = cfg.num_heads // plan.tp
        self.kv_heads = cfg.num_kv_heads // plan.tp
        self.vocab_start, self.vocab_stop = plan.part(cfg.vocab_size)
        self.inv_freq = rope_inv_freq(cfg)

    def new_cache(self, valid: torch.Tensor, max_len: int) -> KVCache:
        """A cache for ``valid`` ([batch, prompt_len] bool, False at left padding) growing to ``max_len``."""
        import torch

        batch, prompt_len = valid.shape
        full = torch.ones(batch, max_len, dtype=torch.bool)
        full[:, :prompt_len] = valid
        positions = (full.long().cumsum(-1) - 1).clamp(min=0)
        shape = (batch, self.kv_heads, max_len, self.cfg.head_dim)
        n = len(self.w.layers)
        return KVCache([torch.zeros(shape, dtype=self.dtype) for _ in range(n)],
                       [torch.zeros(shape, dtype=self.dtype) for _ in range(n)], full, positions)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Vocab-parallel lookup. Each rank holds a range of rows and sends only the rows of the distinct ids in
        ``ids`` that fall in its range (a 512-token prompt of text uses a few hundred ids at most); every token
        then copies its row locally. Rows are copied, never summed, so the result is bit-identical to tp=1."""
        import torch
        import torch.nn.functional as F

        assert self.w.embed is not None, "embed() runs on the first pipeline stage only"
        if self.plan.tp == 1:
            return F.embedding(ids, self.w.embed)
        distinct, where = torch.unique(ids, return_inverse=True)  # sorted
        # Vocabulary ranges are contiguous and in rank order, so rank r's ids are one run of the sorted ids.
        per_rank = self.vocab_stop - self.vocab_start
        edges = torch.searchsorted(distinct, torch.arange(1, self.plan.tp) * per_rank).tolist()
        bounds = [0, *edges, distinct.numel()]
        counts = [b - a for a, b in itertools.pairwise(bounds)]
        width = max(counts)  # all_gather wants one shape from every rank: pad to the largest run
        r = self.plan.tp_rank
        mine = F.embedding(distinct[bounds[r]:bounds[r + 1]] - self.vocab_start, self.w.embed)
        gathered = self.comm.gather_rows(F.pad(mine, (0, 0, 0, width - counts[r])))
        rows = torch.cat([gathered[i * width:i * width + n] for i, n in enumerate(counts)])
        return F.embedding(where, rows)

    def forward_layers(self, h: torch.Tensor, cache: KVCache, start: int, phase: str) -> torch.Tensor:
        """Run this stage's layers on hidden states for cache slots ``[start, start + h.shape[1])``."""
        import torch

        stop = start + h.shape[1]
        pos = cache.positions[:, start:stop]
        freqs = pos.unsqueeze(-1).to(torch.float32) * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(self.dtype).unsqueeze(1), emb.sin().to(self.dtype).unsqueeze(1)
        bias: torch.Tensor | None = None
        causal = False
        if bool(cache.valid[:, :stop].all()) and start in (0, stop - 1):
            # No padding: a whole prompt is plain causal attention, where the fused kernel skips the blocks
            # above the diagonal (half the work), and one new token sees every slot (no mask at all).
            causal = start == 0 and stop > 1
        else:
            q_idx = torch.arange(start, stop).unsqueeze(-1)
            k_idx = torch.arange(stop).unsqueeze(0)
            allowed = (k_idx <= q_idx).unsqueeze(0) & cache.valid[:, :stop].unsqueeze(1)
            bias = torch.zeros(allowed.shape, dtype=self.dtype).masked_fill(~allowed, torch.finfo(self.dtype).min)
            bias = bias.unsqueeze(1)
        for i, layer in enumerate(self.w.layers):
            h = h + self._attention(_rms_norm(h, layer.in_norm, self.cfg.rms_norm_eps), layer, cache, i,
                                    start, cos, sin, bias, causal, phase)
            h = h + self._mlp(_rms_norm(h, layer.post_norm, self.cfg.rms_norm_eps), layer, phase)
        return h

    def _attention(self, x: torch.Tensor, w: LayerWeights, cache: KVCache, i: int, start: int,
                   cos: torch.Tensor, sin: torch.Tensor, bias: torch.Tensor | None, causal: bool,
                   phase: str) -> torch.Tensor:
        import torch.nn.functional as F

        b, t, _ = x.shape
        hd = self.cfg.head_dim
        q = F.linear(x, w.q, w.q_b).view(b, t, self.heads, hd).transpose(1, 2)
        k = F.linear(x, w.k, w.k_b).view(b, t, self.kv_heads, hd).transpose(1, 2)
        v = F.linear(x, w.v, w.v_b).view(b, t, self.kv_heads, hd).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        stop = start + t
        cache.keys[i][:, :, start:stop] = k
        cache.values[i][:, :, start:stop] = v
        keys, values = cache.keys[i][:, :, :stop], cache.values[i][:, :, :stop]
        # torch's fused attention (flash kernel on CPU): no [t, s] score matrix per head in memory, softmax
        # accumulated in float32 for every dtype; the additive bias, when there is one, carries causality and
        # left padding. enable_gqa lets each KV head serve its group of query heads without copies.
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=bias, is_causal=causal, scale=hd ** -0.5,
                                             enable_gqa=self.heads != self.kv_heads)
        out = out.transpose(1, 2).reshape(b, t, self.heads * hd)
        out = self.comm.reduce(F.linear(out, w.o), phase)
        return out if w.o_b is None else out + w.o_b

    def _mlp(self, x: torch.Tensor, w: LayerWeights, phase: str) -> torch.Tensor:
        import torch.nn.functional as F

        inner = F.silu(F.linear(x, w.gate, w.gate_b)) * F.linear(x, w.up, w.up_b)
        out = self.comm.reduce(F.linear(inner, w.down), phase)
        return out if w.down_b is None else out + w.down_b

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits (float32) for hidden states ``h`` on the last stage."""
        import torch
        import torch.nn.functional as F

        assert self.w.norm is not None and self.w.lm_head is not None, "logits() runs on the last stage only"
        local = F.linear(_rms_norm(h, self.w.norm, self.cfg.rms_norm_eps), self.w.lm_head)
        return self.comm.gather_last(local).to(torch.float32)
