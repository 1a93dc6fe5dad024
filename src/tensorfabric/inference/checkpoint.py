"""Hugging Face safetensors checkpoints, read slice by slice.

Each rank asks only for the rows or columns it owns. ``safe_open`` memory-maps the file and ``get_slice``
copies just the requested range, so a rank's resident memory stays near its shard. A file is opened per
tensor and closed right after: the mapped pages a read touches are counted in RSS while the map is alive.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError, ParseError

if TYPE_CHECKING:
    import torch

__all__ = ["INDEX_NAME", "SINGLE_NAME", "Checkpoint", "open_checkpoint"]

SINGLE_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"


def _read_header(path: Path) -> dict[str, dict[str, object]]:
    """Parse a safetensors header without torch, checking every tensor lies inside the file."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            prefix = fh.read(8)
            if len(prefix) != 8:
                raise ParseError("file is shorter than the 8-byte safetensors header length", source=str(path))
            (length,) = struct.unpack("<Q", prefix)
            if length > size - 8 or length > 100_000_000:
                raise ParseError(f"header length {length} exceeds the file size {size}", source=str(path))
            header = json.loads(fh.read(length).decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParseError(f"not a safetensors file: {exc}", source=str(path)) from exc
    if not isinstance(header, dict):
        raise ParseError("safetensors header is not an object", source=str(path))
    data_len = size - 8 - length
    header.pop("__metadata__", None)
    for name, info in header.items():
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and 0 <= offsets[0] <= offsets[1] <= data_len):
            raise ParseError(f"tensor {name!r} lies outside the file (truncated or corrupt)", source=str(path))
    return header


@dataclass(frozen=True)
class Checkpoint:
    """Where each tensor lives. ``files`` maps tensor name to its safetensors file."""

    directory: Path
    files: dict[str, Path]
    shapes: dict[str, tuple[int, ...]]

    def require(self, names: Iterable[str]) -> None:
        missing = [n for n in names if n not in self.files]
        if missing:
            shown = ", ".join(missing[:4]) + (f" (+{len(missing) - 4} more)" if len(missing) > 4 else "")
            raise InputError(f"checkpoint {str(self.directory)!r} lacks tensors: {shown}")

    def shape(self, name: str) -> tuple[int, ...]:
        self.require([name])
        return self.shapes[name]

    def read(self, name: str, dim: int | None = None, start: int = 0, stop: int | None = None,
             dtype: torch.dtype | None = None) -> torch.Tensor:
        """Read ``name``, or only ``[start:stop]`` along ``dim`` (0 or 1)."""
        from safetensors import safe_open

        self.require([name])
        shape = self.shapes[name]
        try:
            with safe_open(str(self.files[name]), framework="pt") as fh:
                if dim is None:
                    tensor = fh.get_tensor(name)
                else:
                    end = shape[dim] if stop is None else stop
                    part = fh.get_slice(name)
                    tensor = part[start:end] if dim == 0 else part[:, start:end]
        except Exception as exc:  # safetensors raises its own SafetensorError and OSError
            raise ParseError(f"cannot read tensor {name!r}: {exc}", source=str(self.files[name])) from exc
        if dtype is not None and tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        return tensor.contiguous()  # type: ignore[no-any-return]


def open_checkpoint(directory: Path) -> Checkpoint:
    """Index a checkpoint directory (single file or sharded with an index), validating every header."""
    directory = Path(directory)
    index_path, single = directory / INDEX_NAME, directory / SINGLE_NAME
    if index_path.is_file():
        try:
            weight_map = json.loads(index_path.read_text(encoding="utf-8"))["weight_map"]
            assert isinstance(weight_map, dict)
        except (OSError, KeyError, AssertionError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ParseError(f"not a safetensors index with a weight_map object: {exc!r}",
                             source=str(index_path)) from exc
        file_names = sorted(set(weight_map.values()))
    elif single.is_file():
        file_names = [SINGLE_NAME]
    else:
        raise InputError(f"{str(directory)!r} has neither {SINGLE_NAME} nor {INDEX_NAME}")
    files: dict[str, Path] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for file_name in file_names:
        path = directory / str(file_name)
        if not path.is_file():
            raise InputError(f"checkpoint shard {str(path)!r} is missing")
        for name, info in _read_header(path).items():
            files[name] = path
            shapes[name] = tuple(int(d) for d in info["shape"])  # type: ignore[attr-defined]
    return Checkpoint(directory, files, shapes)
