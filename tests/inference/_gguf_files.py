"""Small GGUF files written with the gguf package's own writer, in the layout llama.cpp's converter uses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter, TokenType
from gguf.quants import quantize
from safetensors.torch import load_file

from tensorfabric.inference.config import ModelConfig
from tensorfabric.inference.tokenizer import load_tokenizer

HF_TO_GGUF = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight"}
LAYER = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
         "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
         "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_name(hf: str) -> str:
    if hf in HF_TO_GGUF:
        return HF_TO_GGUF[hf]
    _, _, layer, rest = hf.split(".", 3)
    module, _, kind = rest.rpartition(".")
    return f"blk.{layer}.{LAYER[module]}.{kind}"


def llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """What llama.cpp's convert_hf_to_gguf does to q_proj/k_proj rows (pairs of rotary halves interleaved)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(path: Path, checkpoint: Path, cfg: ModelConfig, qtypes: dict[str, GGMLQuantizationType], *,
               arch: str = "llama", raw: dict[str, tuple[GGMLQuantizationType, np.ndarray]] | None = None,
               extra: dict[str, np.ndarray] | None = None) -> Path:
    """Convert a tiny checkpoint to GGUF. ``qtypes`` maps a GGUF name suffix (``attn_q.weight``) to its type;
    everything else is F32. ``raw`` gives some tensors as already-encoded blocks (GGUF name -> type, bytes);
    ``extra`` adds float32 tensors the checkpoint does not have."""
    tensors = load_file(str(checkpoint / "model.safetensors"))
    w = GGUFWriter(str(path), arch)
    w.add_string("general.name", "tiny test model")
    w.add_block_count(cfg.num_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(cfg.intermediate_size)
    w.add_head_count(cfg.num_heads)
    w.add_head_count_kv(cfg.num_kv_heads)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(cfg.rope_theta)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_vocab_size(cfg.vocab_size)
    tok = load_tokenizer(checkpoint)
    vocab = sorted(tok.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1])
    tokens = [t for t, _ in vocab]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([TokenType.CONTROL if t.startswith("<") and len(t) > 1 else TokenType.NORMAL for t in tokens])
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_add_bos_token(True)
    w.add_chat_template("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                        "{% if add_generation_prompt %}assistant:{% endif %}")
    for hf, t in tensors.items():
        name = gguf_name(hf)
        if raw and name in raw:
            w.add_tensor(name, raw[name][1], raw_dtype=raw[name][0])
            continue
        data = t.float().numpy()
        if name.endswith("attn_q.weight"):
            data = llama_cpp_permute(data, cfg.num_heads)
        elif name.endswith("attn_k.weight"):
            data = llama_cpp_permute(data, cfg.num_kv_heads)
        qtype = next((q for suffix, q in qtypes.items() if name.endswith(suffix)), GGMLQuantizationType.F32)
        if qtype == GGMLQuantizationType.F32:
            w.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
        elif qtype == GGMLQuantizationType.F16:
            w.add_tensor(name, data.astype(np.float16))
        else:
            w.add_tensor(name, quantize(data, qtype), raw_dtype=qtype)
    for name, data in (extra or {}).items():
        w.add_tensor(name, data.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
