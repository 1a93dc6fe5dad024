"""The model description: a Llama-family ``config.json`` read into one frozen record.

Both config spellings seen in the wild are accepted: ``rope_theta`` + ``rope_scaling`` (checkpoints written
by transformers 4.x and most published models) and ``rope_parameters`` (transformers 5.x).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tensorfabric.errors import InputError, ParseError
from tensorfabric.jsonload import load_json

__all__ = ["FAMILIES", "ModelConfig", "RopeScaling", "load_config"]

# model_type -> whether q/k/v carry a bias regardless of ``attention_bias`` (Qwen2 always has one, and no
# bias on o_proj). Mistral is the Llama block without sliding-window attention.
FAMILIES: dict[str, bool] = {"llama": False, "qwen2": True, "mistral": False}
ROPE_TYPES = ("default", "linear", "llama3")


@dataclass(frozen=True)
class RopeScaling:
    """Rotary frequency scaling. ``kind`` is one of ``default``, ``linear``, ``llama3``."""

    kind: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class ModelConfig:
    """Shapes and numerics of a Llama-family decoder."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope: RopeScaling = RopeScaling()
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    model_type: str = "llama"
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()
    torch_dtype: str = "float32"

    def to_hf_dict(self) -> dict[str, Any]:
        """The ``config.json`` transformers reads (4.x spelling, which 5.x also accepts)."""
        rope_scaling: dict[str, Any] | None = None
        if self.rope.kind != "default":
            rope_scaling = {"rope_type": self.rope.kind, "factor": self.rope.factor}
            if self.rope.kind == "llama3":
                rope_scaling.update(low_freq_factor=self.rope.low_freq_factor,
                                    high_freq_factor=self.rope.high_freq_factor,
                                    original_max_position_embeddings=self.rope.original_max_position_embeddings)
        eos: int | list[int] = list(self.eos_token_ids)
        if len(self.eos_token_ids) == 1:
            eos = self.eos_token_ids[0]
        return {
            "architectures": ["Qwen2ForCausalLM" if self.model_type == "qwen2" else "LlamaForCausalLM"],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "num_key_value_heads": self.num_kv_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": rope_scaling,
            "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings,
            "attention_bias": self.qkv_bias and self.model_type != "qwen2",
            "mlp_bias": self.mlp_bias,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": eos,
            "torch_dtype": self.torch_dtype,
        }

    def summary(self) -> dict[str, Any]:
        return asdict(self)

    def parameter_count(self) -> int:
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        per_layer = h * (q + 2 * kv) + q * h + 3 * h * i + 2 * h
        return self.num_layers * per_layer + v * h * (1 if self.tie_word_embeddings else 2) + h


def _int(raw: dict[str, Any], key: str, source: str, default: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ParseError(f"{key}: {value!r} must be a positive integer", source=source)
    return value


def _rope(raw: dict[str, Any], source: str) -> tuple[float, RopeScaling]:
    params = raw.get("rope_parameters")
    scaling = params if isinstance(params, dict) else raw.get("rope_scaling")
    theta = raw.get("rope_theta", (params or {}).get("rope_theta", 10000.0) if isinstance(params, dict) else 10000.0)
    if not isinstance(theta, int | float) or theta <= 0:
        raise ParseError(f"rope_theta: {theta!r} must be a positive number", source=source)
    if scaling is None:
        return float(theta), RopeScaling()
    if not isinstance(scaling, dict):
        raise ParseError(f"rope_scaling: {scaling!r} must be an object or null", source=source)
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise InputError(f"{source}: rope scaling {kind!r} is not supported; accepted: {', '.join(ROPE_TYPES)}")
    try:
        return float(theta), RopeScaling(
            kind=str(kind), factor=float(scaling.get("factor", 1.0)),
            low_freq_factor=float(scaling.get("low_freq_factor", 1.0)),
            high_freq_factor=float(scaling.get("high_freq_factor", 4.0)),
            original_max_position_embeddings=int(scaling.get("original_max_position_embeddings", 8192)))
    except (TypeError, ValueError) as exc:
        raise ParseError(f"rope scaling {scaling!r}: {exc}", source=source) from exc


def config_from_dict(raw: Any, source: str = "config.json") -> ModelConfig:
    """Validate a parsed ``config.json``; raise InputError/ParseError naming what is wrong."""
    try:
        return _config_from_dict(raw, source)
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        if isinstance(exc, InputError):
            raise
        raise ParseError(f"malformed value: {exc}", source=source) from exc


def _config_from_dict(raw: Any, source: str) -> ModelConfig:
    if not isinstance(raw, dict):
        raise ParseError("expected a JSON object", source=source)
    model_type = raw.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        raise InputError(f"{source}: model_type {model_type!r} is not a Llama-family decoder; "
                         f"accepted: {', '.join(FAMILIES)}")
    if raw.get("hidden_act", "silu") != "silu":
        raise InputError(f"{source}: hidden_act {raw.get('hidden_act')!r} is not supported; accepted: silu")
    if raw.get("sliding_window") and raw.get("use_sliding_window", model_type == "mistral"):
        raise InputError(f"{source}: sliding-window attention ({raw['sliding_window']}) is not supported")
    heads = _int(raw, "num_attention_heads", source)
    hidden = _int(raw, "hidden_size", source)
    kv_heads = _int(raw, "num_key_value_heads", source, heads)
    head_dim = raw.get("head_dim") or hidden // heads
    if isinstance(head_dim, bool) or not isinstance(head_dim, int) or head_dim <= 0 or head_dim % 2:
        raise ParseError(f"head_dim: {head_dim!r} must be a positive even integer (rotary pairs)", source=source)
    if heads % kv_heads:
        raise InputError(f"{source}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}")
    eos = raw.get("eos_token_id")
    eos_ids = tuple(eos) if isinstance(eos, list) else (() if eos is None else (eos,))
    theta, rope = _rope(raw, source)
    bias = bool(raw.get("attention_bias", False))
    try:
        return ModelConfig(
            vocab_size=_int(raw, "vocab_size", source), hidden_size=hidden,
            intermediate_size=_int(raw, "intermediate_size", source), num_layers=_int(raw, "num_hidden_layers", source),
            num_heads=heads, num_kv_heads=kv_heads, head_dim=int(head_dim),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-5)), rope_theta=theta, rope=rope,
            max_position_embeddings=_int(raw, "max_position_embeddings", source, 2048),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=bias or FAMILIES[model_type], o_bias=bias and not FAMILIES[model_type],
            mlp_bias=bool(raw.get("mlp_bias", False)), model_type=model_type,
            bos_token_id=raw.get("bos_token_id"), eos_token_ids=tuple(int(e) for e in eos_ids),
            torch_dtype=str(raw.get("torch_dtype") or raw.get("dtype") or "float32"))
    except (TypeError, ValueError) as exc:
        raise ParseError(f"bad value: {exc}", source=source) from exc


def load_config(directory: Path) -> ModelConfig:
    path = Path(directory) / "config.json"
    if Path(directory).exists() and not Path(directory).is_dir():
        raise InputError(f"--model {str(directory)!r} is a file, not a model directory; pass the directory holding "
                         "config.json (a GGUF file is imported first: 'tensorfabric model import-gguf FILE DIR')")
    if not Path(directory).is_dir():
        raise InputError(f"model directory {str(directory)!r} does not exist; make one with "
                         "'tensorfabric model make-tiny DIR' or pass a Hugging Face checkpoint directory")
    if not path.is_file():
        raise InputError(f"{str(directory)!r} has no config.json; is it a Hugging Face checkpoint directory?")
    try:
        raw = load_json(path.read_text(encoding="utf-8"), what="a Hugging Face config.json object", source=str(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParseError(f"not valid JSON: {exc}", source=str(path)) from exc
    return config_from_dict(raw, str(path))
