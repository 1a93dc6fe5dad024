"""The tensor-transfer runtime: process groups, collectives, compression codecs, bucketing, launching.

Importing this package does not import torch; the submodules import it where they need it.

* :mod:`~tensorfabric.transfer.group` -- ``init()``, ``Group`` (rank table, mesh subgroups, collectives).
* :mod:`~tensorfabric.transfer.launch` -- the one launcher: ``placement()`` decides where ranks run (inside a
  launched job, in this process, as local processes, or in a lab) and ``launch(fn, where)`` runs them there.
* :mod:`~tensorfabric.transfer.codecs` -- ``get_codec("int8" | "int4" | "fp8" | "none", block=64)``.
* :mod:`~tensorfabric.transfer.compressed` -- the quantized all_reduce / all_gather and their error bounds.
* :mod:`~tensorfabric.transfer.bucket` -- flat buckets of many small tensors.
* :mod:`~tensorfabric.transfer.stats` -- per-group op statistics.
* :mod:`~tensorfabric.transfer.bench` -- the nccl-tests-style sweep behind ``tensorfabric bench``.
* :mod:`~tensorfabric.transfer.engines` -- what moves the bytes: one communicator interface, the ``torch`` and
  ``nixl`` engines (NIXL: small tensors by one-sided UCX writes, ``init(engine="nixl")``) and the router that
  composes them by size below ``NIXL_MAX_BYTES``. The transport NIXL reports comes from UCX's own lane log,
  parsed by :mod:`tensorfabric.host.ucx_log` (a host log parser like ``host.nccl_log``, so ``doctor`` can
  classify a UCX/NIXL log the same way).
* :mod:`~tensorfabric.transfer.kv` -- KV-cache transfer of disaggregated runs.
"""

from __future__ import annotations

from tensorfabric.transfer.codecs import get_codec
from tensorfabric.transfer.group import Group, Handle, RankEntry, SendRecv, init
from tensorfabric.transfer.launch import Placement, SpawnError, free_port, launch, placement, spawn, under_torchrun
from tensorfabric.transfer.stats import GroupStats, OpStat

__all__ = [
    "Group",
    "GroupStats",
    "Handle",
    "OpStat",
    "Placement",
    "RankEntry",
    "SendRecv",
    "SpawnError",
    "free_port",
    "get_codec",
    "init",
    "launch",
    "placement",
    "spawn",
    "under_torchrun",
]
