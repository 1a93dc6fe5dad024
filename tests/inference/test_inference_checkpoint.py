"""Checkpoint layout: tiny-model maker, sharded index, per-rank slices, tokenizer, corrupt files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tensorfabric.errors import InputError, ParseError
from tensorfabric.inference.checkpoint import INDEX_NAME, open_checkpoint
from tensorfabric.inference.config import load_config
from tensorfabric.inference.plan import ShardPlan
from tensorfabric.inference.runner import RunConfig, prepare
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.inference.tokenizer import load_tokenizer
from tensorfabric.inference.weights import load_shard

CFG = tiny_config(layers=3, hidden=64, heads=4, kv_heads=2, vocab=320)


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("single"), CFG, seed=5)


@pytest.fixture(scope="module")
def sharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("sharded"), CFG, seed=5, shard_bytes=100_000)


def test_sharded_checkpoint_holds_the_same_tensors(single: Path, sharded: Path) -> None:
    index = json.loads((sharded / INDEX_NAME).read_text())
    files = sorted(set(index["weight_map"].values()))
    assert len(files) > 3
    whole = load_file(str(single / "model.safetensors"))
    parts: dict[str, torch.Tensor] = {}
    for name in files:
        parts.update(load_file(str(sharded / name)))
    assert whole.keys() == parts.keys() and all(torch.equal(whole[k], parts[k]) for k in whole)
    assert load_config(sharded) == load_config(single)


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_rank_slices_are_megatron_blocks(sharded: Path, single: Path, rank: int) -> None:
    full = load_file(str(single / "model.safetensors"))
    plan = ShardPlan.for_rank(rank, tp=2, pp=2)
    shard = load_shard(open_checkpoint(sharded), CFG, plan, torch.float32)
    start, stop = plan.layers(CFG)
    assert len(shard.layers) == stop - start
    layer, p = shard.layers[0], f"model.layers.{start}."
    hq, hk, f = 2 * 16, 16, CFG.intermediate_size // 2  # 2 of 4 q heads, 1 of 2 kv heads, half the MLP
    t = plan.tp_rank
    assert torch.equal(layer.q, full[p + "self_attn.q_proj.weight"][t * hq:(t + 1) * hq])
    assert torch.equal(layer.k, full[p + "self_attn.k_proj.weight"][t * hk:(t + 1) * hk])
    assert torch.equal(layer.o, full[p + "self_attn.o_proj.weight"][:, t * hq:(t + 1) * hq])
    assert torch.equal(layer.down, full[p + "mlp.down_proj.weight"][:, t * f:(t + 1) * f])
    assert (shard.embed is not None) == plan.first_stage and (shard.lm_head is not None) == plan.last_stage
    if shard.lm_head is not None:
        assert torch.equal(shard.lm_head, full["lm_head.weight"][t * 160:(t + 1) * 160])


def test_byte_tokenizer_round_trips_any_text(single: Path) -> None:
    tok = load_tokenizer(single)
    text = "héllo, wörld ✓ \n\ttabs"
    ids = tok.encode(text).ids
    assert ids[0] == 0 and ids[1:] == [b + 2 for b in text.encode()]
    assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok.get_vocab_size() == CFG.vocab_size


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_corrupt_and_incomplete_checkpoints(single: Path, sharded: Path, tmp_path: Path) -> None:
    truncated = _copy(single, tmp_path / "truncated")
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ParseError, match="truncated or corrupt"):
        prepare(RunConfig(model_dir=str(truncated)))
    garbage = _copy(single, tmp_path / "garbage")
    (garbage / "model.safetensors").write_bytes(b"\xff" * 64)
    with pytest.raises(ParseError):
        prepare(RunConfig(model_dir=str(garbage)))
    no_weights = _copy(single, tmp_path / "no_weights")
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(InputError, match="neither model.safetensors"):
        prepare(RunConfig(model_dir=str(no_weights)))
    lost_shard = _copy(sharded, tmp_path / "lost_shard")
    next(lost_shard.glob("model-00002-*.safetensors")).unlink()
    with pytest.raises(InputError, match="shard .* is missing"):
        prepare(RunConfig(model_dir=str(lost_shard)))
    wrong_shape = _copy(single, tmp_path / "wrong_shape")
    raw = json.loads((wrong_shape / "config.json").read_text())
    (wrong_shape / "config.json").write_text(json.dumps({**raw, "hidden_size": 128, "head_dim": 32}))
    with pytest.raises(InputError, match="shape"):
        prepare(RunConfig(model_dir=str(wrong_shape)))
    fewer = _copy(single, tmp_path / "fewer")
    (fewer / "config.json").write_text(json.dumps({**raw, "num_hidden_layers": 5}))
    with pytest.raises(InputError, match="lacks tensors: model.layers.3"):
        prepare(RunConfig(model_dir=str(fewer)))
