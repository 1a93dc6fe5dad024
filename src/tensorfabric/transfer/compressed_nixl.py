"""The compressed collectives' byte exchanges over a NIXL engine: one-sided writes of at most one slot each.

:mod:`tensorfabric.transfer.compressed` defines the algorithms (what is encoded, summed and decoded, and in
which order); this module only changes *how* their encoded bytes travel when the group has a NIXL engine:
as slot-sized writes instead of Gloo's all_to_all / all_gather. A Gloo collective of a few tens of KiB costs
about a millisecond of fixed overhead on three ranks sharing two cores, and the n > 2 algorithm makes two of
them per all_reduce, as much as the wire time int8 saves on a 1 Gbit link (docs/transfer.md, "Compressed
collectives over NIXL", has the measurement). The bytes moved are the same, so the results are bit for bit
those of the Gloo route (tests/transfer check it).

Credit. A rank writes piece k to every peer, then consumes piece k - LAG from every peer. Each rank runs
the same schedule, so in lockstep a peer holds at most LAG + 1 of our unconsumed pieces, which is below the
engine's credit limit for ``LAG <= slots - 2``; a rank that runs ahead only waits for a peer that needs
nothing from it (that peer's next piece from us was already written).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.nixl_engine import NixlEngine

__all__ = ["LAG", "exchange"]

LAG = 4
"""How many pieces a rank writes ahead of what it consumes."""
BULK_SPIN_S = 2e-4
"""How long a wait inside an exchange busy-polls before it sleeps between polls (the engine's default is
5 ms, tuned for decode's small messages). A piece of tens of KiB takes hundreds of microseconds of wire, and
a rank spinning for it takes the core from the ranks still encoding theirs when ranks outnumber cores: on
three ranks sharing two cores (SmolLM2 tp=3, 3x1gbit lab, int8 prefill, three interleaved runs each) TTFT
was 602-611 ms with a 5 ms spin, 460-512 ms with 200 us and 468-654 ms with none."""


def exchange(engine: NixlEngine, op: str, out: torch.Tensor, inp: torch.Tensor, gather: bool) -> None:
    """all_gather (``gather``: ``out`` is every rank's ``inp`` in rank order) or all_to_all (``inp`` holds one
    equal part per rank; part j goes to rank j, ``out`` gets the parts for us in source-rank order), as
    torch.distributed's ``all_gather_single`` / ``all_to_all_single`` on flat uint8 tensors."""
    n, me = engine.size, engine.rank
    each = inp.numel() if gather else inp.numel() // n
    step = engine.max_bytes
    pieces = [(lo, min(each, lo + step)) for lo in range(0, each, step)]
    lag = max(0, min(LAG, engine.slots - 2))

    def put(k: int) -> None:
        lo, hi = pieces[k]
        for p in range(n):
            if p != me:
                engine.put(p, inp[lo:hi] if gather else inp[p * each + lo:p * each + hi], op)

    def take(k: int) -> None:
        lo, hi = pieces[k]
        for p in range(n):
            if p != me:
                out[p * each + lo:p * each + hi].copy_(engine.take(p, op))
                engine.release(p)

    spin, engine.spin_s = engine.spin_s, BULK_SPIN_S
    try:
        for k in range(len(pieces) + lag):
            if k < len(pieces):
                put(k)
            if k >= lag:
                take(k - lag)
        mine = inp if gather else inp[me * each:(me + 1) * each]
        out[me * each:(me + 1) * each].copy_(mine)
        engine.finish(op)
    finally:
        engine.spin_s = spin
