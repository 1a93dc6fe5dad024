"""Prefill and decode on one rank of a ``tp x pp`` job.

Pipeline stages hand hidden states on through a ``StageComm``; the prompt is cut into sequence chunks
(microbatches) during prefill, so stage 0 computes chunk k+1 while stage 1 works on chunk k. The last stage
samples and shares the new tokens with every rank.

The last stage checks the logits of every step before sampling: NaN logits have argmax 0, so without the check
a damaged or overflowing model answers token 0 over and over and the run looks fine. A non-finite step is a
DataError naming the step and the likely cause.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tensorfabric.errors import InputError
from tensorfabric.inference.integrity import check_logits
from tensorfabric.inference.model import ShardedLlama
from tensorfabric.inference.sampling import Sampler, SamplingParams

if TYPE_CHECKING:
    import torch

__all__ = ["Generation", "LocalStage", "StageComm", "generate", "pad_prompts"]


class StageComm(Protocol):
    """Point-to-point links between pipeline stages, and the token hand-back from the last stage."""

    def send_next(self, hs: Sequence[torch.Tensor]) -> None: ...

    def recv_prev(self, shapes: Sequence[tuple[int, ...]], dtype: torch.dtype) -> list[torch.Tensor]: ...

    def share_tokens(self, tokens: torch.Tensor) -> torch.Tensor: ...

    def comm_seconds(self) -> float: ...


class LocalStage:
    """pp = 1: the only stage is first and last."""

    def send_next(self, hs: Sequence[torch.Tensor]) -> None:
        raise AssertionError("a single stage has no next stage")

    def recv_prev(self, shapes: Sequence[tuple[int, ...]], dtype: torch.dtype) -> list[torch.Tensor]:
        raise AssertionError("a single stage has no previous stage")

    def share_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        return tokens

    def comm_seconds(self) -> float:
        return 0.0


@dataclass
class Generation:
    """What one rank saw. ``token_ids`` per prompt; ``logits`` per step ([batch, vocab]) when kept."""

    token_ids: list[list[int]]
    ttft_s: float
    step_s: list[float] = field(default_factory=list)
    step_comm_s: list[float] = field(default_factory=list)
    prefill_comm_s: float = 0.0
    logits: list[torch.Tensor] = field(default_factory=list)


def pad_prompts(prompts: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pad id lists into ``ids`` [batch, len] and ``valid`` [batch, len] (False at padding)."""
    import torch

    if not prompts or any(len(p) == 0 for p in prompts):
        raise InputError("every prompt needs at least one token")
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    valid = torch.zeros(len(prompts), width, dtype=torch.bool)
    for row, p in enumerate(prompts):
        ids[row, width - len(p):] = torch.tensor(list(p), dtype=torch.long)
        valid[row, width - len(p):] = True
    return ids, valid


def _chunks(length: int, parts: int) -> list[tuple[int, int]]:
    parts = max(1, min(parts, length))
    step = -(-length // parts)
    return [(a, min(a + step, length)) for a in range(0, length, step)]


def generate(model: ShardedLlama, stage: StageComm, prompts: Sequence[Sequence[int]], params: SamplingParams, *,
             microbatches: int = 1, keep_logits: bool = False, clock: Callable[[], float] = time.perf_counter,
             comm_seconds: Callable[[], float] | None = None,
             on_token: Callable[[int], None] | None = None,
             stream: Callable[[list[int | None]], None] | None = None) -> Generation:
    """Generate ``params.max_new_tokens`` tokens for each prompt (all ranks call this in lockstep).

    ``stream`` gets each step's new token per prompt as soon as it is sampled (None for a prompt that already
    finished), so a caller can show the text while it is generated and keep it if the run is interrupted."""
    import torch

    ids, valid = pad_prompts(prompts)
    batch, plen = ids.shape
    total = plen + params.max_new_tokens
    if total > model.cfg.max_position_embeddings:
        raise InputError(f"prompt ({plen}) + new tokens ({params.max_new_tokens}) exceeds the model's "
                         f"max_position_embeddings {model.cfg.max_position_embeddings}")
    comm_now = comm_seconds or stage.comm_seconds
    plan, hidden = model.plan, model.cfg.hidden_size
    cache = model.new_cache(valid, total)
    sampler = Sampler(params)
    eos = set(model.cfg.eos_token_ids)
    out: list[list[int]] = [[] for _ in range(batch)]
    finished = torch.zeros(batch, dtype=torch.bool)
    result = Generation(token_ids=out, ttft_s=0.0)

    def step(chunk_ids: torch.Tensor, start: int, phase: str) -> torch.Tensor | None:
        with torch.inference_mode():
            if plan.first_stage:
                h = model.embed(chunk_ids)
            else:
                (h,) = stage.recv_prev([(batch, chunk_ids.shape[1], hidden)], model.dtype)
            h = model.forward_layers(h, cache, start, phase)
            if not plan.last_stage:
                stage.send_next([h])
                return None
            return model.logits(h[:, -1])

    t0, c0 = clock(), comm_now()
    logits: torch.Tensor | None = None
    for a, b in _chunks(plen, microbatches):
        logits = step(ids[:, a:b], a, "prefill")
    position = plen
    dtype_name = str(model.dtype).removeprefix("torch.")
    for n in range(params.max_new_tokens):
        if logits is not None:
            check_logits(logits, n, dtype_name)
        tokens = sampler(logits) if logits is not None else torch.zeros(batch, dtype=torch.long)
        tokens = stage.share_tokens(tokens)
        if keep_logits and logits is not None:
            result.logits.append(logits.clone())
        now, comm = clock(), comm_now()
        if n == 0:
            result.ttft_s, result.prefill_comm_s = now - t0, comm - c0
        else:
            result.step_s.append(now - t0)
            result.step_comm_s.append(comm - c0)
        new: list[int | None] = [None if finished[row] else int(tokens[row]) for row in range(batch)]
        for row, token in enumerate(new):
            if token is not None:
                out[row].append(token)
        if stream is not None:
            stream(new)
        if params.stop_at_eos and eos:
            finished |= torch.tensor([int(t) in eos for t in tokens])
        if on_token is not None:
            on_token(1)
        if n + 1 == params.max_new_tokens or bool(finished.all()):
            break
        t0, c0 = clock(), comm_now()
        logits = step(tokens.unsqueeze(-1), position, "decode")
        position += 1
    return result
