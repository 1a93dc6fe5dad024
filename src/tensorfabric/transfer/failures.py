"""Turn torch.distributed failures into TransferError naming the op, the group and the likeliest peer.

Gloo reports a dead peer as a closed or reset TCP connection ("Connection closed by peer [127.0.0.1]:4567")
and a stalled one as "Timed out waiting ... ms"; neither names a rank. The rank is recovered from the group's
rank table: a member on this host whose process is gone (or a zombie) is the culprit; for send/recv the peer
is known; in a group of two it can only be the other rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tensorfabric.errors import TransferError

if TYPE_CHECKING:
    from tensorfabric.transfer.records import RankEntry

__all__ = ["process_gone", "suspect_peer", "to_transfer_error"]


def process_gone(pid: int, proc_root: Path = Path("/proc")) -> bool:
    """True when ``pid`` no longer runs (absent, or a zombie waiting to be reaped)."""
    try:
        stat = (proc_root / str(pid) / "stat").read_text()
    except OSError:
        return True
    # Field 3 is the state; the command name before it is in parentheses and may contain spaces.
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


def suspect_peer(table: Sequence[RankEntry], me: int, host: str, hint: int | None = None,
                 proc_root: Path = Path("/proc")) -> int | None:
    """Global rank of the member most likely at fault, or None when it cannot be told."""
    for entry in table:
        if entry.global_rank != me and entry.host == host and process_gone(entry.pid, proc_root):
            return entry.global_rank
    if hint is not None:
        return hint
    others = [e.global_rank for e in table if e.global_rank != me]
    return others[0] if len(others) == 1 else None


def to_transfer_error(exc: BaseException, *, op: str, group: str, table: Sequence[RankEntry], me: int,
                      host: str, timeout_s: float, hint: int | None = None) -> TransferError:
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:300] + "..."
    peer = suspect_peer(table, me, host, hint)
    kind = "timed out" if "timed out" in text.lower() or "timeout" in text.lower() else "failed"
    who = f"rank {peer}" if peer is not None else "an unknown peer"
    message = (f"{op} on group {group!r} {kind} (timeout {timeout_s:g} s); suspect {who}: "
               f"{type(exc).__name__}: {text}")
    return TransferError(message, op=op, group=group, peer=peer)
