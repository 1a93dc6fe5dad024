"""The model's communication, carried by :mod:`tensorfabric.transfer` groups (so codecs and stats apply)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.group import Group

__all__ = ["GroupStage", "GroupTP", "merge_stats"]


class GroupTP:
    """Tensor-parallel all-reduce/all-gather over ``group``; ``codec`` applies to prefill all-reduces, and
    to decode ones too when ``codec_decode``."""

    def __init__(self, group: Group, codec: str | None = None, codec_decode: bool = False) -> None:
        from tensorfabric.transfer.codecs import get_codec

        self.group = group
        self.codec = None if codec is None else get_codec(codec)
        self.codec_decode = codec_decode

    def reduce(self, t: torch.Tensor, phase: str) -> torch.Tensor:
        import torch

        codec = None if phase == "decode" and not self.codec_decode else self.codec
        if codec is None:
            return self.group.all_reduce(t.contiguous())  # type: ignore[no-any-return]
        # The codecs quantize float32; a bf16 activation is widened for the trip and narrowed after.
        wide = t.to(torch.float32).contiguous()
        self.group.all_reduce(wide, codec=codec)
        return wide.to(t.dtype)

    def gather_last(self, t: torch.Tensor) -> torch.Tensor:
        """Concatenate each rank's last-dim slice (vocab-parallel logits) in rank order."""
        size = self.group.size
        flat = t.reshape(-1, t.shape[-1]).contiguous()
        out = self.group.all_gather(flat)
        parts = out.view(size, flat.shape[0], flat.shape[1]).permute(1, 0, 2).reshape(flat.shape[0], -1)
        return parts.reshape(*t.shape[:-1], size * t.shape[-1])  # type: ignore[no-any-return]

    def gather_rows(self, t: torch.Tensor) -> torch.Tensor:
        """Concatenate each rank's rows (dim 0) in rank order; never compressed (embedding rows are exact)."""
        return self.group.all_gather(t.contiguous())  # type: ignore[no-any-return]


class GroupStage:
    """Pipeline links over the ``pp`` group (this rank's peers in the other stages) and the world group."""

    def __init__(self, pp: Group, world: Group, token_src: int) -> None:
        self.pp, self.world, self.token_src = pp, world, token_src
        self._pending: list[Any] = []

    def send_next(self, hs: Sequence[torch.Tensor]) -> None:
        from tensorfabric.transfer.group import SendRecv

        # Async, so the stage can start on the next microbatch while this one is on the wire.
        ops = [SendRecv("send", h.contiguous(), self.pp.rank + 1) for h in hs]
        self._pending.append(self.pp.batch_send_recv(ops, async_op=True))

    def recv_prev(self, shapes: Sequence[tuple[int, ...]], dtype: torch.dtype) -> list[torch.Tensor]:
        import torch

        from tensorfabric.transfer.group import SendRecv

        bufs = [torch.empty(s, dtype=dtype) for s in shapes]
        self.pp.batch_send_recv([SendRecv("recv", b, self.pp.rank - 1) for b in bufs])
        return bufs

    def share_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Every rank gets the last stage's sampled tokens (one small broadcast per step)."""
        for handle in self._pending:
            handle.wait()
        self._pending.clear()
        buf = tokens.to(dtype=tokens.dtype).clone().contiguous()
        self.world.broadcast(buf, src=self.token_src)
        return buf

    def comm_seconds(self) -> float:
        return 0.0


def merge_stats(groups: Sequence[Group],
                lateness: Sequence[dict[str, float] | None] | None = None) -> dict[str, dict[str, Any]]:
    """Per collective type totals over ``groups``: calls, bytes, wire_bytes, seconds, codecs used, and for the
    calls through NIXL (``nixl_calls``) the part of ``seconds`` spent waiting for the slowest peer
    (``wait_seconds``; the rest is this rank moving bytes: copies, posts, sums).

    With ``lateness`` (one :func:`tensorfabric.transfer.arrivals.lateness` answer per group), ``late_seconds``
    is the part of ``seconds`` spent before the group's last rank had called the collective: the others'
    compute, which no link or codec shortens. None where any group's answer for that op is unknown."""
    out: dict[str, dict[str, Any]] = {}
    for i, group in enumerate(groups):
        late = lateness[i] if lateness is not None else None
        for s in group.stats.snapshot():
            entry = out.setdefault(s.op, {"calls": 0, "bytes": 0, "wire_bytes": 0, "seconds": 0.0, "codecs": [],
                                          "wait_seconds": 0.0, "nixl_calls": 0, "late_seconds": 0.0})
            entry["calls"] += s.calls
            entry["bytes"] += s.bytes
            entry["wire_bytes"] += s.wire_bytes
            entry["seconds"] += s.seconds
            entry["wait_seconds"] += s.wait_seconds
            entry["nixl_calls"] += s.nixl_calls
            if s.codec not in entry["codecs"]:
                entry["codecs"].append(s.codec)
        for op in {s.op for s in group.stats.snapshot()}:
            if late is None or op not in late or out[op]["late_seconds"] is None:
                out[op]["late_seconds"] = None
            else:
                out[op]["late_seconds"] += late[op]
    return out
