"""Disaggregated serving: prefill ranks compute each prompt's KV cache and first token, decode ranks continue.

World layout: ranks ``0..P-1`` are one tensor-parallel prefill instance, ranks ``P..P+D-1`` one decode
instance (``--disaggregate P:D``, each side's tp equal to its rank count). Each side has its own TP group;
the two sides talk only through :mod:`tensorfabric.transfer.kv.transfer`: every prefill rank writes the KV heads
it holds straight into the pools of the decode ranks that hold them (the reshard is in the descriptors), and
the notification carries the block table and the first token. Requests (one per prompt, batch 1) flow
through in order; prefill of request r+1 overlaps decode of request r, up to ``slots`` requests in the pool.

Timing per request (seconds, ``perf_counter``): ``prefill_compute_s`` (embedding to first token sampled, on
prefill rank 0), ``kv_transfer_s`` (packing into staging chunk by chunk, overlapped with the WRITEs, until the
last WRITE completed; slowest prefill rank), ``first_decode_step_s`` (decode rank 0: copying the blocks out of
the pool into its cache plus the forward pass that yields the next token). TTFT is their sum: the moment a
client streaming from the decode worker sees the first token with the next one computed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError
from tensorfabric.inference.runner import RunConfig, prepare, torch_threads
from tensorfabric.transfer.kv.pool import BLOCK_TOKENS, KVLayout, blocks_for, head_range

if TYPE_CHECKING:
    from tensorfabric.inference.model import ShardedLlama
    from tensorfabric.transfer.kv.transfer import KVReceiver, KVSender

__all__ = ["DisaggConfig", "DisaggRankResult", "disagg_entry", "launch", "parse_split", "run_disagg_rank"]


def parse_split(text: str) -> tuple[int, int]:
    """``"P:D"`` -> (P, D), both positive."""
    left, sep, right = text.partition(":")
    if sep and left.strip().isdigit() and right.strip().isdigit() and int(left) > 0 and int(right) > 0:
        return int(left), int(right)
    raise InputError(f"--disaggregate {text!r} must be PREFILL:DECODE rank counts such as 1:1 or 2:1")


@dataclass(frozen=True)
class DisaggConfig:
    run: RunConfig
    prefill: int = 1
    decode: int = 1
    prefill_tp: int = 0  # 0: the prefill rank count
    decode_tp: int = 0
    block_tokens: int = BLOCK_TOKENS
    chunks: int = 4
    """Layer groups per request: one WRITE (and notification) per chunk and decode peer."""
    slots: int = 2
    pause_dir: str = ""
    """Fault-injection hook for tests: prefill rank 0 writes ``<pause_dir>/paused`` (the pids) after posting
    chunk 0 of the first measured request and waits until that file is removed (or ``timeout_s``)."""

    @property
    def ptp(self) -> int:
        return self.prefill_tp or self.prefill

    @property
    def dtp(self) -> int:
        return self.decode_tp or self.decode

    @property
    def world(self) -> int:
        return self.prefill + self.decode

    def check(self) -> None:
        if self.ptp != self.prefill or self.dtp != self.decode:
            raise InputError(f"--prefill-tp {self.ptp} / --decode-tp {self.dtp} must equal the rank counts of "
                             f"--disaggregate {self.prefill}:{self.decode} (one instance per side)")
        if self.run.pp != 1:
            raise InputError("--disaggregate runs each side with pp 1; drop --pp")
        if self.run.codec is not None:
            raise InputError("--disaggregate does not combine with --codec")
        if self.block_tokens < 1 or self.chunks < 1 or self.slots < 1:
            raise InputError("block tokens, chunks and slots must be positive")
        self._check_split()

    def _check_split(self) -> None:
        """Each side's tp must split the model, checked before any rank starts (a rank would find it too, as one
        of several tracebacks)."""
        from tensorfabric.inference.config import load_config
        from tensorfabric.inference.plan import check_parallel

        model = load_config(Path(self.run.model_dir))
        for side, tp in (("prefill", self.ptp), ("decode", self.dtp)):
            try:
                check_parallel(model, tp, 1)
            except InputError as exc:
                raise InputError(f"--disaggregate {self.prefill}:{self.decode}: the {side} side's {exc}") from None


@dataclass
class DisaggRankResult:
    rank: int
    role: str
    index: int
    setup_s: float
    transport: str
    load_s: float
    requests: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[list[int]] = field(default_factory=list)
    everyone: list[DisaggRankResult] = field(default_factory=list)
    """Every rank's result (their own ``everyone`` empty), gathered at the end: under torchrun or in the lab,
    rank 0 reports for the whole run."""


def _model(cfg: DisaggConfig, prep: Any, index: int, tp: int, group: Any) -> ShardedLlama:
    import torch

    from tensorfabric.inference.comm import GroupTP
    from tensorfabric.inference.model import LocalComm, ShardedLlama, TPComm
    from tensorfabric.inference.plan import ShardPlan
    from tensorfabric.inference.weights import load_shard

    plan = ShardPlan(tp=tp, pp=1, tp_rank=index, pp_rank=0)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[cfg.run.dtype]
    comm: TPComm = GroupTP(group) if tp > 1 else LocalComm()
    return ShardedLlama(prep.model, plan, load_shard(prep.checkpoint, prep.model, plan, dtype), comm, dtype)


def _ucx_log_path() -> tuple[str | None, str | None]:
    """Where UCX logs in this process (set here when nobody did: UCX reads its log settings once per process),
    and the directory made for it (the caller removes it). It lives under the launcher's scratch directory when
    there is one, so a killed rank leaves nothing behind once its launcher exits."""

    from tensorfabric.fsutil import SCRATCH_ENV, scratch_dir
    from tensorfabric.transfer.engines.nixl_engine import prepare_ucx_env

    if "UCX_LOG_FILE" in os.environ:
        return (os.environ["UCX_LOG_FILE"] if os.environ.get("UCX_LOG_LEVEL") == "info" else None), None
    if "UCX_LOG_LEVEL" in os.environ:
        return None, None
    scratch = os.environ.get(SCRATCH_ENV)
    made = scratch_dir("kv-ucx", scratch)
    path = str(Path(made) / "ucx.%p.log")
    prepare_ucx_env(os.environ, path)
    return path, made


def run_disagg_rank(cfg: DisaggConfig, *, environ: Mapping[str, str],
                    clock: Callable[[], float] = time.perf_counter) -> DisaggRankResult:
    """One rank of a disaggregated run (RANK/WORLD_SIZE from ``environ``)."""
    import torch
    import torch.distributed as dist

    from tensorfabric.errors import TransferError
    from tensorfabric.transfer.engines.base import settle_all
    from tensorfabric.transfer.group import init
    from tensorfabric.transfer.kv.connect import connect_kv
    from tensorfabric.transfer.kv.transfer import KVSender

    cfg.check()
    prep = prepare(cfg.run)
    world_size = int(environ.get("WORLD_SIZE", "1") or 1)
    if world_size != cfg.world:
        raise InputError(f"world size {world_size} is not prefill + decode = {cfg.world}")
    torch.set_num_threads(torch_threads(int(environ.get("LOCAL_WORLD_SIZE", "1") or 1), torch.get_num_threads()))
    log_path, log_dir = _ucx_log_path()
    try:
        world = init(cfg.run.backend, timeout_s=cfg.run.timeout_s, environ=environ, engine=cfg.run.engine)
    except BaseException:
        _remove(log_dir)
        raise
    try:
        prefill = world.rank < cfg.prefill
        role, tp = ("prefill", cfg.prefill) if prefill else ("decode", cfg.decode)
        first = 0 if prefill else cfg.prefill
        index = world.rank - first
        group = world.subgroup(role, range(first, first + tp)) if tp > 1 else None
        t0 = clock()
        model = _model(cfg, prep, index, tp, group)
        load_s = clock() - t0
        mc = model.cfg
        start, stop = head_range(mc.num_kv_heads, tp, index)
        layout = KVLayout(len(model.w.layers), stop - start, mc.head_dim, cfg.block_tokens,
                          torch.empty(0, dtype=model.dtype).element_size(), start)
        per_slot = blocks_for(max(len(p) for p in prep.prompts), cfg.block_tokens)
        region = torch.zeros((per_slot if prefill else cfg.slots * per_slot) * layout.block_bytes,
                             dtype=torch.uint8)

        def exchange(obj: Any) -> list[Any]:
            out: list[Any] = [None] * world.size
            settle_all("kv_init")  # NIXL engines first: a peer may still need this process to progress one
            try:
                dist.all_gather_object(out, obj)
            except RuntimeError as exc:
                raise TransferError(f"exchanging KV metadata failed: {exc}", op="kv_init", group="kv") from exc
            return out

        side = connect_kv(exchange, role=role, index=index, layout=layout, region=region,
                          timeout_s=cfg.run.timeout_s, slots=cfg.slots, blocks_per_slot=per_slot,
                          chunks=cfg.chunks, log_path=log_path)
        result = DisaggRankResult(world.rank, role, index, side.setup_s, side.transport(), load_s)
        if cfg.run.require_rdma and not result.transport.startswith("nixl/rdma"):
            raise TransferError(f"--require-rdma: the KV transfer is not on RDMA: UCX chose {result.transport}; "
                                "on a RoCE host check `tensorfabric doctor` and UCX_TLS/UCX_NET_DEVICES",
                                op="kv_init", group="kv")
        warm = list(prep.prompts) if cfg.run.warmup else []
        requests = [(p, 2 if i < len(warm) else cfg.run.sampling.max_new_tokens)
                    for i, p in enumerate([*warm, *prep.prompts])]
        if isinstance(side, KVSender):
            _prefill_loop(cfg, model, side, requests, len(warm), result, clock)
        else:
            _decode_loop(cfg, model, side, requests, len(warm), result, clock)
        result.everyone = exchange(result)
        return result
    finally:
        world.destroy()
        _remove(log_dir)


def _remove(directory: str | None) -> None:
    if directory is not None:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)


def _pause(cfg: DisaggConfig, side: KVSender) -> Callable[[int, int], None]:
    def hook(request: int, chunk: int) -> None:
        if chunk != 0:
            return
        side.settle()  # chunk 0 has landed and notified: the victim dies with part of the request in the pool
        flag = Path(cfg.pause_dir) / "paused"
        pids = {"prefill": [os.getpid()], "decode": [p.pid for p in side.peers], "request": request}
        import json

        flag.write_text(json.dumps(pids))
        deadline = time.monotonic() + cfg.run.timeout_s
        while flag.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        side.after_chunk = None

    return hook


def _prefill_loop(cfg: DisaggConfig, model: ShardedLlama, side: KVSender, requests: list[tuple[tuple[int, ...], int]],
                  warm: int, result: DisaggRankResult, clock: Callable[[], float]) -> None:
    import torch

    from tensorfabric.inference.sampling import Sampler

    for req, (prompt, _) in enumerate(requests):
        if cfg.pause_dir and req == warm and side.me.index == 0:
            side.after_chunk = _pause(cfg, side)
        t0 = clock()
        with torch.inference_mode():
            ids = torch.tensor([list(prompt)], dtype=torch.long)
            cache = model.new_cache(torch.ones(ids.shape, dtype=torch.bool), ids.shape[1])
            h = model.forward_layers(model.embed(ids), cache, 0, "prefill")
            sampler = Sampler(cfg.run.sampling)
            token = int(sampler(model.logits(h[:, -1]))[0])
        compute_s = clock() - t0
        state = sampler.gen.get_state().numpy().tobytes() if cfg.run.sampling.temperature > 0 else b""
        rec = side.send(req, [k[0] for k in cache.keys], [v[0] for v in cache.values], len(prompt), token, state)
        if req >= warm:
            result.requests.append({"request": req - warm, "prompt_tokens": len(prompt), "prefill_compute_s": compute_s,
                                    "kv_bytes": rec.nbytes, "kv_blocks": rec.blocks, "descriptors": rec.descriptors,
                                    "writes": rec.writes, "pack_s": rec.pack_s, "write_s": rec.write_s,
                                    "credit_wait_s": rec.credit_wait_s, "first_token": token})
    side.drain()


def _decode_loop(cfg: DisaggConfig, model: ShardedLlama, side: KVReceiver, requests: list[tuple[tuple[int, ...], int]],
                 warm: int, result: DisaggRankResult, clock: Callable[[], float]) -> None:
    import torch

    from tensorfabric.inference.sampling import Sampler

    eos = set(model.cfg.eos_token_ids)
    stop_at_eos = cfg.run.sampling.stop_at_eos and bool(eos)
    for req, (prompt, new_tokens) in enumerate(requests):
        got = side.receive(req, model.dtype)
        plen = len(prompt)
        if got.tokens != plen:
            raise InputError(f"request {req}: prefill sent {got.tokens} tokens of KV, the prompt has {plen}")
        sampler = Sampler(cfg.run.sampling)
        if got.sampler_state:
            sampler.gen.set_state(torch.frombuffer(bytearray(got.sampler_state), dtype=torch.uint8))
        tokens = [got.first_token]
        steps: list[float] = []
        t0 = clock()
        with torch.inference_mode():
            cache = model.new_cache(torch.ones(1, plen, dtype=torch.bool), plen + new_tokens)
            for layer, (k, v) in enumerate(zip(got.keys, got.values, strict=True)):
                cache.keys[layer][0, :, :plen] = k
                cache.values[layer][0, :, :plen] = v
            position = plen
            while len(tokens) < new_tokens and not (stop_at_eos and tokens[-1] in eos):
                ids = torch.tensor([[tokens[-1]]], dtype=torch.long)
                h = model.forward_layers(model.embed(ids), cache, position, "decode")
                tokens.append(int(sampler(model.logits(h[:, -1]))[0]))
                position += 1
                now = clock()
                steps.append(now - t0)
                t0 = now
        if req >= warm:
            result.token_ids.append(tokens)
            first_step = (steps[0] if steps else 0.0) + got.unpack_s
            result.requests.append({"request": req - warm, "kv_wait_s": got.wait_s, "unpack_s": got.unpack_s,
                                    "first_decode_step_s": first_step, "step_s": steps[1:] if steps else [],
                                    "blocks": list(got.blocks), "pool_bytes_read": got.nbytes})


def disagg_entry(rank: int, cfg: DisaggConfig) -> DisaggRankResult:
    """The one rank entry of a disaggregated run, wherever it is launched (local, lab host, launched job); the
    one place this reads ``os.environ``: the torchrun variables the launcher set for the rank."""
    return run_disagg_rank(cfg, environ=dict(os.environ))


def launch(cfg: DisaggConfig, *, grace_s: float = 10.0) -> list[DisaggRankResult]:
    """The ``P + D`` ranks as local processes; their results in rank order."""
    from tensorfabric.transfer.launch import Placement
    from tensorfabric.transfer.launch import launch as launch_ranks

    cfg.check()
    prepare(cfg.run)
    results = launch_ranks(disagg_entry, Placement("local", cfg.world, cfg.world), args=(cfg,),
                           timeout_s=cfg.run.timeout_s + 60, grace_s=grace_s)
    return [results[rank] for rank in range(cfg.world)]


def colocated(cfg: RunConfig) -> RunConfig:
    """The matching colocated run (tp 1, same prompts, sampling and dtype): what a disaggregated run must equal."""
    return replace(cfg, tp=1, pp=1)
