"""Hugging Face safetensors checkpoints, read slice by slice.

Each rank asks only for the rows or columns it owns. ``safe_open`` memory-maps the file and ``get_slice``
copies just the requested range, so a rank's resident memory stays near its shard. A file is opened per
tensor and closed right after: the mapped pages a read touches are counted in RSS while the map is alive.

Nothing is taken on trust (see :mod:`~tensorfabric.inference.integrity`): every header entry's dtype, shape and
byte span must agree, the weight files must match the ``SHA256SUMS`` the writer recorded (when there is one), and
every slice a rank reads must be finite, also after its conversion to the run's dtype.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError, ParseError
from tensorfabric.inference.integrity import Verification, check_finite, verify_files
from tensorfabric.jsonload import load_json

if TYPE_CHECKING:
    import torch

__all__ = ["INDEX_NAME", "SINGLE_NAME", "Checkpoint", "open_checkpoint"]

SINGLE_NAME = "model.safetensors"
INDEX_NAME = "model.safetensors.index.json"
# safetensors dtype -> bytes per element. Unknown (newer) dtypes are let through here and refused when read.
_ITEM_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")


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
                raise ParseError(f"header length {length} exceeds the file size {size} or safetensors' cap of 100 MB",
                                 source=str(path))
            header = load_json(fh.read(length).decode("utf-8"), what="a safetensors header (a JSON object)",
                               source=str(path))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ParseError(f"not a safetensors file: {exc}", source=str(path)) from exc
    if not isinstance(header, dict):
        raise ParseError("safetensors header is not an object", source=str(path))
    data_len = size - 8 - length
    header.pop("__metadata__", None)
    for name, info in header.items():
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
                and 0 <= offsets[0] <= offsets[1] <= data_len):
            raise ParseError(f"tensor {name!r} lies outside the file (truncated or corrupt)", source=str(path))
        _check_entry(name, info, offsets[1] - offsets[0], path)
    return header


def _check_entry(name: str, info: dict[str, object], span: int, path: Path) -> None:
    """The shape is a list of counts and, for a dtype we know, shape x element size is the byte span."""
    shape, dtype = info.get("shape"), info.get("dtype")
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise ParseError(f"tensor {name!r} has shape {shape!r}, not a list of counts", source=str(path))
    if not isinstance(dtype, str):
        raise ParseError(f"tensor {name!r} has dtype {dtype!r}, not a name such as 'F32'", source=str(path))
    if dtype in _ITEM_BYTES:
        nbytes = _ITEM_BYTES[dtype]
        for d in shape:
            nbytes *= d
        if nbytes != span:
            raise ParseError(f"tensor {name!r} has shape {shape} of {dtype} ({nbytes} bytes) but its data_offsets "
                             f"hold {span} bytes (corrupt header)", source=str(path))


@dataclass(frozen=True)
class Checkpoint:
    """Where each tensor lives. ``files`` maps tensor name to its safetensors file."""

    directory: Path
    files: dict[str, Path]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, str] = field(default_factory=dict)
    """Tensor name -> safetensors dtype (``F32``, ``BF16`` ...)."""
    verification: Verification = Verification(manifest=False)

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
        """Read ``name``, or only ``[start:stop]`` along ``dim`` (0 or 1), converted to ``dtype``. DataError when
        a value read is NaN or Inf, or does not fit ``dtype``."""
        from safetensors import safe_open

        self.require([name])
        shape = self.shapes[name]
        stored = self.dtypes.get(name, "F32")
        if stored not in FLOAT_DTYPES:
            raise InputError(f"tensor {name!r} is stored as {stored}; only floating-point weights "
                             f"({', '.join(FLOAT_DTYPES)}) can be run, not quantised checkpoints")
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
        offset = (0, start) if dim == 1 else (start,)
        converted = tensor.to(dtype) if dtype is not None and tensor.dtype != dtype else None
        check_finite(name, tensor, source=str(self.files[name]), offset=offset, stored=converted,
                     stored_as=str(dtype).removeprefix("torch."))
        return (tensor if converted is None else converted).contiguous()  # type: ignore[no-any-return]


def open_checkpoint(directory: Path, *, verify: bool = True) -> Checkpoint:
    """Index a checkpoint directory (single file or sharded with an index), validating every header; with
    ``verify``, check the weight files against the directory's ``SHA256SUMS`` (DataError when one does not
    match; cheap when they were verified before and have not changed since)."""
    directory = Path(directory)
    index_path, single = directory / INDEX_NAME, directory / SINGLE_NAME
    if index_path.is_file():
        try:
            weight_map = load_json(index_path.read_text(encoding="utf-8"), what="a safetensors index (a JSON object)",
                                   source=str(index_path))["weight_map"]
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
    dtypes: dict[str, str] = {}
    for file_name in file_names:
        path = directory / str(file_name)
        if not path.is_file():
            raise InputError(f"checkpoint shard {str(path)!r} is missing")
        for name, info in _read_header(path).items():
            files[name] = path
            shapes[name] = tuple(int(d) for d in info["shape"])  # type: ignore[attr-defined]
            dtypes[name] = str(info["dtype"])
    verification = verify_files(directory, [str(f) for f in file_names]) if verify else Verification(False)
    return Checkpoint(directory, files, shapes, dtypes, verification)
