"""Weights and logits that cannot be right are refused, not run.

Damaged weights do not crash a model: they make it emit token 0 (NaN logits, whose argmax is 0) or plausible
nonsense, and the run exits 0. Three checks stand where the numbers pass:

* **Checksums.** The writer records the sha256 of every weight file in ``SHA256SUMS``, in ``sha256sum``'s own
  format (``sha256sum -c SHA256SUMS`` checks it too), and opening a checkpoint compares them. Bytes changed in
  place keep the file's size and mostly keep every value finite and plausible (huggingface_hub#3643: same size,
  four different hashes in four downloads), so only a hash tells. Hashing costs about a second per 500 MB, so a
  verified file's signature (size, mtime_ns, ctime_ns, inode, device) is cached in ``.SHA256SUMS.verified``
  beside it and a repeat open only stats the files. ctime is in the signature because a rewrite that puts the old
  mtime back (``touch -d``, ``os.utime``) cannot put the old ctime back.
* **Finite values.** Every tensor read from a checkpoint or written into one is checked for NaN and Inf, and
  after a conversion to a narrower type for values that type cannot hold (a NaN block or NaN block scales in one
  tensor: ik_llama.cpp#649; llama.cpp validates the same at load since ggml-org/llama.cpp#6884). A checkpoint
  from elsewhere has no ``SHA256SUMS``; this check still covers it, slice by slice, as each rank reads its own.
* **Finite logits** (:func:`check_logits`, called by ``generate`` at every step on the last stage): every
  weight loaded finite and the logits are not, so the arithmetic overflowed (float16 above 65504: mlx-vlm#1163,
  sglang#27883) or the weights hold extreme finite values. The error names the step and the likely cause.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tensorfabric.errors import DataError, InputError
from tensorfabric.jsonload import load_json

if TYPE_CHECKING:
    import torch

    from tensorfabric.inference.config import ModelConfig

__all__ = ["MANIFEST_NAME", "STAMP_NAME", "Verification", "check_finite", "check_logits", "check_shapes",
           "describe_non_finite", "expected_shapes", "manifest_text", "verify_files"]

MANIFEST_NAME = "SHA256SUMS"
STAMP_NAME = ".SHA256SUMS.verified"
_MANIFEST_MAX_BYTES = 1 << 20  # one line per weight file: a larger file is not a manifest we wrote
# "<64 hex>  <name>" (text mode) or "<64 hex> *<name>" (binary mode), as sha256sum prints them.
_LINE = re.compile(r"([0-9a-fA-F]{64}) [ *]([^/\x00]+)")
_CHUNK_BYTES = 4 << 20
_HASH_THREADS = 4  # hashlib releases the GIL on large updates; more threads than this only contend for the disk
_MAX_OF = {"float16": 65504.0}
Signature = list[int]


@dataclass(frozen=True)
class Verification:
    """What opening a checkpoint checked. ``manifest`` is False when the directory has no ``SHA256SUMS`` (a
    checkpoint from elsewhere: only the per-tensor checks apply). ``hashed`` names the files hashed this time;
    the others in ``files`` matched the signature cached when they were last verified."""

    manifest: bool
    files: tuple[str, ...] = ()
    hashed: tuple[str, ...] = ()

    def summary(self) -> str:
        if not self.manifest:
            return f"none (no {MANIFEST_NAME}: values are checked as they are read)"
        return f"verified ({MANIFEST_NAME}, {len(self.files)} file{'s' if len(self.files) != 1 else ''})"


def manifest_text(digests: Mapping[str, str]) -> str:
    """``SHA256SUMS`` content for ``{file name: sha256 hex}``, sorted by name."""
    return "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))


def _read_manifest(directory: Path) -> dict[str, str] | None:
    path = directory / MANIFEST_NAME
    try:
        if path.stat().st_size > _MANIFEST_MAX_BYTES:
            raise DataError(f"{path} is over {_MANIFEST_MAX_BYTES} bytes: not a list of weight-file checksums")
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path} cannot be read ({exc}); delete it to run unverified, or write the checkpoint "
                        "again") from exc
    digests: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise DataError(f"{path} line {number} is not '<sha256>  <file name>': {line[:80]!r}; the manifest "
                            "itself is damaged: write the checkpoint again")
        digests[match[2]] = match[1].lower()
    return digests


def _signature(path: Path) -> Signature:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _read_stamp(directory: Path) -> dict[str, object]:
    try:
        stamp = load_json((directory / STAMP_NAME).read_text(encoding="utf-8"), what="a stamp", source=STAMP_NAME)
    except (OSError, ValueError):  # UnicodeDecodeError and JsonError are ValueErrors
        return {}
    return stamp if isinstance(stamp, dict) else {}


def _write_stamp(directory: Path, manifest: Signature, files: Mapping[str, Signature]) -> None:
    """Best effort: a directory we may not write in is verified again next time, nothing worse."""
    data = json.dumps({"manifest": manifest, "files": dict(sorted(files.items()))}, indent=1).encode()
    temp = directory / f"{STAMP_NAME}.{os.getpid()}.tmp"
    try:
        temp.write_bytes(data)
        os.replace(temp, directory / STAMP_NAME)
    except OSError:
        temp.unlink(missing_ok=True)


def verify_files(directory: Path, names: Iterable[str]) -> Verification:
    """Check the weight files ``names`` of ``directory`` against its ``SHA256SUMS``.

    Raises DataError when a file does not match its recorded sha256, is not listed, or the manifest lists a file
    that is gone; each message is "what is wrong; what to do". Without a manifest nothing is checked here
    (``Verification(manifest=False)``)."""
    directory = Path(directory)
    digests = _read_manifest(directory)
    if digests is None:
        return Verification(manifest=False)
    used = sorted(set(names))
    unlisted = [n for n in used if n not in digests]
    if unlisted:
        raise DataError(f"{directory / unlisted[0]} is not listed in {MANIFEST_NAME}, so it was written after the "
                        f"checksums were; write the checkpoint again, or delete {MANIFEST_NAME} to run it unverified")
    listed = sorted(digests)
    try:
        manifest_sig = _signature(directory / MANIFEST_NAME)
        now = {n: _signature(directory / n) for n in listed}
    except FileNotFoundError as exc:
        raise DataError(f"{MANIFEST_NAME} lists {Path(str(exc.filename)).name}, which is missing from {directory}; "
                        "write the checkpoint again") from exc
    stamp = _read_stamp(directory)
    known = stamp.get("files") if stamp.get("manifest") == manifest_sig else None
    cached = known if isinstance(known, dict) else {}
    todo = [n for n in listed if cached.get(n) != now[n]]
    if todo:
        with ThreadPoolExecutor(max_workers=min(len(todo), _HASH_THREADS, os.cpu_count() or 1)) as pool:
            actual = dict(zip(todo, pool.map(lambda n: _sha256(directory / n), todo), strict=True))
        for name in todo:
            if actual[name] != digests[name]:
                raise DataError(
                    f"{directory / name} does not match its sha256 in {MANIFEST_NAME} (file {actual[name][:12]}..., "
                    f"recorded {digests[name][:12]}...): damaged after it was written (disk, copy or an edit in "
                    "place); write the checkpoint again (tensorfabric model import-gguf/make-tiny --force)")
        # Signatures taken before hashing: a file changed while it was hashed gets hashed again next time.
        verified = {n: now[n] for n in todo if _signature(directory / n) == now[n]}
        _write_stamp(directory, manifest_sig, {**{n: now[n] for n in listed if n not in todo}, **verified})
    return Verification(manifest=True, files=tuple(listed), hashed=tuple(todo))


def _plural(count: int, word: str) -> str:
    return f"{count} {word} value{'s' if count != 1 else ''}"


def describe_non_finite(tensor: torch.Tensor, offset: Sequence[int] = (), block: int = 1) -> str:
    """"" when every value is finite, else what is wrong and where the first bad value is: ``holds 64 NaN values
    (first at row 3, column 0)``. ``offset`` is where ``tensor`` starts in the whole tensor (a rank's slice);
    ``block`` > 1 also names the quantisation block of the first bad value."""
    import torch

    if not tensor.is_floating_point():
        return ""
    # Fast path: one vectorised pass and no temporary (isfinite().all() is ~20x slower). Any NaN or Inf makes the
    # sum NaN or Inf; a finite sum proves every value finite. A sum that overflowed falls to the exact test.
    total = tensor.sum(dtype=torch.float32) if tensor.element_size() < 4 else tensor.sum()
    if bool(torch.isfinite(total)) or bool(torch.isfinite(tensor).all()):
        return ""
    nan, inf = int(torch.isnan(tensor).sum()), int(torch.isinf(tensor).sum())
    what = " and ".join(_plural(c, w) for c, w in ((nan, "NaN"), (inf, "Inf")) if c)
    where = [int(i) for i in (~torch.isfinite(tensor)).nonzero()[0]]
    where = [i + (offset[d] if d < len(offset) else 0) for d, i in enumerate(where)]
    if len(where) == 2:
        place = f"row {where[0]}, column {where[1]}"
    else:
        place = f"index {where}" if len(where) != 1 else f"index {where[0]}"
    if block > 1:
        flat = where[0] * tensor.shape[-1] + where[-1] if len(where) == 2 else where[0]
        place += f", block {flat // block}"
    return f"holds {what} (first at {place})"


def check_finite(name: str, value: torch.Tensor, *, source: str = "", offset: Sequence[int] = (),
                 stored: torch.Tensor | None = None, stored_as: str = "") -> None:
    """Raise DataError when ``value`` holds NaN or Inf, or when ``stored`` (``value`` converted to ``stored_as``)
    does: then the values do not fit that type."""
    where = f"{source}: " if source else ""
    problem = describe_non_finite(value, offset)
    if problem:
        raise DataError(f"{where}tensor {name!r} {problem}: the weights are damaged; write or download them again")
    if stored is not None and describe_non_finite(stored, offset):
        largest = float(value.abs().max())
        limit = _MAX_OF.get(stored_as)
        holds = f"; {stored_as} holds up to {limit:g}" if limit else ""
        raise DataError(f"{where}tensor {name!r} does not fit in {stored_as} (largest magnitude {largest:.4g}{holds}): "
                        "use bfloat16 or float32")


def check_logits(logits: torch.Tensor, step: int, dtype: str) -> None:
    """Raise DataError naming ``step`` (0 = the prefill's token) when ``logits`` [batch, vocab] are not finite."""
    problem = describe_non_finite(logits)
    if not problem:
        return
    phase = "prefill" if step == 0 else f"decode, token {step + 1}"
    rows = int((~logits.isfinite()).any(dim=-1).sum())
    if dtype == "float16":
        cause = ("overflow in float16 (an activation above 65504 becomes Inf, then NaN in the next norm); run with "
                 "--dtype bfloat16 or float32")
    else:
        cause = (f"every weight was finite when loaded, so either weights with extreme values (damaged after their "
                 f"checksum, or a faulty conversion) or activations beyond {dtype}'s range"
                 + ("; compare with --dtype float32" if dtype != "float32" else ""))
    raise DataError(f"logits at step {step} ({phase}) are not finite: {rows} of {logits.shape[0]} prompt(s), "
                    f"{problem.removeprefix('holds ')}; likely cause: {cause}")


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a checkpoint of ``cfg`` holds, with its shape (Hugging Face names and orientation)."""
    h, q, kv, f, v = (cfg.hidden_size, cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim,
                      cfg.intermediate_size, cfg.vocab_size)
    out: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = (v, h)
    per: dict[str, tuple[int, ...]] = {
        "input_layernorm.weight": (h,), "post_attention_layernorm.weight": (h,),
        "self_attn.q_proj.weight": (q, h), "self_attn.k_proj.weight": (kv, h), "self_attn.v_proj.weight": (kv, h),
        "self_attn.o_proj.weight": (h, q), "mlp.gate_proj.weight": (f, h), "mlp.up_proj.weight": (f, h),
        "mlp.down_proj.weight": (h, f)}
    if cfg.qkv_bias:
        per.update({"self_attn.q_proj.bias": (q,), "self_attn.k_proj.bias": (kv,), "self_attn.v_proj.bias": (kv,)})
    if cfg.o_bias:
        per["self_attn.o_proj.bias"] = (h,)
    if cfg.mlp_bias:
        per.update({"mlp.gate_proj.bias": (f,), "mlp.up_proj.bias": (f,), "mlp.down_proj.bias": (h,)})
    for i in range(cfg.num_layers):
        out.update({f"model.layers.{i}.{k}": s for k, s in per.items()})
    return out


def check_shapes(shapes: Mapping[str, tuple[int, ...]], cfg: ModelConfig) -> None:
    """InputError for the first tensor whose shape contradicts ``config.json`` (every tensor, not a sample: a
    wrong one elsewhere would fail deep inside a matmul)."""
    for name, shape in expected_shapes(cfg).items():
        if name in shapes and tuple(shapes[name]) != shape:
            raise InputError(f"tensor {name} has shape {list(shapes[name])}, config.json implies {list(shape)}")
