"""Random-initialised checkpoints in Hugging Face layout, for tests, demos and benchmarks."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError
from tensorfabric.inference.config import FAMILIES, ModelConfig, RopeScaling
from tensorfabric.inference.tokenizer import TOKENIZER_NAME, byte_level_tokenizer
from tensorfabric.inference.writer import PlannedTensor, check_target, write_checkpoint

if TYPE_CHECKING:
    import torch

__all__ = ["make_tiny", "tiny_config", "write_tiny"]


def tiny_config(*, layers: int = 4, hidden: int = 256, heads: int = 8, kv_heads: int = 4, vocab: int = 512,
                intermediate: int | None = None, tie: bool = False, qkv_bias: bool = False,
                model_type: str = "llama", rope: RopeScaling | None = None,
                max_positions: int = 2048) -> ModelConfig:
    """A small, TP-friendly config. Raises InputError for shapes that cannot form a model."""
    if model_type not in FAMILIES:
        raise InputError(f"model type {model_type!r} is not one of {', '.join(FAMILIES)}")
    for name, value in (("layers", layers), ("hidden", hidden), ("heads", heads), ("kv-heads", kv_heads),
                        ("vocab", vocab)):
        if value < 1:
            raise InputError(f"--{name} {value} must be at least 1")
    if hidden % heads or (hidden // heads) % 2:
        raise InputError(f"--hidden {hidden} must split into {heads} heads of an even size")
    if heads % kv_heads:
        raise InputError(f"--heads {heads} must be a multiple of --kv-heads {kv_heads}")
    return ModelConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate or 2 * hidden + hidden // 2,
                       num_layers=layers, num_heads=heads, num_kv_heads=kv_heads, head_dim=hidden // heads,
                       rms_norm_eps=1e-5, rope_theta=10000.0, rope=rope or RopeScaling(),
                       max_position_embeddings=max_positions, tie_word_embeddings=tie,
                       qkv_bias=qkv_bias or FAMILIES[model_type], o_bias=False, model_type=model_type,
                       bos_token_id=0, eos_token_ids=(1,))


def _tensors(cfg: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    h, hd = cfg.hidden_size, cfg.head_dim
    std = 0.5 / h ** 0.5  # large enough that logits are not all alike, small enough to stay stable

    def rand(*shape: int, scale: float = std) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * scale

    # Tied embeddings double as the output projection, whose scale has to stay near 1/sqrt(hidden).
    embed_scale = h ** -0.5 if cfg.tie_word_embeddings else 1.0
    out: dict[str, torch.Tensor] = {"model.embed_tokens.weight": rand(cfg.vocab_size, h, scale=embed_scale)}
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = 1.0 + rand(h, scale=0.1)
        out[p + "post_attention_layernorm.weight"] = 1.0 + rand(h, scale=0.1)
        out[p + "self_attn.q_proj.weight"] = rand(cfg.num_heads * hd, h)
        out[p + "self_attn.k_proj.weight"] = rand(cfg.num_kv_heads * hd, h)
        out[p + "self_attn.v_proj.weight"] = rand(cfg.num_kv_heads * hd, h)
        out[p + "self_attn.o_proj.weight"] = rand(h, cfg.num_heads * hd)
        if cfg.qkv_bias:
            out[p + "self_attn.q_proj.bias"] = rand(cfg.num_heads * hd, scale=0.1)
            out[p + "self_attn.k_proj.bias"] = rand(cfg.num_kv_heads * hd, scale=0.1)
            out[p + "self_attn.v_proj.bias"] = rand(cfg.num_kv_heads * hd, scale=0.1)
        out[p + "mlp.gate_proj.weight"] = rand(cfg.intermediate_size, h)
        out[p + "mlp.up_proj.weight"] = rand(cfg.intermediate_size, h)
        out[p + "mlp.down_proj.weight"] = rand(h, cfg.intermediate_size)
    out["model.norm.weight"] = 1.0 + rand(h, scale=0.1)
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = rand(cfg.vocab_size, h, scale=1.0 / h ** 0.5)
    return out


def make_tiny(directory: Path, cfg: ModelConfig, *, seed: int = 0, shard_bytes: int | None = None,
              dtype: str = "float32", force: bool = False) -> Path:
    """:func:`write_tiny`, returning the directory."""
    write_tiny(directory, cfg, seed=seed, shard_bytes=shard_bytes, dtype=dtype, force=force)
    return Path(directory)


def write_tiny(directory: Path, cfg: ModelConfig, *, seed: int = 0, shard_bytes: int | None = None,
               dtype: str = "float32", force: bool = False) -> list[str]:
    """Write config.json, safetensors weights (sharded with an index when ``shard_bytes`` is given) and
    tokenizer.json into ``directory``, which must be absent or empty unless ``force``. Returns the names of
    the files written."""
    if dtype not in ("float32", "bfloat16", "float16"):
        raise InputError(f"dtype {dtype!r} is not one of float32, bfloat16, float16")
    cfg = replace(cfg, torch_dtype=dtype)
    check_target(Path(directory), force)
    def keep(t: torch.Tensor) -> Callable[[], torch.Tensor]:
        return lambda: t

    tensors = [PlannedTensor(name, tuple(t.shape), keep(t)) for name, t in _tensors(cfg, seed).items()]
    texts = {TOKENIZER_NAME: byte_level_tokenizer(cfg.vocab_size).to_str(),
             "config.json": json.dumps(cfg.to_hf_dict(), indent=2) + "\n"}
    return write_checkpoint(Path(directory), tensors, texts, dtype=dtype, shard_bytes=shard_bytes, force=force)
