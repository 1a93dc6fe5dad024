"""Load one rank's shard of a Llama-family checkpoint.

Megatron layout: q/k/v and gate/up are column-parallel (a rank keeps a block of output rows), o_proj and
down_proj are row-parallel (a block of input columns; their bias is added once, after the all-reduce), and
the embedding and lm_head are vocab-parallel (a block of vocabulary rows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tensorfabric.inference.checkpoint import Checkpoint
from tensorfabric.inference.config import ModelConfig
from tensorfabric.inference.plan import ShardPlan

if TYPE_CHECKING:
    import torch

__all__ = ["LayerWeights", "ShardWeights", "load_shard", "tensor_names"]


@dataclass
class LayerWeights:
    in_norm: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    o: torch.Tensor
    post_norm: torch.Tensor
    gate: torch.Tensor
    up: torch.Tensor
    down: torch.Tensor
    q_b: torch.Tensor | None = None
    k_b: torch.Tensor | None = None
    v_b: torch.Tensor | None = None
    o_b: torch.Tensor | None = None
    gate_b: torch.Tensor | None = None
    up_b: torch.Tensor | None = None
    down_b: torch.Tensor | None = None


@dataclass
class ShardWeights:
    layers: list[LayerWeights]
    embed: torch.Tensor | None  # vocab rows of this tp rank (first stage only)
    norm: torch.Tensor | None  # final norm (last stage only)
    lm_head: torch.Tensor | None  # vocab rows of this tp rank (last stage only)

    def nbytes(self) -> int:
        total = 0
        for t in (self.embed, self.norm, self.lm_head):
            total += 0 if t is None else t.numel() * t.element_size()
        for layer in self.layers:
            for t in vars(layer).values():
                total += 0 if t is None else t.numel() * t.element_size()
        return total


def _prefix(i: int) -> str:
    return f"model.layers.{i}."


def tensor_names(cfg: ModelConfig, start: int, stop: int, *, embed: bool, head: bool) -> list[str]:
    """Every tensor name a stage holding layers ``[start, stop)`` needs."""
    names: list[str] = []
    for i in range(start, stop):
        p = _prefix(i)
        names += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
        names += [f"{p}self_attn.{x}_proj.weight" for x in "qkvo"]
        names += [f"{p}mlp.{x}_proj.weight" for x in ("gate", "up", "down")]
        if cfg.qkv_bias:
            names += [f"{p}self_attn.{x}_proj.bias" for x in "qkv"]
        if cfg.o_bias:
            names.append(p + "self_attn.o_proj.bias")
        if cfg.mlp_bias:
            names += [f"{p}mlp.{x}_proj.bias" for x in ("gate", "up", "down")]
    if embed or (head and cfg.tie_word_embeddings):
        names.append("model.embed_tokens.weight")
    if head:
        names.append("model.norm.weight")
        if not cfg.tie_word_embeddings:
            names.append("lm_head.weight")
    return names


def load_shard(ckpt: Checkpoint, cfg: ModelConfig, plan: ShardPlan, dtype: torch.dtype,
               advance: Callable[[float], None] | None = None) -> ShardWeights:
    """Read exactly this rank's slices. ``advance(1)`` is called per layer and per embedding/head."""
    start, stop = plan.layers(cfg)
    ckpt.require(tensor_names(cfg, start, stop, embed=plan.first_stage, head=plan.last_stage))
    hd = cfg.head_dim
    q0, q1 = (x * hd for x in plan.part(cfg.num_heads))
    k0, k1 = (x * hd for x in plan.part(cfg.num_kv_heads))
    f0, f1 = plan.part(cfg.intermediate_size)
    v0, v1 = plan.part(cfg.vocab_size)
    tick = advance or (lambda n: None)

    def rows(name: str, a: int, b: int) -> torch.Tensor:
        return ckpt.read(name, 0, a, b, dtype)

    def cols(name: str, a: int, b: int) -> torch.Tensor:
        return ckpt.read(name, 1, a, b, dtype)

    def whole(name: str) -> torch.Tensor:
        return ckpt.read(name, dtype=dtype)

    layers: list[LayerWeights] = []
    for i in range(start, stop):
        a, m = _prefix(i) + "self_attn.", _prefix(i) + "mlp."
        layer = LayerWeights(
            in_norm=whole(_prefix(i) + "input_layernorm.weight"),
            q=rows(a + "q_proj.weight", q0, q1), k=rows(a + "k_proj.weight", k0, k1),
            v=rows(a + "v_proj.weight", k0, k1), o=cols(a + "o_proj.weight", q0, q1),
            post_norm=whole(_prefix(i) + "post_attention_layernorm.weight"),
            gate=rows(m + "gate_proj.weight", f0, f1), up=rows(m + "up_proj.weight", f0, f1),
            down=cols(m + "down_proj.weight", f0, f1))
        if cfg.qkv_bias:
            layer.q_b = rows(a + "q_proj.bias", q0, q1)
            layer.k_b = rows(a + "k_proj.bias", k0, k1)
            layer.v_b = rows(a + "v_proj.bias", k0, k1)
        if cfg.o_bias:
            layer.o_b = whole(a + "o_proj.bias")
        if cfg.mlp_bias:
            layer.gate_b = rows(m + "gate_proj.bias", f0, f1)
            layer.up_b = rows(m + "up_proj.bias", f0, f1)
            layer.down_b = whole(m + "down_proj.bias")
        layers.append(layer)
        tick(1)
    embed = rows("model.embed_tokens.weight", v0, v1) if plan.first_stage else None
    norm = lm_head = None
    if plan.last_stage:
        norm = whole("model.norm.weight")
        if cfg.tie_word_embeddings:
            lm_head = embed if embed is not None else rows("model.embed_tokens.weight", v0, v1)
        else:
            lm_head = rows("lm_head.weight", v0, v1)
    tick(1)
    return ShardWeights(layers=layers, embed=embed, norm=norm, lm_head=lm_head)
