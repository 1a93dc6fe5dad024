"""The real default model: SmolLM2-135M-Instruct imported from its GGUF file, against transformers' own GGUF
loading of the same file, and sharded over three spawned Gloo ranks through ``tensorfabric run``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tensorfabric.cli.main import main
from tensorfabric.inference.checkpoint import open_checkpoint
from tensorfabric.inference.config import load_config
from tensorfabric.inference.model import LocalComm, ShardedLlama
from tensorfabric.inference.plan import ShardPlan
from tensorfabric.inference.runner import RunConfig, run_rank
from tensorfabric.inference.sampling import SamplingParams
from tensorfabric.inference.tokenizer import load_tokenizer
from tensorfabric.inference.weights import load_shard

from ._inference_threads import one_thread  # noqa: F401 -- autouse fixture

pytestmark = pytest.mark.slow

TEXT = ("Tensor parallelism splits every attention head and every feed-forward block of a transformer across "
        "several devices, which then exchange partial sums after each layer over the network fabric.")
CAPITAL = "The capital of France is"


def test_logits_match_transformers_gguf_loading(smollm2_gguf: Path, smollm2: Path) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="transformers needs accelerate to load a GGUF file")
    ids = load_tokenizer(smollm2).encode(TEXT).ids[:32]
    assert len(ids) == 32
    prompt = torch.tensor([ids])
    ref = transformers.AutoModelForCausalLM.from_pretrained(smollm2_gguf.parent, gguf_file=smollm2_gguf.name,
                                                            dtype=torch.float32).eval()
    with torch.inference_mode():
        expected = ref(prompt).logits
    del ref
    cfg = load_config(smollm2)
    plan = ShardPlan.for_rank(0, 1, 1)
    ours = ShardedLlama(cfg, plan, load_shard(open_checkpoint(smollm2), cfg, plan, torch.float32), LocalComm(),
                        torch.float32)
    with torch.inference_mode():
        valid = torch.ones_like(prompt, dtype=torch.bool)
        got = ours.logits(ours.forward_layers(ours.embed(prompt), ours.new_cache(valid, 32), 0, "prefill"))
    diff = (got - expected).abs().max().item()
    print(f"max |ours - transformers| over 32 positions x 49152 logits = {diff:.3g} "
          f"(logits span {expected.min().item():.1f}..{expected.max().item():.1f})")
    assert diff <= 1e-3
    assert torch.equal(got.argmax(-1), expected.argmax(-1))


def test_default_run_is_smollm2_on_three_ranks_and_knows_paris(smollm2: Path, smollm2_cache: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """``tensorfabric run`` with no --model: the imported SmolLM2 on tp=3; greedy tokens equal tp=1's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(smollm2_cache))
    logits_path = tmp_path / "tp3.pt"
    capsys.readouterr()
    assert main(["run", "--prompt", CAPITAL, "--prompt", TEXT, "--max-new-tokens", "8", "--ignore-eos",
                 "--no-warmup", "--json", "--save-logits", str(logits_path)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tp"] == 3 and report["model"] == str(smollm2)
    assert report["transport"] == "gloo/tcp" or report["transport"].startswith("nixl/shm(")
    assert "Paris" in report["text"][0]
    single = run_rank(RunConfig(model_dir=str(smollm2), prompts=(CAPITAL, TEXT), keep_logits=True, warmup=False,
                                sampling=SamplingParams(max_new_tokens=8, stop_at_eos=False)))
    assert report["token_ids"] == single.token_ids
    assert "Paris" in load_tokenizer(smollm2).decode(single.token_ids[0])
    deviation = (torch.load(logits_path) - torch.stack(single.logits)).abs().max().item()
    print(f"tp=3 against tp=1: 8/8 greedy tokens equal on both prompts, max |logit deviation| {deviation:.3g}")
    assert deviation <= 1e-3
