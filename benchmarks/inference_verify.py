"""What verifying the weights costs on the default model, SmolLM2-135M (issue 29, build 1).

Imports the packaged GGUF into a temporary directory (538 MB of float32 safetensors; the sha256 is computed from
the bytes as they are written), then measures:

* opening the checkpoint without verification (headers only), with verification the first time (every weight
  file hashed) and cached (the verified signatures match: a few stat calls);
* loading the three tp=3 shards with the per-slice finite checks and without them;
* one step's logits check on [1, vocab] float32 logits.

Wall and CPU seconds; medians of ``--repeat`` runs where a step is cheap enough to repeat. Writes
benchmarks/results/inference_verify.json.

    .venv/bin/python benchmarks/inference_verify.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import torch

from tensorfabric.fsutil import atomic_write_json
from tensorfabric.inference import checkpoint as checkpoint_module
from tensorfabric.inference.checkpoint import open_checkpoint
from tensorfabric.inference.config import load_config
from tensorfabric.inference.default import packaged_gguf
from tensorfabric.inference.gguf_import import import_gguf
from tensorfabric.inference.integrity import STAMP_NAME, check_logits
from tensorfabric.inference.plan import ShardPlan
from tensorfabric.inference.weights import load_shard


def timed(fn: Callable[[], Any], repeat: int = 1) -> dict[str, float]:
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "runs": repeat}


def sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "inference_verify.json"))
    args = ap.parse_args()
    gguf, reason = packaged_gguf()
    if gguf is None:
        raise SystemExit(f"needs the real model: {reason}")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="tf-verify-") as tmp:
        directory = Path(tmp) / "smollm2"
        result: dict[str, Any] = {"model": gguf.name}
        result["import"] = timed(lambda: import_gguf(gguf, directory))
        weights = directory / "model.safetensors"
        result["weights_bytes"] = weights.stat().st_size
        result["sha256_of_weights"] = timed(lambda: sha256_file(weights), args.repeat)
        result["open_headers_only"] = timed(lambda: open_checkpoint(directory, verify=False), args.repeat)

        def first_open() -> None:
            (directory / STAMP_NAME).unlink(missing_ok=True)
            assert open_checkpoint(directory).verification.hashed == ("model.safetensors",)

        def cached_open() -> None:
            assert open_checkpoint(directory).verification.hashed == ()

        result["open_verify_first"] = timed(first_open, args.repeat)
        first_open()
        result["open_verify_cached"] = timed(cached_open, args.repeat * 20)
        cfg, ckpt = load_config(directory), open_checkpoint(directory)

        def load_all() -> None:
            for rank in range(3):
                load_shard(ckpt, cfg, ShardPlan.for_rank(rank, 3, 1), torch.float32)

        result["load_tp3_all_ranks_checked"] = timed(load_all, args.repeat)
        with mock.patch.object(checkpoint_module, "check_finite", lambda *a, **k: None):
            result["load_tp3_all_ranks_unchecked"] = timed(load_all, args.repeat)
        logits = torch.randn(1, cfg.vocab_size)
        result["logits_check_per_step"] = timed(lambda: check_logits(logits, 1, "float32"), args.repeat * 200)
    result["threads"] = torch.get_num_threads()
    atomic_write_json(args.out, result)
    for key, value in result.items():
        print(f"{key:>32}: {value}")


if __name__ == "__main__":
    main()
