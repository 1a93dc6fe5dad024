"""How long a rank's collectives waited for the group's last rank to call them.

No collective can finish before its last rank has called it, so the part of a call spent before that moment
is the other ranks' compute (or their wait for a core), not communication: no link or codec can shorten it.
On three ranks sharing two cores it is a large share of tensor-parallel all-reduce time (docs/inference.md,
"Codec efficiency"), and a what-if that treats it as wire time promises a speed-up no codec can deliver.

Every rank records the start of each call (:meth:`GroupStats.track_calls`); at the end one all_gather of
those lists gives, per call, the last rank's start, and the lateness of this rank's call is that minus its
own start. Two things make the answer unknown (None) rather than a guess:

* start times from different clocks: ``time.perf_counter`` is CLOCK_MONOTONIC, shared by every process of
  one boot of one kernel (network namespaces included) and unrelated across hosts, so the ranks must report
  the same boot id;
* call sequences that differ between ranks (a rank that recorded more calls): then the i-th call of one
  rank is not the i-th of another.

Point-to-point calls are left out (their op is absent from the answer, i.e. unknown): a send and its receive
are not one call that every rank makes, and a middle pipeline stage's receives and sends interleave.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tensorfabric.transfer.group import Group

__all__ = ["BOOT_ID", "POINT_TO_POINT", "lateness"]

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
POINT_TO_POINT = frozenset({"send", "recv", "batch_send_recv"})


def _boot_id(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def lateness(group: Group, boot_id: Path = BOOT_ID) -> dict[str, float] | None:
    """Per op, the seconds this rank's tracked calls spent before the group's last rank called them (summed
    over calls); None when that is unknown (see the module docstring). Collective: every rank calls it."""
    import torch.distributed as dist

    from tensorfabric.transfer.engines.base import settle_all

    calls = [(op, start) for op, start in group.stats.calls() if op not in POINT_TO_POINT]
    mine = (_boot_id(boot_id), [op for op, _ in calls], [start for _, start in calls])
    if group.pg is None:
        return {op: 0.0 for op in mine[1]}
    everyone: list[tuple[str | None, list[str], list[float]] | None] = [None] * group.size
    settle_all("lateness")
    dist.all_gather_object(everyone, mine, group=group.pg)
    known = [e for e in everyone if e is not None]
    if len(known) != group.size or mine[0] is None or any(e[0] != mine[0] or e[1] != mine[1] for e in known):
        return None
    out: dict[str, float] = {}
    for i, (op, start) in enumerate(calls):
        last = max(e[2][i] for e in known)
        out[op] = out.get(op, 0.0) + max(0.0, last - start)
    return out
