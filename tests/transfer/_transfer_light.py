"""Rank bodies for the launcher tests; no torch import, so the spawned children start fast."""

from __future__ import annotations

import os
import time


def raises(rank: int) -> int:
    if rank == 1:
        raise ValueError("rank one breaks on purpose")
    return rank


def hangs(rank: int) -> int:
    time.sleep(60)
    return rank


def echo_env(rank: int) -> dict[str, str]:
    keys = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "EXTRA")
    return {k: os.environ.get(k, "") for k in keys}


def input_error(rank: int) -> int:
    from tensorfabric.errors import InputError

    if rank == 1:
        raise InputError("3 KV heads do not split over tp 2")
    time.sleep(60)  # a peer that would wait for rank 1 in its first collective
    return rank


def stops_itself(rank: int) -> int:
    import signal

    if rank == 1:
        os.kill(os.getpid(), signal.SIGSTOP)  # a rank stopped under a debugger or by the OOM-freezer
    time.sleep(60)
    return rank
