"""Text in, text out: ``tokenizer.json`` through the ``tokenizers`` package.

The tiny model gets a byte-level tokenizer written in the same format real checkpoints ship, so one code
path serves both: ids 0 and 1 are ``<s>``/``</s>``, ids 2..257 are the 256 bytes, the rest are reserved.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError, ParseError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["BYTE_OFFSET", "TOKENIZER_NAME", "byte_level_tokenizer", "chat_prompt", "load_tokenizer"]

TOKENIZER_NAME = "tokenizer.json"
BYTE_OFFSET = 2


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in for every byte (what the ByteLevel pre-tokenizer emits)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def byte_level_tokenizer(vocab_size: int) -> Tokenizer:
    """A tokenizer with one token per byte, ``<s>`` prepended, reserved tokens filling ``vocab_size``."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    if vocab_size < 256 + BYTE_OFFSET:
        raise InputError(f"vocab size {vocab_size} is too small for a byte-level tokenizer; use at least 258")
    vocab = {"<s>": 0, "</s>": 1}
    vocab.update({ch: b + BYTE_OFFSET for b, ch in _bytes_to_unicode().items()})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken("<s>", special=True), AddedToken("</s>", special=True)])
    reserved = [AddedToken(f"<reserved_{i}>", special=True) for i in range(vocab_size - len(vocab))]
    tok.add_special_tokens(reserved)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return tok


def load_tokenizer(directory: Path) -> Tokenizer:
    from tokenizers import Tokenizer

    path = Path(directory) / TOKENIZER_NAME
    if not path.is_file():
        raise InputError(f"{str(directory)!r} has no {TOKENIZER_NAME}; text needs the checkpoint's tokenizer")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on malformed files
        raise ParseError(f"not a tokenizers JSON file: {exc}", source=str(path)) from exc


def chat_prompt(directory: Path, text: str) -> str:
    """``text`` as one user turn under the checkpoint's chat template (from ``tokenizer_config.json``), ending
    where the assistant's answer starts. Rendered in jinja2's sandbox, as transformers does: a template is
    data from a file and must not reach Python objects."""
    import json

    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from tensorfabric.jsonload import load_json

    path = Path(directory) / "tokenizer_config.json"
    try:
        config = (load_json(path.read_text(encoding="utf-8"), what="a tokenizer_config.json object", source=str(path))
                  if path.is_file() else {})
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParseError(f"not valid JSON: {exc}", source=str(path)) from exc
    template = config.get("chat_template") if isinstance(config, dict) else None
    if not isinstance(template, str):
        raise InputError(f"{str(directory)!r} has no chat template (tokenizer_config.json chat_template); "
                         "run without --chat")

    def special(key: str) -> str:
        value = config.get(key)
        return value if isinstance(value, str) else ""

    def raise_exception(message: str) -> None:  # what templates call to reject a conversation
        raise TemplateError(message)

    try:
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        return env.from_string(template).render(messages=[{"role": "user", "content": text}],
                                                add_generation_prompt=True, bos_token=special("bos_token"),
                                                eos_token=special("eos_token"))
    except TemplateError as exc:
        raise ParseError(f"chat template does not render: {exc}", source=str(path)) from exc
