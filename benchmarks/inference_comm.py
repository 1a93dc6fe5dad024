"""Compressed TP all-reduce in prefill: int8 against none, tp=2 (issue 4, acceptance 4).

For each model shape, runs ``tensorfabric run`` on the same 512-token prompt and 64 greedy tokens three ways:
codec none, int8 in prefill only, int8 in prefill and decode. With root and the lab available each run is
one rank per host of a ``2x1gbit`` network-namespace lab (shaped 1 Gbit/s links); otherwise two local ranks
on loopback (the output says which). The configurations alternate, ``--repeats`` times, and medians are
reported: the TTFT ratio none/int8 (goal >= 1.5x), prefill communication and compute (and the compute
budget under which the measured communication times give 1.5x), the max logits deviation and greedy-token
agreement of int8 against none over 64 tokens, and decode latency per token with and without the codec.

The model is the one ``tensorfabric run`` makes by default (4 layers, 8 heads, 4 KV heads, vocab 512) at
each ``--hidden`` size (default 256, the embedded default). The TTFT ratio depends on how much of TTFT is
communication: each all-reduce moves tokens x hidden values while prefill compute grows with hidden^2, so
``--hidden 128 256 512 1024`` shows the curve (on a GPU node compute is ~1000x faster than on these CPU cores
and every size sits at the communication-bound end). Writes benchmarks/results/inference_comm.json and, with
more than one size, inference_comm.png.

    .venv/bin/python benchmarks/inference_comm.py [--lab 2x1gbit | --loopback] [--repeats 5] [--hidden 256 ...]
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

from tensorfabric.fsutil import atomic_write_figure, atomic_write_text
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.lab.netlink import privileges_missing

CONFIGS = {"none": ["--codec", "none"], "int8": ["--codec", "int8"],
           "int8-decode": ["--codec", "int8", "--codec-decode"]}
PROMPT = ("The fabric carries activations between tensor-parallel shards. " * 10)[:511]  # + <s> = 512 tokens
NEW_TOKENS = 64


def _run(argv: list[str], lab: str | None) -> dict[str, Any]:
    if lab is not None:
        from tensorfabric.lab.launch import run_distributed

        out = run_distributed(lab, argv, timeout_s=600)
    else:
        out = subprocess.run([sys.executable, "-m", "tensorfabric", *argv], check=True, capture_output=True,
                             text=True, timeout=600).stdout
    return json.loads(out)  # type: ignore[no-any-return]


def measure(hidden: int, layers: int, repeats: int, lab: str | None, tmp: Path) -> dict[str, Any]:
    """Every configuration on one model shape; medians and agreement against ``none``."""
    directory = make_tiny(tmp / f"model-{hidden}", tiny_config(layers=layers, hidden=hidden, max_positions=1024),
                          seed=0)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CONFIGS}
    logits: dict[str, torch.Tensor] = {}
    for rep in range(repeats):
        for name, extra in CONFIGS.items():
            path = tmp / f"{hidden}-{name}-{rep}.pt"
            argv = ["run", "--model", str(directory), "--tp", "2", "--prompt", PROMPT, "--max-new-tokens",
                    str(NEW_TOKENS), "--ignore-eos", "--json", "--save-logits", str(path), *extra]
            runs[name].append(_run(argv, lab))
            logits[name] = torch.load(path)
            print(f"  hidden {hidden:<5} {name:<12} rep {rep}: ttft {runs[name][-1]['ttft_s'] * 1e3:7.1f} ms, "
                  f"decode p50 {runs[name][-1]['decode_latency_s']['p50'] * 1e3:6.2f} ms", flush=True)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] if key in ("ttft_s", "prefill_comm_s") else r["decode_latency_s"][key]
                                 for r in runs[name])

    none_tokens = runs["none"][0]["token_ids"]
    shape: dict[str, Any] = {"hidden": hidden, "layers": layers, "configs": {}}
    for name in CONFIGS:
        tokens = runs[name][0]["token_ids"]
        agree = sum(a == b for a, b in zip(tokens, none_tokens, strict=True)) / len(none_tokens)
        first = next((i for i, (a, b) in enumerate(zip(tokens, none_tokens, strict=True)) if a != b), None)
        steps = max(1, min(len(logits[name]), len(logits["none"]), first if first is not None else NEW_TOKENS))
        shape["configs"][name] = {
            "ttft_ms": med(name, "ttft_s") * 1e3, "prefill_comm_ms": med(name, "prefill_comm_s") * 1e3,
            "prefill_compute_ms": statistics.median(r["ttft_s"] - r["prefill_comm_s"] for r in runs[name]) * 1e3,
            "ttft_ms_each": [r["ttft_s"] * 1e3 for r in runs[name]], "decode_p50_ms": med(name, "p50") * 1e3,
            "decode_p99_ms": med(name, "p99") * 1e3,
            "ttft_speedup_vs_none": med("none", "ttft_s") / med(name, "ttft_s"),
            "token_agreement": agree, "first_divergence": first,
            "max_logit_dev_first_token": (logits[name][0] - logits["none"][0]).abs().max().item(),
            "max_logit_dev_until_divergence": (logits[name][:steps] - logits["none"][:steps]).abs().max().item(),
            "all_reduce_whole_run": runs[name][0]["comm"].get("all_reduce"),
            "transport": runs[name][0]["transport"]}
    # TTFT = compute + communication, and compute is the same with either codec, so none/int8 >= 1.5 holds
    # exactly when compute <= (comm_none - 1.5 * comm_int8) / 0.5: the budget this link leaves for compute.
    comm_none, comm_int8 = med("none", "prefill_comm_s") * 1e3, med("int8", "prefill_comm_s") * 1e3
    shape["goal_compute_budget_ms"] = max(0.0, (comm_none - 1.5 * comm_int8) / 0.5)
    return shape


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes = result["shapes"]
    hidden = [s["hidden"] for s in shapes]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(hidden, [s["configs"]["int8"]["ttft_speedup_vs_none"] for s in shapes], "o-", label="int8 / none")
    left.axhline(1.5, color="grey", linestyle="--", label="goal 1.5x")
    left.axhline(1.0, color="black", linewidth=0.5)
    left.set_xscale("log", base=2)
    left.set_xlabel("hidden size")
    left.set_ylabel("TTFT speed-up (none / int8)")
    left.set_title(f"tp=2, 512-token prefill, {result['where']}")
    left.legend()
    x = range(len(shapes))
    for offset, name in ((-0.2, "none"), (0.2, "int8")):
        comp = [s["configs"][name]["prefill_compute_ms"] for s in shapes]
        comm = [s["configs"][name]["prefill_comm_ms"] for s in shapes]
        xs = [i + offset for i in x]
        right.bar(xs, comp, width=0.38, color="tab:blue" if name == "none" else "tab:green", label=f"{name} compute")
        right.bar(xs, comm, width=0.38, bottom=comp, color="tab:orange" if name == "none" else "tab:olive",
                  label=f"{name} communication")
    right.set_xticks(list(x), [str(h) for h in hidden])
    right.set_xlabel("hidden size")
    right.set_ylabel("TTFT (ms, median)")
    right.set_title("where TTFT goes (left bar none, right bar int8)")
    right.legend(fontsize=8)
    fig.tight_layout()
    atomic_write_figure(path, fig, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", default="2x1gbit")
    ap.add_argument("--loopback", action="store_true", help="Two local ranks on loopback, no lab.")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--hidden", type=int, nargs="+", default=[256])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "inference_comm.json"))
    args = ap.parse_args()
    missing = "--loopback" if args.loopback else privileges_missing()
    lab = None if missing else args.lab
    where = f"lab {lab}" if lab else f"loopback (no lab: {missing})"
    with tempfile.TemporaryDirectory(prefix="tf-comm-") as tmp:
        shapes = [measure(h, args.layers, args.repeats, lab, Path(tmp)) for h in args.hidden]
    result: dict[str, Any] = {"where": where, "prompt_tokens": 512, "new_tokens": NEW_TOKENS,
                              "repeats": args.repeats, "machine": {"cpus": os.cpu_count()}, "shapes": shapes}
    print(f"tp=2, 512-token prompt, {NEW_TOKENS} greedy tokens, {where}, medians of {args.repeats}")
    for shape in shapes:
        for name, row in shape["configs"].items():
            print(f"hidden {shape['hidden']:<5} {name:<12} TTFT {row['ttft_ms']:7.1f} ms "
                  f"(x{row['ttft_speedup_vs_none']:.2f} vs none; compute {row['prefill_compute_ms']:6.1f} ms, "
                  f"comm {row['prefill_comm_ms']:6.1f} ms)  decode p50 {row['decode_p50_ms']:6.2f} ms  "
                  f"agreement {row['token_agreement']:.3f}  max logit dev {row['max_logit_dev_first_token']:.4f}")
        print(f"hidden {shape['hidden']:<5} the 1.5x goal needs prefill compute <= "
              f"{shape['goal_compute_budget_ms']:.1f} ms per rank at these communication times; measured "
              f"{shape['configs']['none']['prefill_compute_ms']:.1f} ms")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    if len(shapes) > 1:
        plot(result, out.with_suffix(".png"))
        print(f"wrote {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
