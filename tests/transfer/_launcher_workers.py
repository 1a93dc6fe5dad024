"""Rank functions for the one-launcher tests (module level, so spawned ranks can import them; no torch)."""

from __future__ import annotations

import time

from tensorfabric.transfer.launch import post


def chatty(rank: int, steps: int) -> int:
    """Rank 0 posts ``steps`` messages while it runs; every rank returns its rank."""
    if rank == 0:
        for step in range(steps):
            post([step, step * 2])
    return rank


def authority_then_stragglers(rank: int) -> str:
    """Rank 0 answers at once; rank 1 raises, rank 2 hangs: only rank 0 counts under an authority."""
    if rank == 1:
        raise RuntimeError("rank 1 broke")
    if rank == 2:
        time.sleep(600)
    return f"report from {rank}"
