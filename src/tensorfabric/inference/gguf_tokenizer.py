"""A GGUF file's tokenizer as ``tokenizer.json`` + ``tokenizer_config.json``.

GGUF keeps the vocabulary, the BPE merges, a type per token (1 normal, 2 unknown, 3 control, 4 user-defined,
5 unused, 6 byte), the special token ids and the chat template under ``tokenizer.*``; the pre-tokenizer is only
named (``tokenizer.ggml.pre``), and llama.cpp hard-codes the splitting rules for each name. Only names whose
rules are GPT-2's byte-level regex, optionally after isolating every digit, map onto ``tokenizers``' own
pre-tokenizers exactly; any other name is refused rather than approximated, since a wrong split yields
valid-looking but different token ids.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError, ParseError
from tensorfabric.inference.config import ModelConfig
from tensorfabric.inference.tokenizer import TOKENIZER_NAME

if TYPE_CHECKING:
    from gguf import GGUFReader

__all__ = ["PRE_TOKENIZERS", "TOKENIZER_CONFIG_NAME", "tokenizer_files"]

TOKENIZER_CONFIG_NAME = "tokenizer_config.json"
# llama.cpp pre-tokenizer name -> whether digits are split off one by one before GPT-2's regex
# (llama.cpp's llama-vocab.cpp lists these names under the same regex_exprs).
PRE_TOKENIZERS = {"gpt-2": False, "mpt": False, "olmo": False, "jais": False,
                  "starcoder": True, "refact": True, "command-r": True, "smollm": True, "codeshell": True}
CONTROL, USER_DEFINED = 3, 4


def _get(reader: GGUFReader, key: str, source: str, default: Any = None) -> Any:
    field = reader.get_field(key)
    if field is None:
        return default
    try:
        return field.contents()
    except Exception as exc:  # a field whose parts do not decode
        raise ParseError(f"metadata key {key!r} does not decode: {exc}", source=source) from exc


def _pre_tokenizer(name: str, source: str) -> Any:
    from tokenizers import pre_tokenizers

    if name not in PRE_TOKENIZERS:
        raise InputError(f"{source}: pre-tokenizer {name!r} is not supported; accepted: {', '.join(PRE_TOKENIZERS)}")
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if PRE_TOKENIZERS[name]:
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    return byte_level


def tokenizer_files(reader: GGUFReader, source: str, cfg: ModelConfig) -> dict[str, str]:
    """``{tokenizer.json: ..., tokenizer_config.json: ...}`` from the GGUF metadata."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, processors

    kind = _get(reader, "tokenizer.ggml.model", source)
    if kind != "gpt2":
        raise InputError(f"{source}: tokenizer model {kind!r} is not supported; accepted: gpt2 (byte-level BPE)")
    pre = _get(reader, "tokenizer.ggml.pre", source)
    if not isinstance(pre, str):
        raise InputError(f"{source}: tokenizer.ggml.pre is missing, so the pre-tokenizer is unknown")
    pre_tokenizer = _pre_tokenizer(pre, source)
    tokens = _get(reader, "tokenizer.ggml.tokens", source, [])
    types = _get(reader, "tokenizer.ggml.token_type", source, [1] * len(tokens))
    merges = _get(reader, "tokenizer.ggml.merges", source, [])
    if not tokens or len(types) != len(tokens):
        raise ParseError(f"{len(tokens)} tokens but {len(types)} token types", source=source)
    if len(tokens) > cfg.vocab_size:
        raise ParseError(f"{len(tokens)} tokens exceed the vocabulary size {cfg.vocab_size}", source=source)
    vocab = {str(tok): i for i, tok in enumerate(tokens)}
    if len(vocab) != len(tokens):
        raise ParseError("the token list repeats a token", source=source)
    pairs: list[tuple[str, str]] = []
    for merge in merges:
        left, sep, right = str(merge).partition(" ")
        if not sep or not left or not right:
            raise ParseError(f"merge {merge!r} is not two tokens separated by one space", source=source)
        pairs.append((left, right))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=pairs, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(str(tokens[i]), special=True, normalized=False)
                            for i, t in enumerate(types) if t == CONTROL])
    tok.add_tokens([AddedToken(str(tokens[i]), normalized=False) for i, t in enumerate(types) if t == USER_DEFINED])

    def token(key: str) -> str | None:
        idx = _get(reader, f"tokenizer.ggml.{key}_token_id", source)
        if idx is None:
            return None
        if not isinstance(idx, int) or not 0 <= idx < len(tokens):
            raise ParseError(f"tokenizer.ggml.{key}_token_id {idx!r} is outside the vocabulary", source=source)
        return str(tokens[idx])

    bos = token("bos")
    # Without the key nothing says llama.cpp would add BOS for this model; adding none keeps the text's ids.
    add_bos = bool(_get(reader, "tokenizer.ggml.add_bos_token", source, False)) and bos is not None
    if add_bos and bos is not None:
        tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, vocab[bos])])
    template = _get(reader, "tokenizer.chat_template", source)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": bos, "eos_token": token("eos"),
              "unk_token": token("unknown"), "pad_token": token("padding"), "add_bos_token": add_bos,
              "add_eos_token": False, "clean_up_tokenization_spaces": False,
              "model_max_length": cfg.max_position_embeddings}
    if isinstance(template, str):
        config["chat_template"] = template
    return {TOKENIZER_NAME: tok.to_str(), TOKENIZER_CONFIG_NAME: json.dumps(config, indent=2) + "\n"}
