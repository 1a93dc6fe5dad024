"""Compressed TP all-reduce in prefill: int8 against none, tp=2 (issue 4, acceptance 4).

Runs ``tensorfabric run`` three times on the same 512-token prompt and 64 greedy tokens: codec none,
int8 in prefill only, int8 in prefill and decode. With root and the lab available each run is one rank per
host of a ``2x1gbit`` network-namespace lab (shaped 1 Gbit/s links); otherwise two local ranks on loopback
(the output says which). Reports the TTFT ratio (goal >= 1.5x), the max logits deviation and greedy-token
agreement of int8 against none over 64 tokens, and decode latency per token with and without the codec.
Each configuration runs ``--repeats`` times in alternation; medians are reported.
Writes benchmarks/results/inference_comm.json.

    .venv/bin/python benchmarks/inference_comm.py [--lab 2x1gbit | --loopback] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from tensorfabric.fsutil import atomic_write_text
from tensorfabric.inference.tiny import make_tiny, tiny_config

CONFIGS = {"none": ["--comm-codec", "none"], "int8": ["--comm-codec", "int8"],
           "int8-decode": ["--comm-codec", "int8", "--comm-codec-decode"]}


def _lab_available() -> bool:
    if os.geteuid() != 0:
        return False
    try:
        import tensorfabric.lab.launch  # noqa: F401
    except ImportError:
        return False
    return True


def _run(argv: list[str], lab: str | None) -> dict[str, Any]:
    if lab is not None:
        from tensorfabric.lab.launch import run_distributed

        out = run_distributed(lab, argv, timeout_s=600)
    else:
        out = subprocess.run([sys.executable, "-m", "tensorfabric", *argv], check=True, capture_output=True,
                             text=True, timeout=600).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", default="2x1gbit")
    ap.add_argument("--loopback", action="store_true", help="Two local ranks on loopback, no lab.")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "inference_comm.json"))
    args = ap.parse_args()
    lab = None if args.loopback or not _lab_available() else args.lab
    where = f"lab {lab}" if lab else "loopback (no lab: not root or lab missing)"
    with tempfile.TemporaryDirectory(prefix="tf-comm-") as tmp:
        cfg = tiny_config(layers=args.layers, hidden=args.hidden, heads=8, kv_heads=4, vocab=512,
                          intermediate=args.hidden * 2, max_positions=1024)
        directory = make_tiny(Path(tmp) / "model", cfg, seed=0)
        prompt = ("The fabric carries activations between tensor-parallel shards. " * 10)[:511]  # + <s> = 512
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CONFIGS}
        logits: dict[str, torch.Tensor] = {}
        for rep in range(args.repeats):
            for name, extra in CONFIGS.items():
                path = Path(tmp) / f"{name}-{rep}.pt"
                argv = ["run", "--model", str(directory), "--tp", "2", "--prompt", prompt, "--max-new-tokens", "64",
                        "--ignore-eos", "--json", "--save-logits", str(path), *extra]
                runs[name].append(_run(argv, lab))
                logits[name] = torch.load(path)
                print(f"  {name:<12} rep {rep}: ttft {runs[name][-1]['ttft_s'] * 1e3:7.1f} ms, decode p50 "
                      f"{runs[name][-1]['decode_latency_s']['p50'] * 1e3:6.2f} ms", flush=True)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] if key in ("ttft_s", "prefill_comm_s") else r["decode_latency_s"][key]
                                 for r in runs[name])

    none_tokens = runs["none"][0]["token_ids"]
    result: dict[str, Any] = {"where": where, "prompt_tokens": 512, "new_tokens": 64, "hidden": args.hidden,
                              "layers": args.layers, "repeats": args.repeats, "configs": {}}
    for name in CONFIGS:
        tokens = runs[name][0]["token_ids"]
        agree = sum(a == b for a, b in zip(tokens, none_tokens, strict=True)) / len(none_tokens)
        first = next((i for i, (a, b) in enumerate(zip(tokens, none_tokens, strict=True)) if a != b), None)
        steps = min(len(logits[name]), len(logits["none"]), first if first is not None else 64)
        result["configs"][name] = {
            "ttft_ms": med(name, "ttft_s") * 1e3, "prefill_comm_ms": med(name, "prefill_comm_s") * 1e3,
            "ttft_ms_each": [r["ttft_s"] * 1e3 for r in runs[name]], "decode_p50_ms": med(name, "p50") * 1e3,
            "decode_p99_ms": med(name, "p99") * 1e3,
            "ttft_speedup_vs_none": med("none", "ttft_s") / med(name, "ttft_s"),
            "token_agreement": agree, "first_divergence": first,
            "max_logit_dev_first_token": (logits[name][0] - logits["none"][0]).abs().max().item(),
            "max_logit_dev_until_divergence": (logits[name][:max(steps, 1)] - logits["none"][:max(steps, 1)])
            .abs().max().item(),
            "all_reduce_whole_run": runs[name][0]["comm"].get("all_reduce"),
            "transport": runs[name][0]["transport"]}
    print(f"tp=2, 512-token prompt, 64 greedy tokens, {where}")
    for name, row in result["configs"].items():
        print(f"{name:<12} TTFT {row['ttft_ms']:7.1f} ms (x{row['ttft_speedup_vs_none']:.2f} vs none, prefill comm "
              f"{row['prefill_comm_ms']:6.1f} ms)  decode p50 "
              f"{row['decode_p50_ms']:6.2f} ms  agreement {row['token_agreement']:.3f}  max logit dev "
              f"{row['max_logit_dev_first_token']:.4f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
