"""How ``init`` and ``Group`` bring up NIXL engines: choosing the engine, opening one per group over its
process group, capturing UCX's lane log and turning it into the group's transport line."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError, TransferError
from tensorfabric.fsutil import SCRATCH_ENV, scratch_dir

if TYPE_CHECKING:
    from tensorfabric.transfer.nixl_engine import NixlEngine
    from tensorfabric.transfer.records import RankEntry

__all__ = ["ENGINES", "open_for_group", "open_world", "transport_label", "wanted"]

ENGINES = ("auto", "torch", "nixl")


def open_for_group(pg: Any, table: Sequence[RankEntry], rank: int, name: str, timeout_s: float, max_bytes: int,
                   log_path: str | None) -> NixlEngine:
    """This rank's engine for the group ``pg`` (collective over its members)."""
    import torch.distributed as dist

    from tensorfabric.transfer.nixl_engine import open_engine

    def exchange(obj: Any) -> list[Any]:
        out: list[Any] = [None] * len(table)
        try:
            dist.all_gather_object(out, obj, group=pg)
        except RuntimeError as exc:
            raise TransferError(f"exchanging NIXL metadata failed: {exc}", op="init", group=name) from exc
        return out

    return open_engine(exchange, rank=rank, size=len(table), table=table, host=table[rank].host, group=name,
                       timeout_s=timeout_s, slot_bytes=max_bytes, log_path=log_path)


def transport_label(engine: NixlEngine, torch_transport: str, require_transport: str) -> str:
    """``nixl/<kind>(lanes)+<torch transport>``, enforcing ``require_transport`` on what UCX reports."""
    found = engine.transport()
    if require_transport == "rdma" and not found.rdma:
        why = "UCX's log was not captured (UCX_LOG_LEVEL/UCX_LOG_FILE set by the user)" if not engine.log_path \
            else f"UCX chose {found.label()}"
        raise TransferError(f"--require-rdma: NIXL is not on RDMA: {why}; small tensors would cross "
                            "shared memory or TCP. On a RoCE host check `tensorfabric doctor` and UCX_TLS/"
                            "UCX_NET_DEVICES", op="init", group=engine.group)
    return f"{found.label()}+{torch_transport}"


def wanted(engine: str, chosen: str, world: int) -> bool:
    """Whether ``init`` opens NIXL engines (InputError for an unknown engine or a missing wheel)."""
    from tensorfabric.transfer.nixl_engine import available

    if engine not in ENGINES:
        raise InputError(f"engine: {engine!r} is not one of {', '.join(ENGINES)}")
    if engine == "torch" or world <= 1:
        return False
    if engine == "nixl":
        if not available():
            raise InputError("engine 'nixl' needs the NIXL wheel: pip install 'tensorfabric[nixl]' (nixl-cu12)")
        return True
    # auto: NIXL carries host-memory tensors; with NCCL the tensors live on the GPU.
    return chosen == "gloo" and available()


def open_world(pg: Any, table: Sequence[RankEntry], rank: int, name: str, timeout_s: float,
               max_bytes: int) -> NixlEngine:
    """The world group's engine. UCX reads the real process environment (as NCCL does), so this is where the
    transfer subsystem writes it (see ``nixl_engine.prepare_ucx_env``): its lane log goes to a per-process
    file, unless the user chose ``UCX_LOG_LEVEL`` or ``UCX_LOG_FILE`` (then the transport reads unknown).

    The log's directory lives under the launcher's scratch directory (``SCRATCH_ENV``) when there is one, so a
    rank killed before :meth:`NixlEngine.close` leaves nothing behind once its launcher exits."""

    from tensorfabric.transfer.nixl_engine import prepare_ucx_env

    if not 0 < max_bytes <= 64 * 2**20:
        raise InputError(f"nixl_max_bytes: {max_bytes!r} must be between 1 and 64 MiB")
    log_path = log_dir = None
    if "UCX_LOG_LEVEL" not in os.environ and "UCX_LOG_FILE" not in os.environ:
        scratch = os.environ.get(SCRATCH_ENV)
        log_dir = scratch_dir("ucx", scratch)
        log_path = str(Path(log_dir) / "ucx.%p.log")
    prepare_ucx_env(os.environ, log_path)
    try:
        engine = open_for_group(pg, table, rank, name, timeout_s, max_bytes, log_path)
    except BaseException:
        if log_dir is not None:
            import shutil

            shutil.rmtree(log_dir, ignore_errors=True)
        raise
    engine.owned_dir = log_dir
    return engine
