"""Compressed collectives: block-quantized all_reduce and all_gather over any backend.

all_reduce (sum or avg) of a tensor of N elements on n ranks, codec with block B and unit error u. Both
algorithms flatten to float32 and zero-pad to P (a multiple of n*B), so block boundaries are the same on every
rank, and both add decoded values **in float32**, in rank order (never in the compressed type), so every rank
ends with bit-identical results.

*Two ranks -- gather-sum.* Each rank encodes its whole tensor once; one all_gather moves the two encodings;
each rank decodes both and adds them. A rank sends E = encoded size of P elements, exactly what the general
algorithm sends for n = 2 (2 * (n-1)/n * E), but in one collective instead of two, with one quantization
instead of two and no reduce step between them. (For n > 2 it would send (n-1) * E, so it is not used there.)

*n > 2 -- quantized reduce-scatter, then all_gather.*

1. Each rank's chunk is C = P/n elements, made of whole blocks.
2. Encode each of the chunks of the other ranks; all_to_all sends chunk j to rank j (the reduce-scatter of
   quantized chunks -- a transport cannot add quantized values, so it only moves them). A rank's own chunk
   never leaves it and is not quantized.
3. Rank j starts from its own float32 chunk and adds the n-1 decoded copies.
4. Rank j encodes its partial sum; all_gather moves the n encoded partial sums to everyone; each rank decodes
   all of them (its own too) and casts back to the input dtype.

Wire bytes = encoded size of the P padded elements = P*bits/8 + 4*P/B (payload + float32 scales); each rank
sends (n-1)/n of that twice, exactly as a ring all_reduce sends 2(n-1)/n of the raw bytes.

Both run pipelined over segments of about PIPELINE_ELEMS elements (whole blocks per rank), so quantizing one
segment overlaps the transfer of the previous one; block boundaries do not move. The bytes move through the
group's engine (:meth:`Communicator.exchange <tensorfabric.transfer.engines.base.Communicator.exchange>`):
torch.distributed's all_to_all / all_gather, or NIXL writes (:mod:`tensorfabric.transfer.engines.nixl_bulk`),
which complete before the next segment starts; an engine may run the n > 2 segment its own way, bit for bit
the same (``Communicator.reduce_encoded``).

Error bound. Let M_i be the absmax of rank i's input over one block and S = sum_i M_i. Gather-sum errs by at
most u*M_i per decoded input, u*S in all. In the general algorithm step 2 errs by at most u*M_i per input
element (0 for the own chunk), so the float32 partial sum p~ differs from the exact p by at most u*S; the
decoded inputs are bounded by M_i, so the requantized block's absmax M~ <= S and step 4 adds at most
u*M~ <= u*S. Hence, per element, with q = 1 for two ranks and q = 2 otherwise::

    |all_reduce(x) - sum_i x_i| <= q*u*S + n*2**-24*S      (float32 accumulation, n adds)
                                 + |result| * eps_out       (final cast: 2**-8 bfloat16, 2**-11 float16, 0 float32)

with u = 1/254 (int8), 1/14 (int4), 1/16 + 2**-19/448 (fp8). For ``avg`` divide the first line by n.
all-zero blocks are exact (scale 0); a constant block is exact up to float32 rounding of the scale.

all_gather: each rank encodes its tensor once, so the element from rank i errs by at most u*M_i (+ the
final cast), with M_i its block absmax on rank i; blocks are taken over rank i's flattened tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensorfabric.errors import InputError

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.codecs import BlockCodec
    from tensorfabric.transfer.engines.base import Communicator, Pending

__all__ = ["compressed_all_gather", "compressed_all_reduce", "error_bound_all_reduce", "quantizations"]

_FLOATS = ("torch.float32", "torch.bfloat16", "torch.float16")
PIPELINE_ELEMS = 2**20
"""Target segment length (elements; 4 MiB of float32): big enough that per-message latency stays small,
small enough that a 16 MiB tensor gets four stages of overlap."""


def _check(t: torch.Tensor, op: str) -> None:
    if str(t.dtype) not in _FLOATS:
        raise InputError(f"codec collectives need a float32, bfloat16 or float16 tensor, not {t.dtype}")
    if op not in ("sum", "avg"):
        raise InputError(f"codec all_reduce op: {op!r} is not one of sum, avg")


def _wait(pending: Pending) -> None:
    """Finish an exchange; torch's RuntimeError passes up to the Group, which names the op and the peer."""
    for work in pending.works:
        work.wait()


def _segments(padded: int, n: int, codec: BlockCodec, target: int) -> list[tuple[int, int]]:
    """(start, length) of pipeline segments: whole blocks per rank, about ``target`` elements each."""
    unit = n * codec.block
    step = max(unit, target // unit * unit)
    return [(start, min(step, padded - start)) for start in range(0, padded, step)]


def quantizations(nranks: int) -> int:
    """How many times an all_reduce value is quantized on ``nranks`` ranks: 1 (gather-sum) or 2."""
    return 1 if nranks <= 2 else 2


def compressed_all_reduce(comm: Communicator, t: torch.Tensor, codec: BlockCodec, op: str = "sum", *,
                          segment_elems: int = PIPELINE_ELEMS) -> int:
    """Reduce ``t`` in place through ``codec`` (see the module docstring); return the wire bytes.

    Pipelined: the tensor is cut into segments of about ``PIPELINE_ELEMS`` elements, and while one segment's
    bytes are on the wire the next one is being quantized or reduced (Gloo runs transfers on its own threads).
    """
    import torch

    _check(t, op)
    n = comm.size
    flat = t.reshape(-1).to(torch.float32)
    numel = flat.numel()
    padded = codec.padded(numel, n)
    x = torch.nn.functional.pad(flat, (0, padded - numel)) if padded != numel else flat
    direct = t.dtype == torch.float32 and t.is_contiguous() and padded == numel
    result = t.view(-1) if direct else torch.empty(padded, dtype=torch.float32, device=t.device)
    segments = _segments(padded, n, codec, segment_elems)
    if quantizations(n) == 1:
        _gather_sum(comm, x, result, codec, segments)
    else:
        _scatter_reduce_gather(comm, x, result, codec, segments)
    if op == "avg":
        result /= n
    if not direct:
        t.copy_(result[:numel].view(t.shape))
    return codec.encoded_nbytes(padded)


def _gather_sum(comm: Communicator, x: torch.Tensor, result: torch.Tensor, codec: BlockCodec,
                segments: list[tuple[int, int]]) -> None:
    """Two ranks (or one): all_gather each rank's encoding, then sum the decoded copies in rank order."""
    import torch

    n = comm.size
    pending = []
    for start, length in segments:
        mine = codec.encode(x[start:start + length])
        gathered = torch.empty(n * mine.numel(), dtype=torch.uint8, device=x.device)
        pending.append((gathered, comm.exchange("all_reduce", gathered, mine, True), mine))
    for (start, length), (gathered, work, mine) in zip(segments, pending, strict=True):
        enc = mine.numel()
        _wait(work)
        out = result[start:start + length]
        # Decode straight into ``result``: for a float32 input that is ``x`` itself, consumed by the encode.
        codec.decode_into(gathered[:enc], length, out)
        for i in range(1, n):
            codec.decode_add_(gathered[i * enc:(i + 1) * enc], length, out)


def _scatter_reduce_gather(comm: Communicator, x: torch.Tensor, result: torch.Tensor, codec: BlockCodec,
                           segments: list[tuple[int, int]]) -> None:
    """n > 2: quantized reduce-scatter by all_to_all, float32 partial sums, all_gather of their encodings."""
    import torch

    n, me = comm.size, comm.rank
    start, length = segments[0]
    if comm.reduce_encoded("all_reduce", x[start:start + length], result[start:start + length], codec):
        for start, length in segments[1:]:
            comm.reduce_encoded("all_reduce", x[start:start + length], result[start:start + length], codec)
        return
    stage1 = []
    for start, length in segments:
        chunk = length // n
        enc = codec.encoded_nbytes(chunk)
        send = torch.empty(n * enc, dtype=torch.uint8, device=x.device)
        for j in range(n):
            if j != me:
                codec.encode_into(x[start + j * chunk:start + (j + 1) * chunk], send[j * enc:(j + 1) * enc])
        recv = torch.empty_like(send)
        stage1.append((recv, comm.exchange("all_reduce", recv, send, False), send))
    stage2 = []
    for (start, length), (recv, work, _send) in zip(segments, stage1, strict=True):
        chunk = length // n
        enc = codec.encoded_nbytes(chunk)
        _wait(work)
        partial = x[start + me * chunk:start + (me + 1) * chunk].clone()
        for i in range(n):
            if i != me:
                codec.decode_add_(recv[i * enc:(i + 1) * enc], chunk, partial)
        mine = codec.encode(partial)
        gathered = torch.empty(n * enc, dtype=torch.uint8, device=x.device)
        stage2.append((gathered, comm.exchange("all_reduce", gathered, mine, True), mine))
    for (start, length), (gathered, work, _mine) in zip(segments, stage2, strict=True):
        chunk = length // n
        enc = codec.encoded_nbytes(chunk)
        _wait(work)
        for i in range(n):
            codec.decode_into(gathered[i * enc:(i + 1) * enc], chunk,
                              result[start + i * chunk:start + (i + 1) * chunk])


def compressed_all_gather(comm: Communicator, t: torch.Tensor, codec: BlockCodec) -> tuple[torch.Tensor, int]:
    """All-gather ``t`` (dim >= 1) through ``codec``; return (concatenation along dim 0, wire bytes)."""
    import torch

    _check(t, "sum")
    n = comm.size
    flat = t.reshape(-1).to(torch.float32)
    numel = flat.numel()
    padded = codec.padded(numel)
    x = torch.nn.functional.pad(flat, (0, padded - numel)) if padded != numel else flat
    mine = codec.encode(x)
    enc = mine.numel()
    gathered = torch.empty(n * enc, dtype=torch.uint8, device=t.device)
    _wait(comm.exchange("all_gather", gathered, mine, True))
    out = torch.empty((n * t.shape[0], *t.shape[1:]), dtype=t.dtype, device=t.device)
    rows = out.view(n, numel)
    scratch = torch.empty(padded, dtype=torch.float32, device=t.device)
    for i in range(n):
        codec.decode_into(gathered[i * enc:(i + 1) * enc], padded, scratch)
        rows[i].copy_(scratch[:numel])
    return out, n * enc


def error_bound_all_reduce(inputs: list[torch.Tensor], codec: BlockCodec, nranks: int, op: str = "sum",
                           out_dtype: object = None) -> torch.Tensor:
    """The documented per-element bound for all_reduce of ``inputs`` (one flat tensor per rank)."""
    import torch

    numel = inputs[0].numel()
    padded = codec.padded(numel, nranks)
    total = torch.zeros(padded // codec.block, dtype=torch.float64)
    exact_abs = torch.zeros(numel, dtype=torch.float64)
    for x in inputs:
        xf = torch.nn.functional.pad(x.reshape(-1).to(torch.float64), (0, padded - numel))
        total += xf.view(-1, codec.block).abs().amax(dim=1)
        exact_abs += x.reshape(-1).to(torch.float64)
    per_elem = total.repeat_interleave(codec.block)[:numel]
    bound = (quantizations(nranks) * codec.unit_error + nranks * 2.0**-24) * per_elem
    if op == "avg":
        bound /= nranks
        exact_abs /= nranks
    eps_out = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}.get(out_dtype, 0.0)  # type: ignore[call-overload]
    result: torch.Tensor = bound + (exact_abs.abs() + bound) * eps_out
    return result
