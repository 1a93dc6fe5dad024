"""``model import-gguf``: GGUF files we write with the gguf package's writer, and the real SmolLM2 file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType as Q
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file

from tensorfabric.cli.main import main
from tensorfabric.errors import DataError, InputError
from tensorfabric.inference.checkpoint import INDEX_NAME, open_checkpoint
from tensorfabric.inference.config import load_config
from tensorfabric.inference.gguf_import import import_gguf
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.inference.tokenizer import chat_prompt, load_tokenizer

from ._gguf_files import write_gguf
from ._inference_threads import one_thread  # noqa: F401 -- autouse fixture

CFG = tiny_config(layers=2, hidden=64, heads=4, kv_heads=2, vocab=320)
# One tensor kind per type the package can both write and read, so one file covers every dequantiser path
# we can produce (K-quants have dequantisers but no quantiser in the package).
MIXED = {"attn_v.weight": Q.Q8_0, "attn_output.weight": Q.Q4_0, "ffn_gate.weight": Q.Q4_1, "ffn_up.weight": Q.F16,
         "ffn_down.weight": Q.BF16, "token_embd.weight": Q.Q5_0, "output.weight": Q.Q5_1}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("tiny") / "ckpt", CFG, seed=7)


@pytest.fixture(scope="module")
def f32_gguf(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gguf(tmp_path_factory.mktemp("gguf") / "tiny-f32.gguf", tiny, CFG, {})


def _listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())} if directory.exists() else {}


def test_f32_import_restores_the_checkpoint_exactly(tiny: Path, f32_gguf: Path, tmp_path: Path) -> None:
    """Names mapped back, q/k rows un-permuted: every tensor equals the original bit for bit."""
    out = tmp_path / "imported"
    done = import_gguf(f32_gguf, out)
    assert done.tensor_types == {"F32": len(load_file(str(tiny / "model.safetensors")))}
    original, imported = load_file(str(tiny / "model.safetensors")), load_file(str(out / "model.safetensors"))
    assert original.keys() == imported.keys()
    for name, tensor in original.items():
        assert torch.equal(tensor, imported[name]), name
    assert load_config(out) == load_config(tiny)
    # Byte-level BPE with no merges: the same ids as the tiny model's own tokenizer, <s> first.
    text = "héllo wörld, 42 ✓"
    assert load_tokenizer(out).encode(text).ids == load_tokenizer(tiny).encode(text).ids
    assert chat_prompt(out, "hi") == "<s>user: hi\nassistant:"


def test_every_quant_type_dequantises_close_and_shards(tiny: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    gguf = write_gguf(tmp_path / "tiny-mixed.gguf", tiny, CFG, MIXED)
    out = tmp_path / "mixed"
    capsys.readouterr()
    assert main(["model", "import-gguf", str(gguf), str(out), "--shard-size", "64K", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["tensor_types"]) == {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"}
    assert INDEX_NAME in report["files"] and len(report["files"]) > 5
    ckpt, original = open_checkpoint(out), load_file(str(tiny / "model.safetensors"))
    # Tolerance per type, relative to the tensor's largest magnitude: 4-bit ~1/8, 5-bit ~1/16, 8-bit ~1/128.
    bound = {"v_proj": 1 / 100, "o_proj": 1 / 6, "gate_proj": 1 / 6, "up_proj": 1e-3, "down_proj": 1e-2,
             "embed_tokens": 1 / 12, "lm_head": 1 / 12, "q_proj": 0.0, "k_proj": 0.0, "norm": 0.0}
    for name, tensor in original.items():
        got = ckpt.read(name)
        limit = next(v for k, v in bound.items() if k in name) * tensor.abs().max().item()
        assert (got - tensor).abs().max().item() <= limit, name


@pytest.mark.parametrize("case", ["truncated", "gpt2-architecture", "non-empty-target", "missing-file"])
def test_bad_imports_exit_2_and_leave_the_target_untouched(case: str, tiny: Path, f32_gguf: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    source, target, needle = f32_gguf, tmp_path / "out", ""
    if case == "truncated":
        source = tmp_path / "truncated.gguf"
        source.write_bytes(f32_gguf.read_bytes()[: f32_gguf.stat().st_size * 2 // 3])
        needle = "truncated or corrupt"
    elif case == "gpt2-architecture":
        source = write_gguf(tmp_path / "gpt2.gguf", tiny, CFG, {}, arch="gpt2")
        needle = "architecture 'gpt2' cannot be run here"
    elif case == "non-empty-target":
        target.mkdir()
        (target / "notes.txt").write_text("mine")
        needle = "is not empty; pass --force"
    else:
        source, needle = tmp_path / "absent.gguf", "does not exist"
    before, siblings = _listing(target), sorted(p.name for p in tmp_path.iterdir())
    capsys.readouterr()
    assert main(["model", "import-gguf", str(source), str(target)]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1
    assert _listing(target) == before and sorted(p.name for p in tmp_path.iterdir()) == siblings


def test_truncated_inside_the_header(f32_gguf: Path, tmp_path: Path) -> None:
    for cut in (3, 40, 2000):
        part = tmp_path / f"cut{cut}.gguf"
        part.write_bytes(f32_gguf.read_bytes()[:cut])
        with pytest.raises(InputError):
            import_gguf(part, tmp_path / f"out{cut}")
        assert not (tmp_path / f"out{cut}").exists()


def test_force_replaces_only_the_checkpoint(f32_gguf: Path, tiny: Path, tmp_path: Path) -> None:
    target = tmp_path / "target"
    make_tiny(target, CFG, seed=1, shard_bytes=50_000)  # an older, sharded checkpoint
    (target / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        import_gguf(f32_gguf, target)
    import_gguf(f32_gguf, target, force=True)
    names = sorted(p.name for p in target.iterdir())
    assert names == ["SHA256SUMS", "config.json", "model.safetensors", "notes.txt", "tokenizer.json",
                     "tokenizer_config.json"]
    assert (target / "notes.txt").read_text() == "mine"
    assert torch.equal(open_checkpoint(target).read("lm_head.weight"),
                       load_file(str(tiny / "model.safetensors"))["lm_head.weight"])


def test_make_tiny_refuses_a_non_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "ckpt"
    args = ["model", "make-tiny", str(target), "--layers", "1", "--hidden", "32", "--heads", "2", "--kv-heads", "1",
            "--vocab", "260"]
    assert main([*args, "--shard-size", "16K"]) == 0
    (target / "notes.txt").write_text("mine")
    before = _listing(target)
    capsys.readouterr()
    assert main([*args, "--seed", "3"]) == 2
    assert "is not empty; pass --force" in capsys.readouterr().err and _listing(target) == before
    assert main([*args, "--seed", "3", "--force", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"] == ["SHA256SUMS", "config.json", "model.safetensors", "tokenizer.json"]  # what it wrote
    open_checkpoint(target)  # verifies, and caches the verified signatures in .SHA256SUMS.verified
    assert main([*args, "--seed", "4", "--force"]) == 0
    assert sorted(p.name for p in target.iterdir()) == ["SHA256SUMS", "config.json", "model.safetensors",
                                                         "notes.txt", "tokenizer.json"]  # old shards, index, cache gone
    assert (target / "notes.txt").read_text() == "mine"
    assert open_checkpoint(target).verification.hashed == ("model.safetensors",)


def test_smollm2_tokenizer_and_chat_template_match_transformers(smollm2_gguf: Path, smollm2: Path) -> None:
    transformers = pytest.importorskip("transformers")
    ref = transformers.AutoTokenizer.from_pretrained(smollm2_gguf.parent, gguf_file=smollm2_gguf.name)
    ours = load_tokenizer(smollm2)
    text = "The capital of France is Paris. <|im_start|>user\nWhat's the weather like, today?<|im_end|>"
    assert ours.encode(text).ids == ref(text).input_ids
    # llama.cpp's "smollm" pre-tokenizer isolates each digit (as SmolLM2's own tokenizer.json does);
    # transformers' GGUF converter does not, so numbers are where the two differ.
    assert len(ours.encode("2024").ids) == 4
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    assert chat_prompt(smollm2, messages[0]["content"]) == ref.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True)
    cfg = load_config(smollm2)
    assert (cfg.num_heads, cfg.num_kv_heads, cfg.hidden_size, cfg.num_layers, cfg.vocab_size) == (9, 3, 576, 30, 49152)
    assert cfg.tie_word_embeddings and cfg.eos_token_ids == (2,)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.tuples(st.integers(0, 6000), st.integers(0, 255)), min_size=1, max_size=8),
       length=st.one_of(st.none(), st.integers(0, 10**7)))
def test_damaged_files_only_raise_input_errors(f32_gguf: Path, tmp_path: Path, cuts: list[tuple[int, int]],
                                               length: int | None) -> None:
    """Bytes overwritten anywhere (header, metadata, tensor table, data) and the file cut anywhere: the import
    either succeeds or raises InputError/ParseError (the file does not parse) or DataError (a tensor dequantises
    to NaN or Inf), and a failed one writes nothing."""
    data = bytearray(f32_gguf.read_bytes())
    for where, value in cuts:
        data[where % len(data)] = value
    if length is not None:
        data = data[: length % (len(data) + 1)]
    source = tmp_path / "damaged.gguf"
    source.write_bytes(bytes(data))
    target = tmp_path / "damaged-out"
    shutil.rmtree(target, ignore_errors=True)
    try:
        import_gguf(source, target)
    except (InputError, DataError):
        assert not target.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_k_quants_go_through_the_packages_dequantiser(tmp_path: Path) -> None:
    """The package has K-quant dequantisers but no quantisers: write raw Q4_K / Q6_K blocks (random bits, sane
    float16 scales) and check the imported tensors are exactly its dequantisation, in Hugging Face orientation."""
    import numpy as np
    from gguf import GGUFReader
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import dequantize

    cfg = tiny_config(layers=1, hidden=256, heads=4, kv_heads=2, vocab=260, intermediate=512)
    tiny = make_tiny(tmp_path / "ckpt", cfg, seed=2)
    rng = np.random.default_rng(0)

    def blocks(qtype: Q, rows: int, cols: int, scale_at: tuple[int, ...]) -> np.ndarray:
        _, size = GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(rows, cols // 256, size), dtype=np.uint8)
        for at in scale_at:  # float16 super-block scales: small and finite
            raw[:, :, at:at + 2] = np.frombuffer(np.float16(0.01).tobytes(), dtype=np.uint8)
        return raw.reshape(rows, -1)

    raw = {"blk.0.ffn_gate.weight": (Q.Q4_K, blocks(Q.Q4_K, 512, 256, (0, 2))),
           "blk.0.ffn_up.weight": (Q.Q6_K, blocks(Q.Q6_K, 512, 256, (208,)))}
    gguf = write_gguf(tmp_path / "k.gguf", tiny, cfg, {}, raw=raw)
    out = tmp_path / "out"
    assert import_gguf(gguf, out).tensor_types == {"F32": 10, "Q4_K": 1, "Q6_K": 1}
    tensors = {t.name: t for t in GGUFReader(str(gguf)).tensors}
    for name, hf in (("blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight"),
                     ("blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight")):
        expected = torch.from_numpy(dequantize(tensors[name].data, tensors[name].tensor_type).copy())
        got = open_checkpoint(out).read(hf)
        assert got.shape == (512, 256) and torch.isfinite(got).all() and torch.equal(got, expected), name


@pytest.mark.parametrize(("extra", "needle"), [
    ({"blk.01.attn_norm.weight": (64,)}, "two tensors map to model.layers.1.input_layernorm.weight"),
    ({"rope_freqs.weight": (8,)}, "per-dimension rotary frequencies"),
    ({"blk.0.attn_q.bias": (64,)}, "is a bias"),
    ({"blk.2.attn_norm.weight": (64,)}, "beyond the 2 layers"),
    ({"blk.0.attn_qkv.weight": (64,)}, "has no Llama counterpart"),
])
def test_tensors_we_cannot_place_are_refused(extra: dict[str, tuple[int, ...]], needle: str, tiny: Path,
                                            tmp_path: Path) -> None:
    import numpy as np

    gguf = write_gguf(tmp_path / "extra.gguf", tiny, CFG, {}, extra={k: np.ones(s) for k, s in extra.items()})
    with pytest.raises(InputError, match=needle):
        import_gguf(gguf, tmp_path / "out")
    assert not (tmp_path / "out").exists()
