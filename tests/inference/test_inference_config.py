"""config.json parsing, the parallel plan, sampling, and fuzzing of every parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.errors import InputError, ParseError
from tensorfabric.inference.checkpoint import _read_header
from tensorfabric.inference.config import config_from_dict, load_config
from tensorfabric.inference.plan import ShardPlan, check_parallel, layer_range
from tensorfabric.inference.sampling import Sampler, SamplingParams
from tensorfabric.inference.tiny import tiny_config

LLAMA = {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}


def test_rope_spellings_agree() -> None:
    old = config_from_dict({**LLAMA, "rope_theta": 500000.0, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64}})
    new = config_from_dict({**LLAMA, "rope_parameters": {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}})
    assert old == new
    assert old.rope.kind == "llama3" and old.rope_theta == 500000.0 and old.head_dim == 16


def test_qwen2_has_qkv_bias_and_round_trips() -> None:
    cfg = config_from_dict({**LLAMA, "model_type": "qwen2", "tie_word_embeddings": True})
    assert cfg.qkv_bias and not cfg.o_bias and cfg.tie_word_embeddings
    assert config_from_dict(cfg.to_hf_dict()) == cfg


@pytest.mark.parametrize(("change", "needle"), [
    ({"model_type": "gpt2"}, "not a Llama-family"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"num_key_value_heads": 3}, "multiple of num_key_value_heads"),
    ({"head_dim": 15}, "positive even integer"),
    ({"vocab_size": -1}, "vocab_size"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "yarn"),
    ({"model_type": "mistral", "sliding_window": 4096}, "sliding-window"),
])
def test_bad_configs_name_the_problem(change: dict[str, object], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        config_from_dict({**LLAMA, **change})


def test_load_config_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        load_config(tmp_path / "nope")
    with pytest.raises(InputError, match="no config.json"):
        load_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ParseError, match="config.json"):
        load_config(tmp_path)


json_values = st.recursive(st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=True)
                           | st.text(max_size=8), lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from([*LLAMA, "rope_scaling", "rope_parameters", "rope_theta", "head_dim",
                                        "eos_token_id", "hidden_act", "rms_norm_eps", "attention_bias"]),
                       json_values, max_size=12), st.booleans())
def test_config_fuzz_raises_only_input_errors(raw: dict[str, object], base: bool) -> None:
    try:
        config_from_dict({**LLAMA, **raw} if base else raw)
    except InputError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_safetensors_header_fuzz(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "x.safetensors"
    path.write_bytes(data)
    try:
        _read_header(path)
    except InputError:
        pass


def test_header_with_out_of_range_offsets(tmp_path: Path) -> None:
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    path = tmp_path / "t.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 8)  # 8 of the 16 data bytes
    with pytest.raises(ParseError, match="truncated or corrupt"):
        _read_header(path)


@given(st.integers(1, 64), st.integers(1, 8))
def test_layer_ranges_cover_every_layer_once(layers: int, pp: int) -> None:
    if pp > layers:
        return
    ranges = [layer_range(layers, pp, s) for s in range(pp)]
    assert ranges[0][0] == 0 and ranges[-1][1] == layers
    assert all(a[1] == b[0] and a[1] > a[0] for a, b in zip(ranges, ranges[1:], strict=False))


def test_plan_and_parallel_checks() -> None:
    cfg = tiny_config(layers=4, hidden=64, heads=4, kv_heads=2, vocab=320)
    plan = ShardPlan.for_rank(3, tp=2, pp=2)
    assert (plan.tp_rank, plan.pp_rank, plan.rank, plan.last_stage) == (1, 1, 3, True)
    assert plan.part(320) == (160, 320) and plan.layers(cfg) == (2, 4)
    check_parallel(cfg, 2, 2, 4)
    with pytest.raises(InputError, match="num_key_value_heads=2"):
        check_parallel(cfg, 4, 1)
    with pytest.raises(InputError, match="world size 3 is not tp x pp"):
        check_parallel(cfg, 2, 1, 3)
    with pytest.raises(InputError, match="exceeds the model's 4 layers"):
        check_parallel(cfg, 1, 5)


def test_sampling_greedy_seeded_and_top_p() -> None:
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(1))
    assert torch.equal(Sampler(SamplingParams())(logits), logits.argmax(-1))
    hot = SamplingParams(temperature=1.0, top_p=0.9, seed=7)
    assert torch.equal(Sampler(hot)(logits), Sampler(hot)(logits))
    # A nucleus too small for a second token always picks the most likely one.
    tiny_p = Sampler(SamplingParams(temperature=1.0, top_p=1e-6, seed=3))
    assert all(torch.equal(tiny_p(logits), logits.argmax(-1)) for _ in range(5))
    with pytest.raises(InputError):
        SamplingParams(top_p=0.0)
    with pytest.raises(InputError):
        SamplingParams(max_new_tokens=0)


def test_public_api_and_no_torch_on_import() -> None:
    import subprocess
    import sys

    import tensorfabric.inference as inference

    assert all(hasattr(inference, name) for name in inference.__all__)
    probe = ("import sys, tensorfabric.inference, tensorfabric.cli.run, tensorfabric.cli.model; "
             "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
