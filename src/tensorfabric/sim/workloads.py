"""Traffic: flow records and generators for incast, permutation, all-to-all and LLM inference.

A :class:`Flow` starts at ``start_s`` or, when it belongs to a ``stage`` > 0, when every flow of the
previous stage has finished plus ``gap_s`` (how ring all-reduce steps and per-layer compute are chained).
Inference sizes follow Megatron-style tensor parallelism: two all-reduces per layer per token, each a ring
of 2(N - 1) steps in which every rank sends S/N to its neighbour, S = batch * hidden * dtype bytes for a
decode step (batch * prompt * hidden * dtype for prefill).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tensorfabric.errors import InputError

__all__ = ["Flow", "ModelShape", "all_to_all", "incast", "kv_cache_bytes", "permutation", "pp_decode", "tp_decode"]


@dataclass(frozen=True, slots=True)
class Flow:
    src: str
    dst: str
    size_bytes: float
    start_s: float = 0.0
    stage: int = 0
    """0 = independent; k > 0 starts when stage k - 1 has finished (stage 1 waits for nothing)."""
    gap_s: float = 0.0
    """Compute time between the previous stage finishing and this flow starting."""
    token: int = -1
    """Decode token this flow belongs to, for per-token latency (-1: none)."""
    path: tuple[str, ...] | None = None
    """Explicit device path host, switch..., host; None routes by ECMP shortest path."""
    tag: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.size_bytes) and self.size_bytes > 0):
            raise InputError(f"flow {self.src}->{self.dst}: size {self.size_bytes!r} must be a positive byte count")
        if self.start_s < 0 or self.gap_s < 0:
            raise InputError(f"flow {self.src}->{self.dst}: start and gap must not be negative")


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What sets message sizes: Llama-2-70B defaults (h 8192, 80 layers, bf16, 8 KV heads of 128)."""

    hidden: int = 8192
    layers: int = 80
    dtype_bytes: int = 2
    batch: int = 8
    prompt_tokens: int = 2048
    kv_heads: int = 8
    head_dim: int = 128

    def __post_init__(self) -> None:
        for name in ("hidden", "layers", "dtype_bytes", "batch", "prompt_tokens", "kv_heads", "head_dim"):
            if getattr(self, name) < 1:
                raise InputError(f"model {name}: {getattr(self, name)!r} must be at least 1")

    @property
    def decode_allreduce_bytes(self) -> int:
        return self.batch * self.hidden * self.dtype_bytes

    @property
    def prefill_allreduce_bytes(self) -> int:
        return self.batch * self.prompt_tokens * self.hidden * self.dtype_bytes


def kv_cache_bytes(model: ModelShape) -> int:
    """KV cache of one batch after prefill: K and V, every layer, every prompt token."""
    return 2 * model.layers * model.kv_heads * model.head_dim * model.prompt_tokens * model.dtype_bytes * model.batch


def incast(senders: list[str], receiver: str, size_bytes: float, start_s: float = 0.0) -> list[Flow]:
    return [Flow(s, receiver, size_bytes, start_s, tag="incast") for s in senders]


def permutation(hosts: list[str], size_bytes: float, seed: int = 0) -> list[Flow]:
    """Every host sends to one other and receives from one (a random derangement)."""
    if len(hosts) < 2:
        raise InputError("permutation needs at least two hosts")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(hosts))
    # A shifted random order is a derangement: i sends to the host after it in the shuffled ring.
    dst = {int(order[i]): int(order[(i + 1) % len(hosts)]) for i in range(len(hosts))}
    return [Flow(hosts[i], hosts[dst[i]], size_bytes, tag="permutation") for i in range(len(hosts))]


def all_to_all(hosts: list[str], size_bytes: float) -> list[Flow]:
    return [Flow(a, b, size_bytes, tag="all-to-all") for a in hosts for b in hosts if a != b]


def tp_decode(group: list[str], model: ModelShape, tokens: int, *, layer_compute_s: float = 0.0,
              first_stage: int = 1) -> list[Flow]:
    """Decode steps of a tensor-parallel group spread one rank per host: ring all-reduces, chained."""
    n = len(group)
    if n < 2:
        raise InputError(f"tensor-parallel group {group!r} needs at least two hosts")
    if tokens < 1:
        raise InputError(f"tokens: {tokens!r} must be at least 1")
    chunk = model.decode_allreduce_bytes / n
    flows: list[Flow] = []
    stage = first_stage
    for token in range(tokens):
        for _layer in range(model.layers):
            for reduce_i in range(2):  # after attention, after the MLP
                for ring_step in range(2 * (n - 1)):
                    gap = layer_compute_s if ring_step == 0 and reduce_i == 0 else 0.0
                    flows.extend(Flow(group[r], group[(r + 1) % n], chunk, stage=stage, gap_s=gap, token=token,
                                      tag="tp-allreduce") for r in range(n))
                    stage += 1
    return flows


def pp_decode(stages: list[str], model: ModelShape, tokens: int, *, stage_compute_s: float = 0.0,
              first_stage: int = 1) -> list[Flow]:
    """Decode steps of a pipeline: each boundary sends the activations (hidden states and residual, as vLLM
    does: 2 * batch * hidden * dtype bytes) to the next stage, one after another."""
    if len(stages) < 2:
        raise InputError(f"pipeline {stages!r} needs at least two stages")
    if tokens < 1:
        raise InputError(f"tokens: {tokens!r} must be at least 1")
    size = 2 * model.decode_allreduce_bytes
    flows: list[Flow] = []
    stage = first_stage
    for token in range(tokens):
        for a, b in zip(stages, stages[1:], strict=False):
            flows.append(Flow(a, b, size, stage=stage, gap_s=stage_compute_s, token=token, tag="pp-activation"))
            stage += 1
    return flows
