"""Write a Hugging Face checkpoint directory without ever leaving a half-written or mixed one.

Weights are streamed into safetensors files one tensor at a time (a tensor is produced, written and
dropped), so importing a model costs about one tensor of memory, not the whole model. Everything is written
into a staging directory next to the target; an absent or empty target is then replaced by one rename. A
non-empty target is refused unless ``force``; with ``force`` each file is moved in by ``os.replace`` and the
old checkpoint's weight files that the new one does not have are removed (a stale index would otherwise win
over a new single file). Nothing else in the directory is touched.

Every tensor is checked finite before it is written, and again after its conversion to the stored dtype (a value
float16 cannot hold becomes Inf). Each weight file's sha256 is computed from the bytes as they are written and
recorded in ``SHA256SUMS``, which the loader verifies (:mod:`~tensorfabric.inference.integrity`).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError
from tensorfabric.inference.checkpoint import INDEX_NAME, SINGLE_NAME
from tensorfabric.inference.integrity import MANIFEST_NAME, STAMP_NAME, check_finite, manifest_text

if TYPE_CHECKING:
    import torch

__all__ = ["PlannedTensor", "check_target", "write_checkpoint"]

_ST_DTYPES = {"float32": ("F32", 4), "float16": ("F16", 2), "bfloat16": ("BF16", 2)}
_WEIGHT_GLOBS = (SINGLE_NAME, INDEX_NAME, "model-*-of-*.safetensors", MANIFEST_NAME, STAMP_NAME)


@dataclass(frozen=True)
class PlannedTensor:
    """A tensor to write: its name and shape are known up front, its values come from ``produce``."""

    name: str
    shape: tuple[int, ...]
    produce: Callable[[], torch.Tensor]

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def check_target(target: Path, force: bool) -> None:
    """Refuse a target that is a file, or a non-empty directory without ``force``."""
    if target.exists() and not target.is_dir():
        raise InputError(f"{str(target)!r} exists and is not a directory")
    if not force and target.is_dir() and any(target.iterdir()):
        raise InputError(f"{str(target)!r} is not empty; pass --force to replace the checkpoint in it")


def _write_safetensors(path: Path, tensors: list[PlannedTensor], dtype: str) -> str:
    """Write one safetensors file; return the sha256 of its bytes."""
    import torch

    code, size = _ST_DTYPES[dtype]
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for t in tensors:
        nbytes = t.numel() * size
        header[t.name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the format pads the header so tensor data starts 8-byte aligned
    want = getattr(torch, dtype)
    digest = hashlib.sha256()
    with path.open("wb") as fh:
        for chunk in (struct.pack("<Q", len(raw)), raw):
            fh.write(chunk)
            digest.update(chunk)
        for t in tensors:
            produced = t.produce()
            value = produced.to(want).contiguous()
            if tuple(value.shape) != t.shape:
                raise AssertionError(f"{t.name}: produced shape {tuple(value.shape)}, planned {t.shape}")
            check_finite(t.name, produced, stored=value if value.dtype != produced.dtype else None, stored_as=dtype)
            data = value.view(torch.uint8).numpy().tobytes()
            fh.write(data)
            digest.update(data)
        fh.flush()
        os.fsync(fh.fileno())
    return digest.hexdigest()


def _shards(tensors: list[PlannedTensor], size: int, shard_bytes: int | None) -> list[list[PlannedTensor]]:
    shards: list[list[PlannedTensor]] = [[]]
    used = 0
    for t in tensors:
        nbytes = t.numel() * size
        if shard_bytes is not None and shards[-1] and used + nbytes > shard_bytes:
            shards.append([])
            used = 0
        shards[-1].append(t)
        used += nbytes
    return shards


def _publish(staging: Path, target: Path, force: bool) -> None:
    if target.is_dir() and not any(target.iterdir()):
        target.rmdir()
    if not target.exists():
        try:
            staging.rename(target)
            return
        except OSError:  # another writer got there between the check and the rename
            pass
    if not force:  # the target filled up while we wrote: never merge into someone else's files
        raise InputError(f"{str(target)!r} is no longer empty; pass --force to replace the checkpoint in it")
    new = {p.name for p in staging.iterdir()}
    stale = {p for pattern in _WEIGHT_GLOBS for p in target.glob(pattern) if p.name not in new}
    # Weights first, the index (if any) and the checksums next, config.json last: a reader that sees the new
    # config.json sees the new weights too. The old verified-signature cache goes with the old weights.
    order = sorted(new, key=lambda n: (n == "config.json", n in (INDEX_NAME, MANIFEST_NAME)))
    for name in order:
        os.replace(staging / name, target / name)
    for path in stale:
        path.unlink(missing_ok=True)
    staging.rmdir()


def write_checkpoint(target: Path, tensors: Iterable[PlannedTensor], texts: Mapping[str, str], *,
                     dtype: str = "float32", shard_bytes: int | None = None, force: bool = False) -> list[str]:
    """Write safetensors weights and the text files ``texts`` (name -> content) into ``target``: one
    ``model.safetensors``, or with ``shard_bytes`` files ``model-NNNNN-of-NNNNN.safetensors`` of at most that
    size (a single larger tensor gets a file of its own) plus ``model.safetensors.index.json``. Returns the
    names of the files written, sorted."""
    if dtype not in _ST_DTYPES:
        raise InputError(f"dtype {dtype!r} is not one of {', '.join(_ST_DTYPES)}")
    target = Path(target)
    check_target(target, force)
    target.parent.mkdir(parents=True, exist_ok=True)
    planned = list(tensors)
    size = _ST_DTYPES[dtype][1]
    shards = _shards(planned, size, shard_bytes)
    # mkdir, not mkdtemp: the directory becomes the user's checkpoint and gets their umask, not 0700.
    staging = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    staging.mkdir()
    try:
        digests: dict[str, str] = {}
        if len(shards) == 1 and shard_bytes is None:
            digests[SINGLE_NAME] = _write_safetensors(staging / SINGLE_NAME, shards[0], dtype)
        else:
            weight_map: dict[str, str] = {}
            for i, shard in enumerate(shards, 1):
                file_name = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
                digests[file_name] = _write_safetensors(staging / file_name, shard, dtype)
                weight_map.update(dict.fromkeys((t.name for t in shard), file_name))
            total = sum(t.numel() * size for t in planned)
            index = {"metadata": {"total_size": total}, "weight_map": weight_map}
            (staging / INDEX_NAME).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
        (staging / MANIFEST_NAME).write_text(manifest_text(digests), encoding="utf-8")
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
        written = sorted(p.name for p in staging.iterdir())
        _publish(staging, target, force)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return written
