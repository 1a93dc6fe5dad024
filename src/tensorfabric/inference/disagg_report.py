"""What a disaggregated run reports, per request, from every rank's measurements.

:class:`DisaggReport` is the typed report of ``tensorfabric run --disaggregate P:D``; :meth:`DisaggReport.to_json`
is its ``--json`` document and the human renderer in ``cli/run.py`` reads the same record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tensorfabric.inference.disagg import DisaggConfig, DisaggRankResult
from tensorfabric.inference.report import decoded, one_or_many, percentile, shown
from tensorfabric.jsonable import json_default

__all__ = ["DisaggReport", "KvRequest", "disagg_report", "summarize_disagg"]


@dataclass(frozen=True)
class KvRequest:
    """One request's KV cache move and its time to first token (seconds; bytes)."""

    request: int
    prompt_tokens: int
    token_ids: tuple[int, ...]
    kv_bytes: int
    kv_blocks: int
    descriptors: int
    writes: int
    kv_pack_s: float
    kv_write_s: float
    """On the wire; packing into staging is inside it (overlapped with the wire, chunk by chunk)."""
    kv_gbytes_per_s: float
    link_fraction: float | None
    """Of the link the KV crosses, when its rate is known (the lab's)."""
    prefill_compute_s: float
    first_decode_step_s: float
    decode_p50_s: float
    decode_p99_s: float
    kv_wait_s: float
    credit_wait_s: float

    @property
    def kv_transfer_s(self) -> float:
        return self.kv_write_s

    @property
    def ttft_s(self) -> float:
        return self.prefill_compute_s + self.kv_transfer_s + self.first_decode_step_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "request": self.request, "prompt_tokens": self.prompt_tokens, "token_ids": list(self.token_ids),
            "kv_bytes": self.kv_bytes, "kv_blocks": self.kv_blocks, "descriptors": self.descriptors,
            "writes": self.writes, "kv_transfer_s": self.kv_transfer_s, "kv_pack_s": self.kv_pack_s,
            "kv_write_s": self.kv_write_s, "kv_gbytes_per_s": self.kv_gbytes_per_s,
            "link_fraction": self.link_fraction,
            "ttft_s": {"prefill_compute_s": self.prefill_compute_s, "kv_transfer_s": self.kv_transfer_s,
                       "first_decode_step_s": self.first_decode_step_s, "total_s": self.ttft_s},
            "decode_latency_s": {"p50": self.decode_p50_s, "p99": self.decode_p99_s},
            "kv_wait_s": self.kv_wait_s, "credit_wait_s": self.credit_wait_s,
        }


@dataclass(frozen=True)
class DisaggReport:
    """A run of P prefill and D decode ranks; ``transports`` and ``connection_setup_s`` are per rank
    (``prefill0``, ``decode0``, ...), in rank order."""

    model: str
    dtype: str
    prefill_ranks: int
    prefill_tp: int
    decode_ranks: int
    decode_tp: int
    block_tokens: int
    transport: str
    transports: tuple[tuple[str, str], ...]
    connection_setup_s: tuple[tuple[str, float], ...]
    link_rate_bps: float | None
    texts: tuple[str, ...]
    token_ids: tuple[tuple[int, ...], ...]
    requests: tuple[KvRequest, ...]
    load_s: float
    text_shown: tuple[str, ...] | None = None
    """The texts with control characters escaped (a random model emits arbitrary bytes); None when the report
    was made without a tokenizer's texts to show."""

    @property
    def kv_layout(self) -> str:
        return f"pool[block][layer][k|v][head][{self.block_tokens} tokens][head_dim]"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "mode": "disaggregated",
            "model": self.model,
            "dtype": self.dtype,
            "prefill": {"ranks": self.prefill_ranks, "tp": self.prefill_tp},
            "decode": {"ranks": self.decode_ranks, "tp": self.decode_tp},
            "kv_layout": self.kv_layout,
            "block_tokens": self.block_tokens,
            "transport": self.transport,
            "transports": dict(self.transports),
            "connection_setup_s": dict(self.connection_setup_s),
            "link_rate_bps": self.link_rate_bps,
            "text": one_or_many(self.texts),
            "token_ids": one_or_many([list(ids) for ids in self.token_ids]),
            "requests": [r.to_dict() for r in self.requests],
            "load_s": self.load_s,
        }
        if self.text_shown is not None:
            out["text_shown"] = list(self.text_shown)
        return out

    def to_json(self) -> str:
        """The ``--json`` document, newline-terminated, keys in the contract's order."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, default=json_default) + "\n"


def disagg_report(results: Sequence[DisaggRankResult], cfg: DisaggConfig,
                  link_rate_bps: float | None = None) -> DisaggReport:
    """The report of a run from every rank's results, with the decode side's texts through the model's
    tokenizer. ``link_rate_bps``: the link the KV crosses, when known (the lab's), for each request's fraction
    of it."""
    from pathlib import Path

    lead = next(r for r in results if r.role == "decode")
    texts = decoded(Path(cfg.run.model_dir), lead.token_ids)
    rate = None if link_rate_bps is None else float(link_rate_bps)
    report = summarize_disagg(results, cfg, texts, cfg.run.model_dir, rate)
    return replace(report, text_shown=tuple(shown(t) for t in texts))


def _request(i: int, sends: Sequence[Mapping[str, Any]], dec: Mapping[str, Any], token_ids: Sequence[int],
             link_rate_bps: float | None) -> KvRequest:
    kv_bytes = sum(s["kv_bytes"] for s in sends)
    write_s = max(s["write_s"] for s in sends)
    gbps = kv_bytes / write_s / 1e9 if write_s > 0 else 0.0
    return KvRequest(
        request=i, prompt_tokens=sends[0]["prompt_tokens"], token_ids=tuple(token_ids), kv_bytes=kv_bytes,
        kv_blocks=sends[0]["kv_blocks"], descriptors=sum(s["descriptors"] for s in sends),
        writes=sum(s["writes"] for s in sends), kv_pack_s=max(s["pack_s"] for s in sends), kv_write_s=write_s,
        kv_gbytes_per_s=gbps, link_fraction=gbps * 8e9 / link_rate_bps if link_rate_bps else None,
        prefill_compute_s=sends[0]["prefill_compute_s"], first_decode_step_s=dec["first_decode_step_s"],
        decode_p50_s=percentile(dec["step_s"], 50), decode_p99_s=percentile(dec["step_s"], 99),
        kv_wait_s=dec["kv_wait_s"], credit_wait_s=max(s["credit_wait_s"] for s in sends))


def summarize_disagg(results: Sequence[DisaggRankResult], cfg: DisaggConfig, texts: Sequence[str],
                     model_dir: str, link_rate_bps: float | None = None) -> DisaggReport:
    """``link_rate_bps``: the link the KV crosses (known in the lab), for the fraction-of-line-rate figure."""
    prefill = [r for r in results if r.role == "prefill"]
    lead = next(r for r in results if r.role == "decode")
    requests = tuple(_request(i, [p.requests[i] for p in prefill], dec, lead.token_ids[i], link_rate_bps)
                     for i, dec in enumerate(lead.requests))
    return DisaggReport(
        model=model_dir, dtype=cfg.run.dtype, prefill_ranks=cfg.prefill, prefill_tp=cfg.ptp,
        decode_ranks=cfg.decode, decode_tp=cfg.dtp, block_tokens=cfg.block_tokens, transport=prefill[0].transport,
        transports=tuple((f"{r.role}{r.index}", r.transport) for r in results),
        connection_setup_s=tuple((f"{r.role}{r.index}", r.setup_s) for r in results), link_rate_bps=link_rate_bps,
        texts=tuple(texts), token_ids=tuple(tuple(ids) for ids in lead.token_ids), requests=requests,
        load_s=max(r.load_s for r in results))
