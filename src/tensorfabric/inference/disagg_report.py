"""The figures of a disaggregated run, per request, from every rank's measurements (``run --json`` carries
this dict; the text output renders it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tensorfabric.errors import InputError
from tensorfabric.inference.disagg import DisaggConfig, DisaggRankResult, disagg_entry, parse_split
from tensorfabric.inference.report import percentile
from tensorfabric.inference.runner import RunConfig, prepare

__all__ = ["lab_report", "plan_disagg", "render_lines", "run_disaggregated", "summarize_disagg"]


def plan_disagg(run: RunConfig, split: str, prefill_tp: int = 0, decode_tp: int = 0) -> DisaggConfig:
    """The checked configuration of ``tensorfabric run --disaggregate P:D``."""
    p, d = parse_split(split)
    cfg = DisaggConfig(run=run, prefill=p, decode=d, prefill_tp=prefill_tp, decode_tp=decode_tp)
    cfg.check()
    return cfg


def run_disaggregated(cfg: DisaggConfig, *, environ: Mapping[str, str], lab: str | None = None,
                      lab_name: str | None = None, grace_s: float | None = None) -> dict[str, Any] | None:
    """Run the ``P + D`` ranks wherever :func:`~tensorfabric.transfer.launch.placement` puts them (inside a
    launched job this process is one rank; else one rank per host of ``lab``, or local processes); the report
    from rank 0's gathered results, or None on a rank other than 0 of a launched job."""
    from tensorfabric.transfer.launch import launch, placement

    where = placement(environ, ranks=cfg.world, lab=lab, lab_name=lab_name)
    if where.kind == "lab" and where.ranks != cfg.world:
        raise InputError(f"--lab {lab} has {where.ranks} hosts; --disaggregate {cfg.prefill}:{cfg.decode} needs "
                         f"{cfg.world}")
    if not where.launched:
        cfg.check()
        prepare(cfg.run)  # bad input is exit 2 here, before any rank starts
    if grace_s is None and where.kind == "local":
        grace_s = 10.0  # a KV peer blocked on a dead partner needs its transfer timeout to fail on its own
    ranks = launch(disagg_entry, where, args=(cfg,), timeout_s=cfg.run.timeout_s + 60, grace_s=grace_s)
    if 0 not in ranks:
        return None
    # Every rank gathered everyone's results at the end: rank 0 reports for the whole run.
    everyone: list[DisaggRankResult] = ranks[0].everyone
    if where.rate_bps is not None:
        return lab_report(everyone, cfg, where.rate_bps)
    return _report(everyone, cfg)


def lab_report(everyone: Sequence[DisaggRankResult], cfg: DisaggConfig, rate_bps: float) -> dict[str, Any]:
    """The report of a run whose link rate is known (the lab's), with each request's fraction of it."""
    report = _report(everyone, cfg)
    report["link_rate_bps"] = float(rate_bps)
    for req in report["requests"]:
        req["link_fraction"] = req["kv_gbytes_per_s"] * 8e9 / float(rate_bps)
    return report


def _report(results: Sequence[DisaggRankResult], cfg: DisaggConfig) -> dict[str, Any]:
    from pathlib import Path

    from tensorfabric.inference.tokenizer import load_tokenizer

    tok = load_tokenizer(Path(cfg.run.model_dir))
    lead = next(r for r in results if r.role == "decode")
    texts = [tok.decode(ids, skip_special_tokens=True) for ids in lead.token_ids]
    report = summarize_disagg(results, cfg, texts, cfg.run.model_dir)
    # A random model emits arbitrary bytes; control characters must not drive the terminal.
    report["text_shown"] = ["".join(c if c.isprintable() or c == "\n" else f"\\x{ord(c):02x}" for c in t)
                            for t in texts]
    return report


def summarize_disagg(results: Sequence[DisaggRankResult], cfg: DisaggConfig, texts: Sequence[str],
                     model_dir: str, link_rate_bps: float | None = None) -> dict[str, Any]:
    """``link_rate_bps``: the link the KV crosses (known in the lab), for the fraction-of-line-rate figure."""
    prefill = [r for r in results if r.role == "prefill"]
    decode = [r for r in results if r.role == "decode"]
    lead = decode[0]
    requests = []
    for i, dec in enumerate(lead.requests):
        sends = [p.requests[i] for p in prefill]
        kv_bytes = sum(s["kv_bytes"] for s in sends)
        write_s = max(s["write_s"] for s in sends)
        transfer_s = write_s  # packing into staging is inside it (overlapped with the wire, chunk by chunk)
        compute_s = sends[0]["prefill_compute_s"]
        first_step = dec["first_decode_step_s"]
        gbps = kv_bytes / write_s / 1e9 if write_s > 0 else 0.0
        requests.append({
            "request": i,
            "prompt_tokens": sends[0]["prompt_tokens"],
            "token_ids": lead.token_ids[i],
            "kv_bytes": kv_bytes,
            "kv_blocks": sends[0]["kv_blocks"],
            "descriptors": sum(s["descriptors"] for s in sends),
            "writes": sum(s["writes"] for s in sends),
            "kv_transfer_s": transfer_s,
            "kv_pack_s": max(s["pack_s"] for s in sends),
            "kv_write_s": write_s,
            "kv_gbytes_per_s": gbps,
            "link_fraction": gbps * 8e9 / link_rate_bps if link_rate_bps else None,
            "ttft_s": {"prefill_compute_s": compute_s, "kv_transfer_s": transfer_s,
                       "first_decode_step_s": first_step, "total_s": compute_s + transfer_s + first_step},
            "decode_latency_s": {"p50": percentile(dec["step_s"], 50), "p99": percentile(dec["step_s"], 99)},
            "kv_wait_s": dec["kv_wait_s"],
            "credit_wait_s": max(s["credit_wait_s"] for s in sends),
        })
    bt = cfg.block_tokens
    return {
        "mode": "disaggregated",
        "model": model_dir,
        "dtype": cfg.run.dtype,
        "prefill": {"ranks": cfg.prefill, "tp": cfg.ptp},
        "decode": {"ranks": cfg.decode, "tp": cfg.dtp},
        "kv_layout": f"pool[block][layer][k|v][head][{bt} tokens][head_dim]",
        "block_tokens": bt,
        "transport": prefill[0].transport,
        "transports": {f"{r.role}{r.index}": r.transport for r in results},
        "connection_setup_s": {f"{r.role}{r.index}": r.setup_s for r in results},
        "link_rate_bps": link_rate_bps,
        "text": texts[0] if len(texts) == 1 else list(texts),
        "token_ids": lead.token_ids[0] if len(lead.token_ids) == 1 else lead.token_ids,
        "requests": requests,
        "load_s": max(r.load_s for r in results),
    }


def render_lines(report: dict[str, Any]) -> list[str]:
    """The human form of :func:`summarize_disagg`'s dict."""
    setup = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in report["connection_setup_s"].items())
    lines = [f"disaggregated: prefill {report['prefill']['ranks']} rank(s) tp={report['prefill']['tp']} -> "
             f"decode {report['decode']['ranks']} rank(s) tp={report['decode']['tp']}, dtype={report['dtype']}",
             f"KV layout {report['kv_layout']}; transport {report['transport']}",
             f"connection setup (before the first request): {setup}"]
    lines += [f"generated[{i}]: {t}" for i, t in enumerate(report.get("text_shown", []))]
    for r in report["requests"]:
        t = r["ttft_s"]
        frac = f", {r['link_fraction'] * 100:.1f} % of the link" if r["link_fraction"] is not None else ""
        lines.append(f"request {r['request']}: {r['prompt_tokens']} prompt tokens, KV {r['kv_bytes']:,} B in "
                     f"{r['kv_blocks']} block(s), {r['descriptors']} descriptors / {r['writes']} writes, "
                     f"{r['kv_write_s'] * 1e3:.3f} ms on the wire = {r['kv_gbytes_per_s']:.2f} GB/s{frac}")
        lines.append(f"  TTFT {t['total_s'] * 1e3:.2f} ms = prefill {t['prefill_compute_s'] * 1e3:.2f} + KV transfer "
                     f"{t['kv_transfer_s'] * 1e3:.2f} + first decode step {t['first_decode_step_s'] * 1e3:.2f} ms; "
                     f"decode p50 {r['decode_latency_s']['p50'] * 1e3:.2f} ms, p99 "
                     f"{r['decode_latency_s']['p99'] * 1e3:.2f} ms, {len(r['token_ids'])} tokens")
    return lines
