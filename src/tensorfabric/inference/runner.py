"""One rank of an inference job: validate, join the group, load the shard, generate, measure.

``prepare`` runs before any process group exists, identically on every rank and in the launcher, so bad
input (missing or corrupt checkpoint, a non-Llama config, tp not dividing the heads, a world size that is
not tp x pp) is an InputError everywhere at once and no rank is left waiting in a rendezvous.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError
from tensorfabric.inference.checkpoint import Checkpoint, open_checkpoint
from tensorfabric.inference.config import ModelConfig, load_config
from tensorfabric.inference.integrity import check_shapes
from tensorfabric.inference.plan import ShardPlan, check_parallel
from tensorfabric.inference.sampling import SamplingParams
from tensorfabric.inference.weights import tensor_names

if TYPE_CHECKING:
    import torch

__all__ = ["DTYPES", "Prepared", "RankResult", "RunConfig", "prepare", "rank_entry", "run_rank"]

DTYPES = ("float32", "bfloat16", "float16")
Progress = Callable[[str, int], Callable[[float], None]]
"""``progress(description, total)`` -> ``advance(n)``; how a caller draws loading/generation bars."""


@dataclass(frozen=True)
class RunConfig:
    """Everything a rank needs; picklable, so the launcher hands it to spawned ranks unchanged."""

    model_dir: str
    tp: int = 1
    pp: int = 1
    prompts: tuple[str, ...] = ("Hello",)
    prompt_ids: tuple[tuple[int, ...], ...] = ()  # when given, used instead of tokenizing ``prompts``
    sampling: SamplingParams = SamplingParams()
    codec: str | None = None
    """The codec of the TP all-reduces (a registered name); ``None`` sends them uncompressed."""
    codec_decode: bool = False
    dtype: str = "float32"
    microbatches: int = 0  # 0: one per pipeline stage
    keep_logits: bool = False
    backend: str = "gloo"
    engine: str = "auto"
    """Transfer engine for small tensors: ``nixl``, ``torch`` or ``auto`` (see ``transfer.init``)."""
    require_rdma: bool = False
    timeout_s: float = 120.0
    warmup: bool = True
    """One unmeasured prefill + token on the same prompts first, so TTFT is a warmed engine's (no first-call
    allocations, kernel selection or lazy connection set-up in the figure), as serving engines report it."""


@dataclass(frozen=True)
class Prepared:
    model: ModelConfig
    checkpoint: Checkpoint
    prompts: tuple[tuple[int, ...], ...]


@dataclass
class RankResult:
    """What one rank measured. Times are seconds; ``comm`` is per collective type (see ``merge_stats``)."""

    rank: int
    token_ids: list[list[int]]
    ttft_s: float
    step_s: list[float]
    step_comm_s: list[float]
    prefill_comm_s: float
    comm: dict[str, dict[str, Any]]
    transport: str
    load_s: float
    shard_bytes: int
    rss_baseline_bytes: int
    rss_peak_bytes: int
    logits: list[torch.Tensor] = field(default_factory=list)


def prepare(cfg: RunConfig, world_size: int | None = None) -> Prepared:
    """Validate the run before any rank communicates; raise InputError naming the problem."""
    if cfg.dtype not in DTYPES:
        raise InputError(f"dtype {cfg.dtype!r} is not one of {', '.join(DTYPES)}")
    if cfg.codec is not None:
        from tensorfabric.transfer.codecs import CODECS

        CODECS.get(cfg.codec)  # InputError naming the registered codecs
    model = load_config(Path(cfg.model_dir))
    check_parallel(model, cfg.tp, cfg.pp, world_size)
    ckpt = open_checkpoint(Path(cfg.model_dir))  # DataError when a weight file fails its SHA256SUMS
    ckpt.require(tensor_names(model, 0, model.num_layers, embed=True, head=True))
    check_shapes(ckpt.shapes, model)
    if cfg.prompt_ids:
        prompts = cfg.prompt_ids
    else:
        from tensorfabric.inference.tokenizer import load_tokenizer

        tok = load_tokenizer(Path(cfg.model_dir))
        prompts = tuple(tuple(tok.encode(p).ids) for p in cfg.prompts)
    bad = [t for p in prompts for t in p if not 0 <= t < model.vocab_size]
    if bad:
        raise InputError(f"prompt token id {bad[0]} is outside the vocabulary (0..{model.vocab_size - 1})")
    if not prompts or any(not p for p in prompts):
        raise InputError("every prompt must have at least one token")
    return Prepared(model, ckpt, prompts)


def _rss(field_name: str, status: Path) -> int:
    """Resident set size (``VmRSS``) or its high-water mark (``VmHWM``) in bytes; 0 where unavailable."""
    try:
        for line in status.read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def torch_threads(local_ranks: int, current: int, cores: int | None = None) -> int:
    """Intra-op threads per rank so that ranks x threads never exceeds the cores: an oversubscribed core
    stalls the rank the others wait for, and that stall is counted as communication time. Never more than
    ``current`` (what OMP_NUM_THREADS or the caller already chose)."""
    import os

    available = cores if cores is not None else len(os.sched_getaffinity(0))
    return max(1, min(current, available // max(1, local_ranks)))


def run_rank(cfg: RunConfig, *, environ: Mapping[str, str] | None = None, progress: Progress | None = None,
             proc_status: Path = Path("/proc/self/status"),
             clock: Callable[[], float] = time.perf_counter,
             stream: Callable[[list[int | None]], None] | None = None) -> RankResult:
    """Run this process's rank (RANK/WORLD_SIZE from ``environ``; a world of one needs none). ``stream`` gets
    each measured step's new tokens (see ``generate``)."""
    import torch

    from tensorfabric.inference.comm import GroupStage, GroupTP, merge_stats
    from tensorfabric.inference.generate import LocalStage, StageComm, generate
    from tensorfabric.inference.model import LocalComm, ShardedLlama, TPComm
    from tensorfabric.inference.weights import load_shard
    from tensorfabric.transfer.arrivals import lateness
    from tensorfabric.transfer.group import init

    env = environ if environ is not None else {}
    world_size = int(env.get("WORLD_SIZE", "1") or 1)
    prep = prepare(cfg, world_size)
    torch.set_num_threads(torch_threads(int(env.get("LOCAL_WORLD_SIZE", "1") or 1), torch.get_num_threads()))
    world = init(cfg.backend, timeout_s=cfg.timeout_s, environ=env, engine=cfg.engine,
                 require_transport="rdma" if cfg.require_rdma else "warn")
    try:
        groups = [world]
        tp_comm: TPComm = LocalComm()
        stage: StageComm = LocalStage()
        if world.size > 1:
            mesh = world.mesh(shape=(cfg.pp, cfg.tp), names=("pp", "tp"))
            groups += [mesh["tp"], mesh["pp"]]
            if cfg.tp > 1:
                tp_comm = GroupTP(mesh["tp"], cfg.codec, cfg.codec_decode)
            if cfg.pp > 1:
                stage = GroupStage(mesh["pp"], world, token_src=(cfg.pp - 1) * cfg.tp)
        plan = ShardPlan.for_rank(world.rank, cfg.tp, cfg.pp)
        dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.dtype]
        baseline = _rss("VmRSS", proc_status)
        start, stop = plan.layers(prep.model)
        t0 = clock()
        bar = progress("loading", stop - start + 1) if progress is not None else None
        weights = load_shard(prep.checkpoint, prep.model, plan, dtype, bar)
        model = ShardedLlama(prep.model, plan, weights, tp_comm, dtype)
        world.barrier()
        load_s = clock() - t0
        if cfg.warmup:
            generate(model, stage, prep.prompts, replace(cfg.sampling, max_new_tokens=2),
                     microbatches=cfg.microbatches or cfg.pp, keep_logits=False, clock=clock)
            world.barrier()
        for g in groups:
            g.stats.reset()
            g.stats.track_calls()

        def comm_total() -> float:
            return sum(s.seconds for g in groups for s in g.stats.snapshot())

        bar = progress("generating", cfg.sampling.max_new_tokens) if progress is not None else None
        gen = generate(model, stage, prep.prompts, cfg.sampling, microbatches=cfg.microbatches or cfg.pp,
                       keep_logits=cfg.keep_logits, clock=clock, comm_seconds=comm_total, on_token=bar,
                       stream=stream)
        late = [lateness(g) for g in groups]
        return RankResult(rank=world.rank, token_ids=gen.token_ids, ttft_s=gen.ttft_s, step_s=gen.step_s,
                          step_comm_s=gen.step_comm_s, prefill_comm_s=gen.prefill_comm_s,
                          comm=merge_stats(groups, late), transport=world.transport, load_s=load_s,
                          shard_bytes=weights.nbytes(), rss_baseline_bytes=baseline,
                          rss_peak_bytes=_rss("VmHWM", proc_status), logits=gen.logits)
    finally:
        world.destroy()


Bars = Callable[[Any, bool], Progress]
"""``bars(exit_stack, streaming)`` -> how rank 0 draws its loading/generation bars (a module-level function, so a
launcher can pickle it; the CLI's draws them on the terminal)."""


def rank_entry(rank: int, cfg: RunConfig, bars: Bars | None = None, stream: bool = False) -> RankResult:
    """The one rank entry of an inference run, wherever it is launched (local, lab host, launched job, in
    process). Only rank 0 draws ``bars`` and, with ``stream``, posts each step's tokens to the launcher
    (:func:`tensorfabric.transfer.launch.post`). This is the one place inference reads ``os.environ``: the
    torchrun variables the launcher set for the rank."""
    import os
    from contextlib import ExitStack

    from tensorfabric.transfer.launch import post

    with ExitStack() as stack:
        progress = bars(stack, stream) if bars is not None and rank == 0 else None
        return run_rank(cfg, environ=dict(os.environ), progress=progress,
                        stream=post if stream and rank == 0 else None)
