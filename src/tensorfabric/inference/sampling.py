"""Next-token choice: greedy, or seeded temperature / top-p (nucleus) sampling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError

if TYPE_CHECKING:
    import torch

__all__ = ["Sampler", "SamplingParams"]


@dataclass(frozen=True)
class SamplingParams:
    """``temperature`` 0 means greedy. ``seed`` makes sampling repeatable (and identical on every rank)."""

    max_new_tokens: int = 32
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    stop_at_eos: bool = True

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise InputError(f"max new tokens {self.max_new_tokens} must be at least 1")
        if self.temperature < 0:
            raise InputError(f"temperature {self.temperature} must be 0 (greedy) or positive")
        if not 0 < self.top_p <= 1:
            raise InputError(f"top-p {self.top_p} must be in (0, 1]")


class Sampler:
    def __init__(self, params: SamplingParams) -> None:
        import torch

        self.params = params
        self.gen = torch.Generator().manual_seed(params.seed)

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` [batch, vocab] float32 -> token ids [batch] (int64)."""
        import torch

        p = self.params
        if p.temperature == 0:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits / p.temperature, dim=-1)
        if p.top_p < 1:
            sorted_p, order = probs.sort(dim=-1, descending=True)
            # Keep the smallest prefix whose mass reaches top_p (the first token always survives).
            drop = sorted_p.cumsum(-1) - sorted_p >= p.top_p
            sorted_p = sorted_p.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
        return torch.multinomial(probs, 1, generator=self.gen).squeeze(-1)
