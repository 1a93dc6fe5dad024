"""``tensorfabric run``: generate text with a tensor/pipeline-parallel Llama and report what it cost.

Three ways a run starts:

* inside a launched job (torchrun, a lab host: RANK/WORLD_SIZE set) -- run as that rank, rank 0 reports;
* ``--lab NxRATE`` -- one rank per host of a network-namespace lab with shaped links;
* otherwise -- ``tp x pp`` local ranks through ``launch.spawn`` (in process when that is one rank).

Without ``--model`` the tiny default model is made once in the cache directory, ``$XDG_CACHE_HOME/tensorfabric``
or ``~/.cache/tensorfabric`` (read in :func:`_cache_dir`, the one place this verb reads the environment).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tensorfabric.cli._common import DURATION, console, emit_json, progress

if TYPE_CHECKING:
    from tensorfabric.inference.runner import RankResult, RunConfig

__all__ = ["cli"]

DEFAULT_PROMPT = "The fabric carries every token between the shards"
DEFAULT_MODEL_NAME = "tiny-llama-l4-h256-v512-s0"


def _cache_dir(environ: Mapping[str, str]) -> Path:
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".cache")
    return Path(base) / "tensorfabric"


def _default_model(environ: Mapping[str, str]) -> Path:
    from tensorfabric.inference.tiny import make_tiny, tiny_config

    directory = _cache_dir(environ) / DEFAULT_MODEL_NAME
    if not (directory / "config.json").is_file():  # config.json is written last: its presence means complete
        make_tiny(directory, tiny_config(), seed=0)
    return directory


def _bars(stack: ExitStack) -> Callable[[str, int], Callable[[float], None]]:
    def start(description: str, total: int) -> Callable[[float], None]:
        return stack.enter_context(progress(description, total))

    return start


def _rank_main(rank: int, cfg: RunConfig, show_progress: bool) -> RankResult:
    """Spawn target: one local rank; only rank 0 draws progress bars."""
    from tensorfabric.inference.runner import run_rank

    with ExitStack() as stack:
        bars = _bars(stack) if show_progress and rank == 0 else None
        return run_rank(cfg, environ=dict(os.environ), progress=bars)


def _save_logits(path: Path, result: RankResult) -> None:
    import io

    import torch

    from tensorfabric.fsutil import atomic_write_bytes

    buf = io.BytesIO()
    torch.save(torch.stack(result.logits), buf)
    atomic_write_bytes(path, buf.getvalue())


def _lab_argv(cfg: RunConfig, as_json: bool, logits_path: Path | None) -> list[str]:
    argv = ["run", "--model", cfg.model_dir, "--tp", str(cfg.tp), "--pp", str(cfg.pp),
            "--max-new-tokens", str(cfg.sampling.max_new_tokens), "--temperature", str(cfg.sampling.temperature),
            "--top-p", str(cfg.sampling.top_p), "--seed", str(cfg.sampling.seed), "--comm-codec", cfg.codec,
            "--dtype", cfg.dtype, "--microbatches", str(cfg.microbatches), "--timeout", f"{cfg.timeout_s}s"]
    for prompt in cfg.prompts:
        argv += ["--prompt", prompt]
    if cfg.codec_decode:
        argv.append("--comm-codec-decode")
    if not cfg.warmup:
        argv.append("--no-warmup")
    if not cfg.sampling.stop_at_eos:
        argv.append("--ignore-eos")
    if logits_path is not None:
        argv += ["--save-logits", str(logits_path)]
    argv += ["--engine", cfg.engine] + (["--require-rdma"] if cfg.require_rdma else [])
    if as_json:
        argv.append("--json")
    return argv


def _render(report: dict[str, Any]) -> None:
    from rich.table import Table

    con = console()
    texts = report["text"] if isinstance(report["text"], list) else [report["text"]]
    con.print(f"model: {report['model']}", markup=False)
    if Path(report["model"]).name == DEFAULT_MODEL_NAME:
        con.print("(the embedded default is a random-initialised tiny model: its text is noise, its traffic is real)")
    for i, text in enumerate(texts):
        # A random model emits arbitrary bytes; control characters must not drive the terminal.
        shown = "".join(c if c.isprintable() or c == "\n" else f"\\x{ord(c):02x}" for c in text)
        con.print(f"generated[{i}]: {shown}", markup=False)
    lat = report["decode_latency_s"]
    con.print(f"\ntp={report['tp']} pp={report['pp']} dtype={report['dtype']} codec={report['codec']}"
              f"{' (prefill+decode)' if report['codec_decode'] else ' (prefill)'} transport={report['transport']}")
    con.print(f"time to first token {report['ttft_s'] * 1e3:.1f} ms, {report['new_tokens']} new tokens, "
              f"{report['tokens_per_s']:.1f} tokens/s")
    con.print(f"decode latency per token: p50 {lat['p50'] * 1e3:.1f} ms, p99 {lat['p99'] * 1e3:.1f} ms")
    per = report["per_token"]
    con.print(f"per decode token: compute {per['compute_s'] * 1e3:.2f} ms, communication {per['comm_s'] * 1e3:.2f} ms")
    if report["comm"]:
        table = Table(title="communication (rank 0, whole generation)")
        for col in ("collective", "calls", "bytes", "wire bytes", "seconds", "codec"):
            table.add_column(col, justify="left" if col in ("collective", "codec") else "right")
        for op, s in report["comm"].items():
            table.add_row(op, str(s["calls"]), f"{s['bytes']:,}", f"{s['wire_bytes']:,}", f"{s['seconds']:.4f}",
                          ",".join(s["codecs"]))
        con.print(table)


@click.command("run")
@click.option("--model", "model_dir", type=click.Path(path_type=Path), default=None,
              help="Hugging Face checkpoint directory [default: the tiny model, made once in the cache].")
@click.option("--tp", default=2, show_default=True, type=int, help="Tensor-parallel ranks.")
@click.option("--pp", default=1, show_default=True, type=int, help="Pipeline stages.")
@click.option("--prompt", "prompts", multiple=True, help="Prompt text (repeat for a batch).")
@click.option("--max-new-tokens", default=32, show_default=True, type=int)
@click.option("--temperature", default=0.0, show_default=True, type=float, help="0 = greedy.")
@click.option("--top-p", default=1.0, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--ignore-eos", is_flag=True, help="Always generate --max-new-tokens tokens.")
@click.option("--comm-codec", "codec", type=click.Choice(["none", "int8", "int4", "fp8"]), default="none",
              show_default=True, help="Compress the TP all-reduces during prefill.")
@click.option("--comm-codec-decode", "codec_decode", is_flag=True, help="Use --comm-codec in decode too.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32",
              show_default=True)
@click.option("--microbatches", default=0, show_default=True, type=int,
              help="Prefill chunks for pipeline parallelism [0: one per stage].")
@click.option("--lab", "lab_spec", default=None, help="Run one rank per host of a lab, e.g. 2x1gbit.")
@click.option("--timeout", "timeout_s", type=DURATION, default=300.0, show_default=True,
              help="Bound on the whole run (and on each collective).")
@click.option("--save-logits", "logits_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Save each step's full logits (float32, [steps, batch, vocab]) to this torch file.")
@click.option("--warmup/--no-warmup", default=True, show_default=True,
              help="One unmeasured pass over the prompts first, so TTFT is a warmed engine's.")
@click.option("--engine", type=click.Choice(["auto", "torch", "nixl"]), default="auto", show_default=True,
              help="Small tensors through NIXL/UCX (nixl), all through torch.distributed (torch), or nixl when "
                   "installed (auto).")
@click.option("--require-rdma", is_flag=True, help="Fail unless UCX/NCCL report an RDMA transport.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--disaggregate", "split", default=None, metavar="P:D",
              help="P prefill ranks and D decode ranks; the KV cache moves between them over NIXL (see docs/kv.md).")
@click.option("--prefill-tp", default=0, type=int, help="Tensor parallelism of the prefill side [default: P].")
@click.option("--decode-tp", default=0, type=int, help="Tensor parallelism of the decode side [default: D].")
def cli(model_dir: Path | None, tp: int, pp: int, prompts: tuple[str, ...], max_new_tokens: int,
        temperature: float, top_p: float, seed: int, ignore_eos: bool, codec: str, codec_decode: bool, dtype: str,
        microbatches: int, lab_spec: str | None, timeout_s: float, logits_path: Path | None, warmup: bool,
        engine: str, require_rdma: bool, as_json: bool, split: str | None = None, prefill_tp: int = 0,
        decode_tp: int = 0) -> int:
    """Generate text on tp x pp ranks and report TTFT, decode latency, throughput and communication."""
    from tensorfabric.errors import InputError
    from tensorfabric.inference.report import summarize
    from tensorfabric.inference.runner import RunConfig, prepare
    from tensorfabric.inference.sampling import SamplingParams
    from tensorfabric.inference.tokenizer import load_tokenizer
    from tensorfabric.transfer.launch import spawn, under_torchrun

    environ = dict(os.environ)
    if microbatches < 0:
        raise InputError(f"--microbatches {microbatches} must be 0 (automatic) or positive")
    directory = model_dir if model_dir is not None else _default_model(environ)
    cfg = RunConfig(model_dir=str(directory), tp=tp, pp=pp, prompts=prompts or (DEFAULT_PROMPT,),
                    sampling=SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                            seed=seed, stop_at_eos=not ignore_eos),
                    codec=codec, codec_decode=codec_decode, dtype=dtype, microbatches=microbatches,
                    timeout_s=float(timeout_s), keep_logits=logits_path is not None, warmup=warmup,
                    engine=engine, require_rdma=require_rdma)
    if split is not None:
        from tensorfabric.inference.disagg_report import render_lines, run_disaggregated

        if logits_path is not None:
            raise InputError("--save-logits does not combine with --disaggregate")
        report = run_disaggregated(cfg, split, prefill_tp, decode_tp, environ=environ, lab=lab_spec,
                                   lab_argv=_lab_argv(cfg, True, None))
        if report is not None and as_json:
            emit_json(report)
        elif report is not None:
            for line in render_lines(report):
                click.echo(line)
        return 0
    if lab_spec is not None and not under_torchrun(environ):
        from tensorfabric.lab.launch import run_distributed
        from tensorfabric.lab.spec import parse_short_spec

        hosts, _ = parse_short_spec(lab_spec)
        prepare(cfg, world_size=hosts)
        argv = _lab_argv(cfg, as_json, logits_path)
        click.echo(run_distributed(lab_spec, argv, timeout_s=float(timeout_s) + 60), nl=False)
        return 0
    show = not as_json
    # The last stage's first tensor-parallel rank holds the logits.
    logits_rank = (pp - 1) * tp
    if under_torchrun(environ):
        result = _rank_main(int(environ["RANK"]), cfg, show)
        if logits_path is not None and result.rank == logits_rank:
            _save_logits(logits_path, result)
        if result.rank != 0:
            return 0
    else:
        prepare(cfg, world_size=tp * pp)
        if tp * pp == 1:
            results = [_rank_main(0, replace(cfg), show)]
        else:
            results = spawn(_rank_main, tp * pp, args=(cfg, show), timeout_s=float(timeout_s) + 60)
        result = results[0]
        if logits_path is not None:
            _save_logits(logits_path, results[logits_rank])
    tok = load_tokenizer(directory)
    texts = [tok.decode(ids, skip_special_tokens=True) for ids in result.token_ids]
    report = summarize(result, cfg, texts, str(directory))
    if as_json:
        emit_json(report)
    else:
        _render(report)
    return 0
