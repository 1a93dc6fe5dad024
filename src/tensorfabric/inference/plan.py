"""Who owns what: the tensor/pipeline split of a model over ``tp x pp`` ranks.

Rank layout follows the 2-D mesh ``(pp, tp)`` in row-major order: world rank = ``pp_rank * tp + tp_rank``,
so the ranks of one pipeline stage are neighbours (tensor parallelism wants the fastest links).
"""

from __future__ import annotations

from dataclasses import dataclass

from tensorfabric.errors import InputError
from tensorfabric.inference.config import ModelConfig

__all__ = ["ShardPlan", "check_parallel", "layer_range"]


def check_parallel(cfg: ModelConfig, tp: int, pp: int, world_size: int | None = None) -> None:
    """Raise InputError unless the model splits evenly over ``tp`` and ``pp`` (and ``world_size`` fits)."""
    if tp < 1 or pp < 1:
        raise InputError(f"tp={tp} and pp={pp} must both be at least 1")
    if world_size is not None and world_size != tp * pp:
        raise InputError(f"world size {world_size} is not tp x pp = {tp} x {pp} = {tp * pp}; "
                         f"start {tp * pp} ranks or change --tp/--pp")
    for what, value in (("num_attention_heads", cfg.num_heads), ("num_key_value_heads", cfg.num_kv_heads),
                        ("intermediate_size", cfg.intermediate_size), ("vocab_size", cfg.vocab_size)):
        if value % tp:
            raise InputError(f"tp={tp} does not divide {what}={value}; choose a tp that divides it")
    if pp > cfg.num_layers:
        raise InputError(f"pp={pp} exceeds the model's {cfg.num_layers} layers; each stage needs at least one")


def layer_range(num_layers: int, pp: int, stage: int) -> tuple[int, int]:
    """Contiguous layers of ``stage``; earlier stages take the remainder (they also hold the embedding)."""
    base, extra = divmod(num_layers, pp)
    start = stage * base + min(stage, extra)
    return start, start + base + (1 if stage < extra else 0)


@dataclass(frozen=True)
class ShardPlan:
    """The slice of the model one rank holds."""

    tp: int
    pp: int
    tp_rank: int
    pp_rank: int

    @classmethod
    def for_rank(cls, rank: int, tp: int, pp: int) -> ShardPlan:
        return cls(tp=tp, pp=pp, tp_rank=rank % tp, pp_rank=rank // tp)

    @property
    def rank(self) -> int:
        return self.pp_rank * self.tp + self.tp_rank

    @property
    def first_stage(self) -> bool:
        return self.pp_rank == 0

    @property
    def last_stage(self) -> bool:
        return self.pp_rank == self.pp - 1

    def layers(self, cfg: ModelConfig) -> tuple[int, int]:
        return layer_range(cfg.num_layers, self.pp, self.pp_rank)

    def part(self, total: int) -> tuple[int, int]:
        """This rank's ``[start, stop)`` of a dimension of size ``total`` split over tp."""
        size = total // self.tp
        return self.tp_rank * size, (self.tp_rank + 1) * size
