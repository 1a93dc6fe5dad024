"""Sharded Llama-family inference over :mod:`tensorfabric.transfer`.

Rooms: ``config`` (config.json), ``checkpoint`` (safetensors slices), ``plan`` (who owns what), ``weights``
(a rank's shard), ``model`` (the decoder), ``sampling``, ``generate`` (prefill/decode, pipeline hand-off),
``comm`` (transfer groups), ``runner`` (one rank end to end), ``report`` (figures), ``tiny`` and ``tokenizer``
(random checkpoints with a byte-level tokenizer; chat templates), ``writer`` (streamed, atomic checkpoint
output), ``gguf_import`` and ``gguf_tokenizer`` (llama.cpp GGUF files into checkpoints), ``integrity``
(checksums, finite weights and logits: damaged numbers fail loudly) and ``default`` (the model ``run`` uses
without ``--model``). torch is imported inside functions only.
"""

from tensorfabric.inference.config import ModelConfig, RopeScaling, load_config
from tensorfabric.inference.runner import RankResult, RunConfig, prepare, rank_entry, run_rank
from tensorfabric.inference.sampling import SamplingParams
from tensorfabric.inference.tiny import make_tiny, tiny_config

__all__ = ["ModelConfig", "RankResult", "RopeScaling", "RunConfig", "SamplingParams", "load_config", "make_tiny",
           "prepare", "rank_entry", "run_rank", "tiny_config"]
