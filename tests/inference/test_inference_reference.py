"""Our decoder against transformers' LlamaForCausalLM / Qwen2ForCausalLM on the same random checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tensorfabric.inference.checkpoint import open_checkpoint
from tensorfabric.inference.config import RopeScaling, load_config
from tensorfabric.inference.generate import LocalStage, generate, pad_prompts
from tensorfabric.inference.model import LocalComm, ShardedLlama
from tensorfabric.inference.plan import ShardPlan
from tensorfabric.inference.sampling import SamplingParams
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.inference.weights import load_shard

from ._inference_threads import one_thread  # noqa: F401 -- autouse fixture

transformers = pytest.importorskip("transformers")

CASES = {
    "mha": tiny_config(layers=2, hidden=64, heads=4, kv_heads=4, vocab=320),
    "gqa-llama3-rope": tiny_config(layers=2, hidden=64, heads=4, kv_heads=2, vocab=320, max_positions=256,
                                   rope=RopeScaling("llama3", 8.0, 1.0, 4.0, 32)),
    "qwen2-bias-tied": tiny_config(layers=2, hidden=64, heads=4, kv_heads=1, vocab=320, model_type="qwen2",
                                   tie=True),
}
PROMPT = [0, 74, 103, 110, 110, 113, 34, 119, 113, 116, 110, 102, 46, 34, 100, 38, 200, 17, 5, 64]


def _ours(directory: Path, dtype: torch.dtype = torch.float32) -> ShardedLlama:
    cfg = load_config(directory)
    plan = ShardPlan.for_rank(0, 1, 1)
    return ShardedLlama(cfg, plan, load_shard(open_checkpoint(directory), cfg, plan, dtype), LocalComm(), dtype)


@pytest.mark.parametrize("case", list(CASES))
def test_logits_and_greedy_tokens_match_transformers(case: str, tmp_path: Path) -> None:
    directory = make_tiny(tmp_path, CASES[case], seed=11)
    ours = _ours(directory)
    ref = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    ids, valid = pad_prompts([PROMPT])
    with torch.inference_mode():
        expected = ref(ids).logits
        got = ours.logits(ours.forward_layers(ours.embed(ids), ours.new_cache(valid, 64), 0, "prefill"))
        hf_tokens = ref.generate(ids, max_new_tokens=12, do_sample=False)[0, len(PROMPT):].tolist()
    diff = (got - expected).abs().max().item()
    assert diff <= 1e-4, f"{case}: max |ours - transformers| = {diff:.3g}"
    gen = generate(ours, LocalStage(), [PROMPT], SamplingParams(max_new_tokens=12, stop_at_eos=False))
    assert gen.token_ids[0] == hf_tokens


def test_batches_chunks_and_bf16(tmp_path: Path) -> None:
    directory = make_tiny(tmp_path, CASES["gqa-llama3-rope"], seed=2)
    model = _ours(directory)
    params = SamplingParams(max_new_tokens=10, stop_at_eos=False)
    short = PROMPT[:5]
    alone = [generate(model, LocalStage(), [p], params, keep_logits=True) for p in (PROMPT, short)]
    batch = generate(model, LocalStage(), [PROMPT, short], params, keep_logits=True)
    assert batch.token_ids == [alone[0].token_ids[0], alone[1].token_ids[0]]
    left_padded = max((b[1] - a[0]).abs().max().item() for a, b in zip(alone[1].logits, batch.logits, strict=True))
    assert left_padded <= 1e-4
    chunked = generate(model, LocalStage(), [PROMPT], params, microbatches=3)
    assert chunked.token_ids == alone[0].token_ids
    # bfloat16 weights and activations: the documented tolerance is 0.1 absolute on logits of size ~5.
    bf16 = generate(_ours(directory, torch.bfloat16), LocalStage(), [PROMPT], SamplingParams(max_new_tokens=1),
                    keep_logits=True)
    assert (bf16.logits[0] - alone[0].logits[0][:1]).abs().max().item() <= 0.1
