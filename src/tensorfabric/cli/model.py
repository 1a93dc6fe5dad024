"""``tensorfabric model``: make and inspect Llama-family checkpoints."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import click

from tensorfabric.cli._common import SIZE, console, emit_json, progress
from tensorfabric.cli._options import count, json_option

__all__ = ["cli"]


@click.group("model")
def cli() -> None:
    """Make and inspect Llama-family checkpoints (Hugging Face layout)."""


@cli.command("make-tiny")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--layers", default=4, show_default=True, type=count(1, 1024))
@click.option("--hidden", default=256, show_default=True, type=count(1, 1 << 16))
@click.option("--heads", default=8, show_default=True, type=count(1, 1024))
@click.option("--kv-heads", default=4, show_default=True, type=count(1, 1024))
@click.option("--vocab", default=512, show_default=True, type=count(1, 1 << 20))
@click.option("--intermediate", default=None, type=count(1, 1 << 20), help="MLP width [default: 2.5 x hidden]")
@click.option("--seed", default=0, show_default=True, type=count(0, 2**63 - 1))
@click.option("--tie/--no-tie", default=False, show_default=True, help="Tie lm_head to the embedding.")
@click.option("--qkv-bias", is_flag=True, help="Give q/k/v a bias (Qwen2-style).")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32",
              show_default=True)
@click.option("--shard-size", type=SIZE, default=None, help="Split weights into files of at most this size.")
@click.option("--force", is_flag=True, help="Replace the checkpoint in a non-empty DIRECTORY.")
@json_option("Print the written config as JSON.")
def make_tiny_cmd(directory: Path, layers: int, hidden: int, heads: int, kv_heads: int, vocab: int,
                  intermediate: int | None, seed: int, tie: bool, qkv_bias: bool, dtype: str,
                  shard_size: float | None, force: bool, as_json: bool) -> int:
    """Write a random-initialised checkpoint with a byte-level tokenizer into DIRECTORY (absent or empty)."""
    from tensorfabric.inference.tiny import tiny_config, write_tiny

    cfg = tiny_config(layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads, vocab=vocab,
                      intermediate=intermediate, tie=tie, qkv_bias=qkv_bias)
    files = write_tiny(directory, cfg, seed=seed, dtype=dtype, force=force,
                       shard_bytes=int(shard_size) if shard_size else None)
    if as_json:
        emit_json({"directory": str(directory), "parameters": cfg.parameter_count(), "files": files,
                   "config": cfg.to_hf_dict()})
    else:
        console().print(f"wrote {directory} ({cfg.parameter_count():,} parameters): {', '.join(files)}")
    return 0


@cli.command("import-gguf")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32",
              show_default=True, help="Stored weight type (float32 keeps the dequantised values exactly).")
@click.option("--shard-size", type=SIZE, default="2GiB", show_default=True,
              help="Above this total size, split weights into files of at most this size.")
@click.option("--force", is_flag=True, help="Replace the checkpoint in a non-empty DIRECTORY.")
@json_option("Print what was written as JSON.")
def import_gguf_cmd(file: Path, directory: Path, dtype: str, shard_size: float, force: bool, as_json: bool) -> int:
    """Convert a llama.cpp GGUF FILE (Llama architecture) into a checkpoint DIRECTORY (absent or empty).

    Every tensor must dequantise to finite values (exit 1 naming the tensor otherwise, DIRECTORY untouched); the
    weight files' sha256 go into DIRECTORY/SHA256SUMS, which every later load verifies."""
    from tensorfabric.inference.gguf_import import import_gguf

    with ExitStack() as stack:
        done = import_gguf(file, directory, dtype=dtype, shard_bytes=int(shard_size), force=force,
                           progress=import_bars(stack))
    cfg = done.config
    if as_json:
        emit_json({"source": done.source, "directory": done.directory, "architecture": done.architecture,
                   "name": done.name, "parameters": cfg.parameter_count(), "files": list(done.files),
                   "tensor_types": done.tensor_types, "config": cfg.to_hf_dict()})
    else:
        types = ", ".join(f"{n} {k}" for k, n in done.tensor_types.items())
        console().print(f"imported {done.name or file.name} ({done.architecture}, {cfg.parameter_count():,} "
                        f"parameters; tensors: {types}) into {directory}: {', '.join(done.files)}", markup=False)
    return 0


def import_bars(stack: ExitStack) -> Callable[[str, int], Callable[[float], None]]:
    """An import's progress bar, drawn on stderr while stderr is a terminal (nothing in a pipe or a log), so
    ``--json`` on stdout stays clean; closed with ``stack``."""
    def start(description: str, total: int) -> Callable[[float], None]:
        return stack.enter_context(progress(description, total, enabled=sys.stderr.isatty()))

    return start


@cli.command("info")
@click.argument("directory", type=click.Path(path_type=Path))
@json_option()
def info_cmd(directory: Path, as_json: bool) -> int:
    """Validate a checkpoint directory (every tensor's shape, the weight files' checksums) and show its shape."""
    from tensorfabric.inference.checkpoint import open_checkpoint
    from tensorfabric.inference.config import load_config
    from tensorfabric.inference.integrity import check_shapes
    from tensorfabric.inference.weights import tensor_names

    cfg = load_config(directory)
    ckpt = open_checkpoint(directory)  # DataError (exit 1) when a weight file fails its SHA256SUMS
    ckpt.require(tensor_names(cfg, 0, cfg.num_layers, embed=True, head=True))
    check_shapes(ckpt.shapes, cfg)
    files = sorted({p.name for p in ckpt.files.values()})
    summary = {"directory": str(directory), "model_type": cfg.model_type, "parameters": cfg.parameter_count(),
               "layers": cfg.num_layers, "hidden": cfg.hidden_size, "heads": cfg.num_heads,
               "kv_heads": cfg.num_kv_heads, "vocab": cfg.vocab_size, "rope": cfg.rope.kind,
               "tied": cfg.tie_word_embeddings, "files": files, "tensors": len(ckpt.files),
               "checksums": ckpt.verification.summary()}
    if as_json:
        emit_json(summary)
    else:
        con = console()
        for key, value in summary.items():
            con.print(f"{key:>12}: {value}")
    return 0
