"""What ``tensorfabric run`` reports, computed from rank 0's measurements.

:class:`RunReport` is the verb's typed report; :meth:`RunReport.to_json` is its ``--json`` document and the
human renderer in ``cli/run.py`` reads the same record. A disaggregated run has its own record,
:class:`tensorfabric.inference.disagg_report.DisaggReport`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorfabric.inference.runner import RankResult, RunConfig
from tensorfabric.jsonable import json_default

__all__ = ["CollectiveCost", "RunReport", "decoded", "one_or_many", "percentile", "run_report", "shown"]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def one_or_many(items: Sequence[Any]) -> Any:
    """A batch of one prompt reports its text and tokens bare, a batch of several as a list (the ``--json``
    contract since the first release)."""
    return items[0] if len(items) == 1 else list(items)


def shown(text: str) -> str:
    """A random model emits arbitrary bytes; control characters must not drive the terminal."""
    return "".join(c if c.isprintable() or c == "\n" else f"\\x{ord(c):02x}" for c in text)


def decoded(model_dir: Path, token_ids: Sequence[Sequence[int]]) -> list[str]:
    """Each prompt's generated tokens as text, through the model's own tokenizer."""
    from tensorfabric.inference.tokenizer import load_tokenizer

    tok = load_tokenizer(model_dir)
    return [tok.decode(list(ids), skip_special_tokens=True) for ids in token_ids]


@dataclass(frozen=True)
class CollectiveCost:
    """One collective type's totals on rank 0 over the whole generation (see ``inference.comm.merge_stats``)."""

    op: str
    calls: int
    bytes: int
    wire_bytes: int
    seconds: float
    codecs: tuple[str, ...]
    nixl_calls: int
    wait_s: float
    """Of ``seconds``, the NIXL calls' time blocked for peers' data."""
    move_s: float | None
    """Of ``seconds``, this rank moving bytes through NIXL (None: no call went through NIXL)."""
    late_s: float | None
    """Of ``seconds``, the part before the group's last rank called (None: unknown)."""

    @classmethod
    def from_stats(cls, op: str, s: Mapping[str, Any]) -> CollectiveCost:
        wait = s.get("wait_seconds", 0.0)
        return cls(op=op, calls=s["calls"], bytes=s["bytes"], wire_bytes=s["wire_bytes"], seconds=s["seconds"],
                   codecs=tuple(s["codecs"]), nixl_calls=s.get("nixl_calls", 0), wait_s=wait,
                   move_s=s["seconds"] - wait if s.get("nixl_calls") else None, late_s=s.get("late_seconds"))

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "bytes": self.bytes, "wire_bytes": self.wire_bytes, "seconds": self.seconds,
                "codecs": list(self.codecs), "nixl_calls": self.nixl_calls, "wait_s": self.wait_s,
                "move_s": self.move_s, "late_s": self.late_s}


@dataclass(frozen=True)
class RunReport:
    """One colocated run: its text, time to first token, decode latency, throughput and communication."""

    texts: tuple[str, ...]
    token_ids: tuple[tuple[int, ...], ...]
    ttft_s: float
    decode_p50_s: float
    decode_p99_s: float
    tokens_per_s: float
    tp: int
    pp: int
    codec: str
    """``none`` for the uncompressed path, as the CLI spells it."""
    codec_decode: bool
    transport: str
    comm: tuple[CollectiveCost, ...]
    """Sorted by collective name."""
    engine: str
    compute_per_token_s: float
    comm_per_token_s: float
    prefill_comm_s: float
    new_tokens: int
    dtype: str
    model: str
    load_s: float
    shard_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": one_or_many(self.texts),
            "token_ids": one_or_many([list(ids) for ids in self.token_ids]),
            "ttft_s": self.ttft_s,
            "decode_latency_s": {"p50": self.decode_p50_s, "p99": self.decode_p99_s},
            "tokens_per_s": self.tokens_per_s,
            "tp": self.tp,
            "pp": self.pp,
            "codec": self.codec,
            "codec_decode": self.codec_decode,
            "transport": self.transport,
            "comm": {c.op: c.to_dict() for c in self.comm},
            "engine": self.engine,
            "per_token": {"compute_s": self.compute_per_token_s, "comm_s": self.comm_per_token_s},
            "prefill_comm_s": self.prefill_comm_s,
            "new_tokens": self.new_tokens,
            "dtype": self.dtype,
            "model": self.model,
            "load_s": self.load_s,
            "shard_bytes": self.shard_bytes,
        }

    def to_json(self) -> str:
        """The ``--json`` document, newline-terminated, keys in the contract's order."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=json_default) + "\n"


def run_report(result: RankResult, cfg: RunConfig, texts: Sequence[str], model_dir: str) -> RunReport:
    """The report of a colocated run from rank 0's result and its decoded texts."""
    steps = len(result.step_s)
    elapsed = result.ttft_s + sum(result.step_s)
    new_tokens = sum(len(ids) for ids in result.token_ids)
    comm_per_token = sum(result.step_comm_s) / steps if steps else 0.0
    step_mean = sum(result.step_s) / steps if steps else 0.0
    return RunReport(
        texts=tuple(texts), token_ids=tuple(tuple(ids) for ids in result.token_ids), ttft_s=result.ttft_s,
        decode_p50_s=percentile(result.step_s, 50), decode_p99_s=percentile(result.step_s, 99),
        tokens_per_s=new_tokens / elapsed if elapsed > 0 else 0.0, tp=cfg.tp, pp=cfg.pp, codec=cfg.codec or "none",
        codec_decode=cfg.codec_decode, transport=result.transport,
        comm=tuple(CollectiveCost.from_stats(op, s) for op, s in sorted(result.comm.items())), engine=cfg.engine,
        compute_per_token_s=max(step_mean - comm_per_token, 0.0), comm_per_token_s=comm_per_token,
        prefill_comm_s=result.prefill_comm_s, new_tokens=new_tokens, dtype=cfg.dtype, model=model_dir,
        load_s=result.load_s, shard_bytes=result.shard_bytes)

