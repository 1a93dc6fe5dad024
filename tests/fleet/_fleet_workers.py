"""Rank functions for the online tests (module-level, so spawned processes can import them)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from tensorfabric.fleet.online import FleetConfig, RoundHook, fleet_rank


def misbehaving_rank(rank: int, config: FleetConfig, *, on_round: RoundHook | None = None) -> Any:
    """Rank 1 joins the rendezvous and then hangs; rank 2 joins and is killed; the others run the fleet."""
    if rank in (1, 2):
        from tensorfabric.transfer.group import init

        init("gloo", timeout_s=config.timeout_s, engine=config.engine, name="fleet")
        if rank == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(600)
    return fleet_rank(rank, config, on_round=on_round)
