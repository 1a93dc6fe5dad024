"""GGUF (llama.cpp's file format) into a Hugging Face checkpoint directory we can run.

The ``gguf`` package (llama.cpp's own Python reader) parses the file and dequantises every tensor type it has
a dequantiser for (F32, F16, BF16, Q4_0/Q4_1/Q5_0/Q5_1/Q8_0, the K-quants, ...). What it does not know,
this module adds: which GGUF names are which Hugging Face tensors, the Q/K row order, the config and the
tokenizer.

llama.cpp's converter permutes the rows of ``q_proj``/``k_proj`` of Llama-family models so that rotary pairs
are adjacent (GGML's rope layout); transformers' rotary embedding rotates the two halves of each head, so
the rows are permuted back here. Everything we cannot run faithfully is refused with its name: other
architectures, partial or per-dimension rotary scaling, mixture-of-experts, tokenizers other than byte-level
BPE with a known pre-tokenizer.

GGUF has no checksum. What damage shows is checked: every tensor must dequantise to finite values (a NaN or Inf
block scale, or flipped exponent bits in an F32/F16 tensor, make whole blocks NaN: ik_llama.cpp#649); the error
names the tensor, its type and the block, and nothing is written.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import DataError, InputError, ParseError
from tensorfabric.inference.config import ModelConfig, RopeScaling, config_from_dict
from tensorfabric.inference.gguf_tokenizer import tokenizer_files
from tensorfabric.inference.integrity import describe_non_finite, expected_shapes
from tensorfabric.inference.writer import PlannedTensor, check_target, write_checkpoint

if TYPE_CHECKING:
    import numpy as np
    import torch
    from gguf import GGUFReader, ReaderTensor

__all__ = ["ARCHITECTURES", "DEFAULT_SHARD_BYTES", "GGUFImport", "Progress", "import_gguf", "open_gguf"]

Progress = Callable[[str, int], Callable[[float], None]]
"""``progress(description, total)`` -> ``advance(n)``: how a caller draws the import's bar (one step per tensor)."""

ARCHITECTURES = ("llama",)
DEFAULT_SHARD_BYTES = 2 * 1024 ** 3  # above this the weights are split into files of at most this size
_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
_LAYER = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
          "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_REFUSED = {"rope_freqs.weight": "per-dimension rotary frequencies (Llama 3.1-style rope scaling)"}


@dataclass(frozen=True)
class GGUFImport:
    """What an import wrote."""

    source: str
    directory: str
    architecture: str
    name: str
    config: ModelConfig
    files: tuple[str, ...]
    tensor_types: dict[str, int]  # GGML type name -> how many tensors were stored in it


def open_gguf(path: Path) -> GGUFReader:
    """Parse a GGUF file; a truncated or corrupt one is a ParseError, never a crash later."""
    from gguf import GGUFReader

    path = Path(path)
    if not path.is_file():
        raise InputError(f"GGUF file {str(path)!r} does not exist")
    try:
        reader = GGUFReader(str(path))
    except Exception as exc:  # the reader raises ValueError, IndexError, KeyError ... on bad bytes
        raise ParseError(f"not a readable GGUF file (truncated or corrupt?): {exc}", source=str(path)) from exc
    size = path.stat().st_size
    for t in reader.tensors:
        if t.data_offset + t.n_bytes > size or t.data.nbytes != t.n_bytes:
            raise ParseError(f"tensor {t.name!r} lies outside the file (truncated or corrupt)", source=str(path))
    return reader


def _value(reader: GGUFReader, key: str, source: str, default: Any = None, *, required: bool = False) -> Any:
    field = reader.get_field(key)
    if field is None:
        if required:
            raise ParseError(f"metadata key {key!r} is missing", source=source)
        return default
    try:
        return field.contents()
    except Exception as exc:  # a field whose parts do not decode
        raise ParseError(f"metadata key {key!r} does not decode: {exc}", source=source) from exc


def _count(reader: GGUFReader, key: str, source: str, default: int | None = None) -> int:
    value = _value(reader, key, source, default, required=default is None)
    if isinstance(value, list):
        raise InputError(f"{source}: {key} varies per layer ({value[:4]}...), which we cannot run")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ParseError(f"{key}: {value!r} must be a positive integer", source=source)
    return value


def _f32(value: Any, source: str) -> float:
    """A float32 metadata value as the shortest decimal that round-trips it (1e-05, not 9.999999747378752e-06):
    the number the converter was given."""
    import numpy as np

    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"metadata value {value!r} is not a number", source=source)
    return float(str(np.float32(value)))


def gguf_config(reader: GGUFReader, source: str) -> tuple[str, ModelConfig]:
    """The architecture name and the model config the metadata describes."""
    arch = _value(reader, "general.architecture", source, required=True)
    if arch not in ARCHITECTURES:
        raise InputError(f"{source}: architecture {arch!r} cannot be run here; accepted: {', '.join(ARCHITECTURES)}")
    p = f"{arch}."
    if _value(reader, p + "expert_count", source, 0):
        raise InputError(f"{source}: mixture-of-experts models ({p}expert_count) cannot be run here")
    heads = _count(reader, p + "attention.head_count", source)
    hidden = _count(reader, p + "embedding_length", source)
    head_dim = _count(reader, p + "attention.key_length", source, hidden // heads)
    if _count(reader, p + "attention.value_length", source, head_dim) != head_dim:
        raise InputError(f"{source}: key and value head sizes differ, which we cannot run")
    if _count(reader, p + "rope.dimension_count", source, head_dim) != head_dim:
        raise InputError(f"{source}: rotary embedding covers part of each head ({p}rope.dimension_count), "
                         "which we cannot run")
    scaling = _value(reader, p + "rope.scaling.type", source, "none")
    rope = RopeScaling()
    if scaling == "linear":
        rope = RopeScaling("linear", _f32(_value(reader, p + "rope.scaling.factor", source, required=True), source))
    elif scaling != "none":
        raise InputError(f"{source}: rope scaling {scaling!r} is not supported; accepted: none, linear")
    names = {t.name for t in reader.tensors}
    tokens = _value(reader, "tokenizer.ggml.tokens", source, [])
    eos = _value(reader, "tokenizer.ggml.eos_token_id", source)
    raw = {"model_type": "llama", "hidden_size": hidden, "num_attention_heads": heads, "head_dim": head_dim,
           "num_key_value_heads": _count(reader, p + "attention.head_count_kv", source, heads),
           "num_hidden_layers": _count(reader, p + "block_count", source),
           "intermediate_size": _count(reader, p + "feed_forward_length", source),
           "vocab_size": _count(reader, p + "vocab_size", source, len(tokens) or None),
           "rms_norm_eps": _f32(_value(reader, p + "attention.layer_norm_rms_epsilon", source, required=True), source),
           "rope_theta": _f32(_value(reader, p + "rope.freq_base", source, 10000.0), source),
           "rope_scaling": None if rope.kind == "default" else {"rope_type": rope.kind, "factor": rope.factor},
           "max_position_embeddings": _count(reader, p + "context_length", source, 2048),
           "tie_word_embeddings": "output.weight" not in names,
           "bos_token_id": _value(reader, "tokenizer.ggml.bos_token_id", source),
           "eos_token_id": eos, "torch_dtype": "float32"}
    return str(arch), config_from_dict(raw, source)


def _hf_name(name: str, source: str) -> str:
    if name in _REFUSED:
        raise InputError(f"{source}: tensor {name!r} holds {_REFUSED[name]}, which we cannot run")
    if name in _GLOBAL:
        return _GLOBAL[name]
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _LAYER and \
            parts[3] == "weight":
        return f"model.layers.{int(parts[1])}.{_LAYER[parts[2]]}.{parts[3]}"
    if parts[-1] == "bias":
        raise InputError(f"{source}: tensor {name!r} is a bias, which the Llama architecture we import has not")
    raise InputError(f"{source}: tensor {name!r} has no Llama counterpart; is this a Llama-family model?")


def unpermute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's ``permute``: within each head, rows were reordered from [first half, second half] to
    interleaved pairs; put the halves back."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _producer(t: ReaderTensor, hf: str, shape: tuple[int, ...], cfg: ModelConfig, source: str) -> PlannedTensor:
    def produce() -> torch.Tensor:
        import numpy as np
        import torch
        from gguf.constants import GGML_QUANT_SIZES
        from gguf.quants import dequantize

        try:
            with np.errstate(all="ignore"):  # a damaged scale's Inf x 0 is reported below, not as a warning
                values = dequantize(t.data, t.tensor_type)
        except NotImplementedError as exc:
            raise InputError(f"{source}: tensor {t.name!r} is stored as {t.tensor_type.name}, which the gguf "
                             "package cannot dequantise") from exc
        except ValueError as exc:  # block data whose size does not fit its type (a damaged tensor table)
            raise ParseError(f"tensor {t.name!r} ({t.tensor_type.name}) does not decode: {exc}",
                             source=source) from exc
        values = values.astype(np.float32, copy=False).reshape(shape)
        with np.errstate(over="ignore"):  # a finite sum proves every value finite (one pass, no temporary)
            total = values.sum()
        if not np.isfinite(total) and not np.isfinite(values).all():
            # A copy for torch: F32 values are a read-only view of the mapped file.
            block = GGML_QUANT_SIZES[t.tensor_type][0]
            problem = describe_non_finite(torch.from_numpy(np.array(values)), block=block)
            raise DataError(f"{source}: tensor {t.name!r} ({t.tensor_type.name}) dequantises to values that are "
                            f"not numbers: it {problem}; the GGUF file is damaged: download it again and compare "
                            "its sha256 with the publisher's")
        if hf.endswith("self_attn.q_proj.weight"):
            values = unpermute_rows(values, cfg.num_heads)
        elif hf.endswith("self_attn.k_proj.weight"):
            values = unpermute_rows(values, cfg.num_kv_heads)
        # F32 tensors come back as a read-only view of the mapped file; torch wants memory it may own.
        return torch.from_numpy(np.array(values, dtype=np.float32, order="C", copy=not values.flags.writeable))

    return PlannedTensor(hf, shape, produce)


def import_gguf(path: Path, target: Path, *, dtype: str = "float32", shard_bytes: int = DEFAULT_SHARD_BYTES,
                force: bool = False, progress: Progress | None = None) -> GGUFImport:
    """Convert the GGUF file ``path`` into a checkpoint directory ``target`` (absent or empty unless ``force``).
    Every check runs before anything is written; the directory appears complete or not at all. ``progress``
    is advanced once per tensor dequantised (the slow part: seconds to minutes for a real model)."""
    if importlib.util.find_spec("gguf") is None:
        raise InputError("reading GGUF needs the gguf package: pip install gguf==0.19.0")
    if dtype not in ("float32", "bfloat16", "float16"):
        raise InputError(f"dtype {dtype!r} is not one of float32, bfloat16, float16")
    target = Path(target)
    check_target(target, force)
    source = str(path)
    reader = open_gguf(Path(path))
    arch, cfg = gguf_config(reader, source)
    expected = expected_shapes(cfg)
    planned: list[PlannedTensor] = []
    types: Counter[str] = Counter()
    seen: set[str] = set()
    for t in reader.tensors:
        hf = _hf_name(t.name, source)
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        if hf not in expected:
            raise InputError(f"{source}: tensor {t.name!r} ({hf}) is beyond the {cfg.num_layers} layers the "
                             "metadata declares")
        if shape != expected[hf]:
            raise InputError(f"{source}: tensor {t.name!r} has shape {list(shape)}, the metadata implies "
                             f"{list(expected[hf])}")
        if hf in seen:
            raise InputError(f"{source}: two tensors map to {hf} (the second is {t.name!r})")
        seen.add(hf)
        planned.append(_producer(t, hf, shape, cfg, source))
        types[t.tensor_type.name] += 1
    from tensorfabric.inference.weights import tensor_names

    missing = [n for n in tensor_names(cfg, 0, cfg.num_layers, embed=True, head=True) if n not in seen]
    if missing:
        raise InputError(f"{source}: tensors missing for {', '.join(missing[:3])}"
                         f"{f' (+{len(missing) - 3} more)' if len(missing) > 3 else ''}")
    texts = tokenizer_files(reader, source, cfg)
    cfg = replace(cfg, torch_dtype=dtype)
    texts["config.json"] = json.dumps(cfg.to_hf_dict(), indent=2) + "\n"
    size = {"float32": 4}.get(dtype, 2)
    total = sum(p.numel() for p in planned) * size
    name = str(_value(reader, "general.name", source, "") or "")  # read before writing: it may not decode
    if progress is not None:
        planned = _counted(planned, progress(f"importing {name or Path(path).name}", len(planned)))
    files = write_checkpoint(target, planned, texts, dtype=dtype, force=force,
                             shard_bytes=shard_bytes if total > shard_bytes else None)
    return GGUFImport(source=source, directory=str(target), architecture=arch, name=name, config=cfg,
                      files=tuple(files), tensor_types=dict(sorted(types.items())))


def _counted(planned: list[PlannedTensor], advance: Callable[[float], None]) -> list[PlannedTensor]:
    """The same tensors, each advancing the bar once its values are produced."""
    def counted(produce: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def run() -> torch.Tensor:
            values = produce()
            advance(1)
            return values

        return run

    return [replace(p, produce=counted(p.produce)) for p in planned]
