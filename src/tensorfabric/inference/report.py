"""The figures a run reports, computed from rank 0's measurements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorfabric.inference.runner import RankResult, RunConfig

__all__ = ["percentile", "summarize"]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(result: RankResult, cfg: RunConfig, texts: Sequence[str], model_dir: str) -> dict[str, Any]:
    """The ``--json`` object of ``tensorfabric run`` (human output renders the same dict)."""
    new_tokens = sum(len(ids) for ids in result.token_ids)
    elapsed = result.ttft_s + sum(result.step_s)
    steps = len(result.step_s)
    comm_per_token = sum(result.step_comm_s) / steps if steps else 0.0
    step_mean = sum(result.step_s) / steps if steps else 0.0
    single = len(result.token_ids) == 1
    return {
        "text": texts[0] if single else list(texts),
        "token_ids": result.token_ids[0] if single else result.token_ids,
        "ttft_s": result.ttft_s,
        "decode_latency_s": {"p50": percentile(result.step_s, 50), "p99": percentile(result.step_s, 99)},
        "tokens_per_s": new_tokens / elapsed if elapsed > 0 else 0.0,
        "tp": cfg.tp,
        "pp": cfg.pp,
        "codec": cfg.codec or "none",  # the report's label for the uncompressed path, as the CLI spells it
        "codec_decode": cfg.codec_decode,
        "transport": result.transport,
        "comm": {op: {"calls": s["calls"], "bytes": s["bytes"], "wire_bytes": s["wire_bytes"],
                      "seconds": s["seconds"], "codecs": s["codecs"], "nixl_calls": s.get("nixl_calls", 0),
                      "wait_s": s.get("wait_seconds", 0.0),
                      "move_s": s["seconds"] - s.get("wait_seconds", 0.0) if s.get("nixl_calls") else None,
                      # Of seconds, the part before the group's last rank called (None: unknown).
                      "late_s": s.get("late_seconds")}
                 for op, s in sorted(result.comm.items())},
        "engine": cfg.engine,
        "per_token": {"compute_s": max(step_mean - comm_per_token, 0.0), "comm_s": comm_per_token},
        "prefill_comm_s": result.prefill_comm_s,
        "new_tokens": new_tokens,
        "dtype": cfg.dtype,
        "model": model_dir,
        "load_s": result.load_s,
        "shard_bytes": result.shard_bytes,
    }
