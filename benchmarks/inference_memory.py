"""Peak resident memory per rank at tp=2 against the full model size (issue 4, acceptance 3).

Makes a ~200 MB float32 checkpoint split into several safetensors files, runs a short generation at tp=1
(one spawned rank) and tp=2 (two spawned ranks), and reports each rank's RSS before loading (the runtime
baseline: interpreter, torch, process group) and its high-water mark (VmHWM) after generating. The target:
peak < 0.7 x model size + baseline on every tp=2 rank. Writes benchmarks/results/inference_memory.json.

    .venv/bin/python benchmarks/inference_memory.py [--layers 6 --hidden 768]
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

from tensorfabric.fsutil import atomic_write_json
from tensorfabric.inference.runner import RunConfig, rank_entry
from tensorfabric.inference.sampling import SamplingParams
from tensorfabric.inference.tiny import make_tiny, tiny_config
from tensorfabric.transfer.launch import Placement, launch

MIB = 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "inference_memory.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tf-mem-") as tmp:
        cfg = tiny_config(layers=args.layers, hidden=args.hidden, heads=12, kv_heads=4, vocab=args.vocab,
                          intermediate=args.hidden * 8 // 3)
        directory = make_tiny(Path(tmp) / "model", cfg, seed=0, shard_bytes=48 * MIB)
        files = sorted(directory.glob("*.safetensors"))
        model_bytes = sum(f.stat().st_size for f in files)
        run = RunConfig(model_dir=str(directory), prompts=("memory " * 8,),
                        sampling=SamplingParams(max_new_tokens=4, stop_at_eos=False))
        rows = []
        for tp in (1, 2):
            # Fresh local processes even for tp=1 (placement() would run one rank in this process): each rank's
            # own RSS is the measurement.
            where = Placement("local", tp, tp)
            for r in launch(rank_entry, where, args=(replace(run, tp=tp),), timeout_s=600).values():
                budget = 0.7 * model_bytes + r.rss_baseline_bytes
                rows.append({"tp": tp, "rank": r.rank, "baseline_mib": r.rss_baseline_bytes / MIB,
                             "peak_mib": r.rss_peak_bytes / MIB,
                             "growth_mib": (r.rss_peak_bytes - r.rss_baseline_bytes) / MIB,
                             "shard_mib": r.shard_bytes / MIB, "budget_mib": budget / MIB,
                             "within_budget": r.rss_peak_bytes < budget, "load_s": r.load_s})
    result = {"model_mib": model_bytes / MIB, "files": len(files), "parameters": cfg.parameter_count(),
              "ranks": rows,
              "pass": all(row["within_budget"] for row in rows if row["tp"] == 2)}
    print(f"model {model_bytes / MIB:.1f} MiB in {len(files)} files ({cfg.parameter_count():,} parameters)")
    print(f"{'tp':>3} {'rank':>4} {'baseline':>9} {'peak':>9} {'growth':>9} {'shard':>9} {'budget':>9}  ok")
    for row in rows:
        print(f"{row['tp']:>3} {row['rank']:>4} {row['baseline_mib']:>8.1f}M {row['peak_mib']:>8.1f}M "
              f"{row['growth_mib']:>8.1f}M {row['shard_mib']:>8.1f}M {row['budget_mib']:>8.1f}M  "
              f"{row['within_budget']}")
    out = Path(args.out)
    atomic_write_json(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
