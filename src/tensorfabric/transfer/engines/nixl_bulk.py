"""The compressed collectives' byte exchanges over a NIXL engine: one-sided writes of at most one slot each.

:mod:`tensorfabric.transfer.compressed` defines the algorithms (what is encoded, summed and decoded, and in
which order); this module only changes *how* their encoded bytes travel when the group has a NIXL engine:
as slot-sized writes instead of Gloo's all_to_all / all_gather. A Gloo collective of a few tens of KiB costs
about a millisecond of fixed overhead on three ranks sharing two cores, and the n > 2 algorithm makes two of
them per all_reduce, as much as the wire time int8 saves on a 1 Gbit link (docs/transfer.md, "Compressed
collectives over NIXL", has the measurement). The bytes moved are the same, so the results are bit for bit
those of the Gloo route (tests/transfer check it).

The n > 2 all_reduce (:func:`scatter_reduce_gather`) also spends less CPU per call than the algorithm's
plain statement, because on three ranks sharing two cores the int8 prefill all_reduce is CPU-bound (in the
3x1gbit lab each rank burned about 1.9 ms of CPU per 3 ms call): one encode covers every peer's chunk, the
parts of that encoding are written straight from it, and the buffers are kept from call to call.

Credit. A rank writes piece k to every peer, then consumes piece k - LAG from every peer. Each rank runs
the same schedule, so in lockstep a peer holds at most LAG + 1 of our unconsumed pieces, which is below the
engine's credit limit for ``LAG <= slots - 2``; a rank that runs ahead only waits for a peer that needs
nothing from it (that peer's next piece from us was already written).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.codecs import BlockCodec
    from tensorfabric.transfer.engines.nixl_engine import NixlEngine

__all__ = ["LAG", "exchange", "scatter_reduce_gather"]

LAG = 4
"""How many pieces a rank writes ahead of what it consumes."""
BULK_SPIN_S = 2e-4
"""How long a wait inside an exchange busy-polls before it sleeps between polls (the engine's default is
5 ms, tuned for decode's small messages). A piece of tens of KiB takes hundreds of microseconds of wire, and
a rank spinning for it takes the core from the ranks still encoding theirs when ranks outnumber cores: on
three ranks sharing two cores (SmolLM2 tp=3, 3x1gbit lab, int8 prefill, three interleaved runs each) TTFT
was 602-611 ms with a 5 ms spin, 460-512 ms with 200 us and 468-654 ms with none."""


def _window(parts: Sequence[torch.Tensor], lo: int, hi: int) -> list[torch.Tensor]:
    """Bytes ``lo:hi`` of the concatenation of the flat uint8 ``parts``, as views."""
    out, base = [], 0
    for part in parts:
        n = part.numel()
        a, b = max(lo, base), min(hi, base + n)
        if a < b:
            out.append(part[a - base:b - base])
        base += n
    return out


def _move(engine: NixlEngine, op: str, sources: dict[int, Sequence[torch.Tensor]],
          targets: dict[int, torch.Tensor]) -> None:
    """Send every peer p the concatenation of ``sources[p]`` and receive the same number of bytes from it
    into ``targets[p]`` (flat uint8), in slot-sized messages (inline where the engine's ``inline_bulk``
    says so: its docstring says why and what that obliges) with LAG pieces written ahead."""
    each = targets[next(iter(targets))].numel()
    step = engine.max_bytes
    pieces = [(lo, min(each, lo + step)) for lo in range(0, each, step)]
    lag = max(0, min(LAG, engine.slots - 2))
    spin, engine.spin_s = engine.spin_s, BULK_SPIN_S
    try:
        for k in range(len(pieces) + lag):
            if k < len(pieces):
                lo, hi = pieces[k]
                for p, parts in sources.items():
                    engine.put(p, _window(parts, lo, hi), op, inline=engine.inline_bulk)
            if k >= lag:
                lo, hi = pieces[k - lag]
                for p, target in targets.items():
                    target[lo:hi].copy_(engine.take(p, op))
                    engine.release(p)
    finally:
        engine.spin_s = spin


def exchange(engine: NixlEngine, op: str, out: torch.Tensor, inp: torch.Tensor, gather: bool) -> None:
    """all_gather (``gather``: ``out`` is every rank's ``inp`` in rank order) or all_to_all (``inp`` holds one
    equal part per rank; part j goes to rank j, ``out`` gets the parts for us in source-rank order), as
    torch.distributed's ``all_gather_single`` / ``all_to_all_single`` on flat uint8 tensors."""
    n, me = engine.size, engine.rank
    each = inp.numel() if gather else inp.numel() // n
    peers = [p for p in range(n) if p != me]
    _move(engine, op, {p: [inp if gather else inp[p * each:(p + 1) * each]] for p in peers},
          {p: out[p * each:(p + 1) * each] for p in peers})
    engine.finish(op)
    out[me * each:(me + 1) * each].copy_(inp if gather else inp[me * each:(me + 1) * each])


def scatter_reduce_gather(engine: NixlEngine, op: str, x: torch.Tensor, result: torch.Tensor,
                          codec: BlockCodec) -> None:
    """The n > 2 all_reduce of :mod:`tensorfabric.transfer.compressed` on one segment: ``x`` and ``result``
    are n equal chunks of whole blocks, chunk j reduced by rank j. The same encodings, sums (own chunk first,
    then the others in rank order) and decodes as the Gloo route, so the same bits."""
    import torch

    n, me = engine.size, engine.rank
    chunk = x.numel() // n
    enc = codec.encoded_nbytes(chunk)
    peers = [p for p in range(n) if p != me]
    # One encode for every peer's chunk: a run of blocks of it is byte for byte that chunk's own encoding.
    if me in (0, n - 1):
        others = x[chunk:] if me == 0 else x[:-chunk]
    else:
        others = torch.cat((x[:me * chunk], x[(me + 1) * chunk:]))
    wide = (n - 1) * chunk
    sent = engine.scratch("srg.send", codec.encoded_nbytes(wide))
    codec.encode_into(others, sent)
    received = engine.scratch("srg.recv", n * enc).view(n, enc)
    _move(engine, op, {p: codec.element_range(sent, wide, k * chunk, (k + 1) * chunk)
                       for k, p in enumerate(peers)}, {p: received[p] for p in peers})
    partial = x[me * chunk:(me + 1) * chunk].clone()
    for p in peers:
        codec.decode_add_(received[p], chunk, partial)
    gathered = engine.scratch("srg.gather", n * enc).view(n, enc)
    codec.encode_into(partial, gathered[me])
    _move(engine, op, {p: [gathered[me]] for p in peers}, {p: gathered[p] for p in peers})
    engine.finish(op)
    for i in range(n):
        codec.decode_into(gathered[i], chunk, result[i * chunk:(i + 1) * chunk])
