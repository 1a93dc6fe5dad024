"""An nccl-tests-style sweep over message sizes: time, algbw, busbw and a real check of every result.

Definitions follow nccl-tests (``doc/PERFORMANCE.md``): GB/s with GB = 1e9 bytes, time in microseconds (mean per
op over ``iters``, averaged across ranks), ``algbw = S / t`` and ``busbw = algbw * factor`` with, for n ranks:

=================  ==========================================  ============
op                 S (bytes given to the bandwidth formula)    bus factor
=================  ==========================================  ============
all_reduce         count * typesize                            2(n-1)/n
all_gather         per-rank count * typesize * n (total)       (n-1)/n
reduce_scatter     per-rank count * typesize * n (total)       (n-1)/n
all_to_all         per-peer count * typesize * n (total)       (n-1)/n
broadcast          count * typesize                            1
sendrecv           count * typesize                            1
=================  ==========================================  ============

For the split ops the per-rank (per-peer) count is ``size / typesize / n`` rounded down to a 16-byte multiple,
as nccl-tests does; the size column shows the total. The footer's average is the arithmetic mean of busbw
over every row.

Check: uncompressed runs use small integers (exact in float32 and bfloat16 whatever the summation order), so
``#wrong`` counts elements that differ at all from the expectation. Each rank builds **only its own input**
(``x_r[i] = (7i + 3r + salt) mod 17 - 8``) and checks its result against a closed form: the sum over ranks of
``(a + 3r) mod 17`` depends only on ``a = (7i + salt) mod 17`` and repeats every 17 ranks, so a 17-entry
table gives every element's sum for any number of ranks; results are checked in chunks of ``_CHECK_CHUNK``
elements. Memory per rank is therefore the op's own buffers plus a few float64 chunks, whatever the world
size. Codec runs use seeded normal
data and still build every rank's input, because the documented error bound is a function of all of them;
``max_error`` is measured against the float64 exact result and ``#wrong`` counts elements outside the bound
(:mod:`tensorfabric.transfer.compressed`). With a codec ``S`` is still the uncompressed size, so busbw is the
*effective* bandwidth; ``wire_bytes`` is the encoded size.

Rows reach ``on_row`` as they are measured (``tensorfabric bench`` prints them at once, so an interrupted
sweep keeps what it measured); :func:`rank_bytes` is the per-rank memory a sweep needs, which the CLI
checks against the host's available memory before any rank starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from tensorfabric.errors import InputError

if TYPE_CHECKING:
    import torch

    from tensorfabric.transfer.codecs import BlockCodec
    from tensorfabric.transfer.group import Group

__all__ = ["OPS", "DTYPES", "BenchConfig", "BenchResult", "BenchRow", "bus_factor", "rank_bytes", "run_bench",
           "sizes"]

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
CODEC_OPS = ("all_reduce", "all_gather")
DTYPES = {"float32": "float", "bfloat16": "bfloat16"}
_SPLIT_OPS = ("all_gather", "reduce_scatter", "all_to_all")
_CHECK_CHUNK = 2**20
"""Elements checked at a time: the float64 expectation of a chunk is 8 MiB whatever the message size."""


@dataclass(frozen=True)
class BenchConfig:
    op: str = "all_reduce"
    min_bytes: int = 8
    max_bytes: int = 32 * 2**20
    """32 MiB, not nccl-tests' 128M: a 2-core CI machine finishes the sweep in seconds."""
    factor: int = 2
    warmup: int = 5
    iters: int = 20
    dtype: str = "float32"
    codec: str | None = None
    """A registered codec's name; ``None`` benches the uncompressed path."""
    block: int = 64
    check: bool = True
    """Verify every result (nccl-tests' ``-c 1``); off, ``#wrong`` is N/A as in nccl-tests' ``-c 0``."""

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise InputError(f"op: {self.op!r} is not one of {', '.join(OPS)}")
        if self.dtype not in DTYPES:
            raise InputError(f"dtype: {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.min_bytes < 1 or self.max_bytes < self.min_bytes:
            raise InputError(f"sizes: --min {self.min_bytes} and --max {self.max_bytes} must satisfy "
                             "1 <= min <= max, e.g. --min 8 --max 32M")
        if self.factor < 2:
            raise InputError(f"factor: {self.factor!r} must be an integer >= 2 such as 2")
        if self.warmup < 0 or self.iters < 1:
            raise InputError(f"warmup {self.warmup!r} / iters {self.iters!r}: need warmup >= 0 and iters >= 1")
        if self.codec is not None:
            from tensorfabric.transfer.codecs import CODECS

            CODECS.get(self.codec)  # InputError naming the registered codecs, before any rank starts
        if self.codec is not None and self.op not in CODEC_OPS:
            raise InputError(f"codec {self.codec!r} applies to {', '.join(CODEC_OPS)}, not op {self.op!r}")


@dataclass(frozen=True)
class BenchRow:
    size: int
    count: int
    type: str
    redop: str
    root: int
    time_us: float
    algbw: float
    busbw: float
    wrong: int | None
    """Elements outside the bound; ``None`` when results were not checked."""
    wire_bytes: int | None = None
    max_error: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.wire_bytes is None:
            del data["wire_bytes"], data["max_error"]
        return data


@dataclass(frozen=True)
class BenchResult:
    op: str
    nranks: int
    backend: str
    dtype: str
    codec: str
    rows: tuple[BenchRow, ...] = field(default_factory=tuple)
    transport: str = ""
    engine: str = "torch"
    ranks: tuple[dict[str, Any], ...] = ()
    """The rank table: ``{"rank", "local_rank", "host", "pid"}`` per rank."""

    @property
    def avg_busbw(self) -> float:
        return sum(r.busbw for r in self.rows) / len(self.rows) if self.rows else 0.0

    @property
    def wrong(self) -> int:
        return sum(r.wrong or 0 for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "nranks": self.nranks, "backend": self.backend, "engine": self.engine,
                "transport": self.transport, "dtype": self.dtype, "codec": self.codec,
                "rows": [r.to_dict() for r in self.rows], "avg_busbw": self.avg_busbw, "ranks": list(self.ranks)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchResult:
        rows = tuple(BenchRow(**{k: row.get(k) for k in BenchRow.__dataclass_fields__ if k in row})
                     for row in data["rows"])
        return cls(data["op"], int(data["nranks"]), data["backend"], data["dtype"], data["codec"], rows,
                   str(data.get("transport", "")), str(data.get("engine", "torch")),
                   tuple(data.get("ranks", ())))


def bus_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in _SPLIT_OPS:
        return (n - 1) / n
    return 1.0


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    out = []
    size = min_bytes
    while size <= max_bytes:
        out.append(size)
        size *= factor
    return out


def _counts(op: str, size: int, typesize: int, n: int) -> tuple[int, int]:
    """(count column, total bytes S) for a requested size, nccl-tests style."""
    count = size // typesize
    if op in _SPLIT_OPS:
        per_rank = (count // n) & ~(16 // typesize - 1)
        return per_rank, per_rank * typesize * n
    return count, count * typesize


def _pattern(rank: int, count: int, dtype: torch.dtype, salt: int = 0, start: int = 0) -> torch.Tensor:
    """Elements ``start .. start+count`` of rank ``rank``'s input."""
    import torch

    # Integers in [-8, 8]: any sum over <= 32 ranks stays exact in bfloat16 (8 significant bits).
    values = ((torch.arange(start, start + count, dtype=torch.int64) * 7 + rank * 3 + salt) % 17) - 8
    return values.to(dtype)


def _sum_of_patterns(n: int, count: int, salt: int = 0, start: int = 0) -> torch.Tensor:
    """Closed form of ``sum(_pattern(r, ...) for r in range(n))`` in float64, without building n inputs."""
    import torch

    # sum_r ((a + 3r) mod 17) for each residue a: full cycles of 17 ranks contribute 0+1+...+16 = 136 each.
    full, rest = divmod(n, 17)
    table = torch.tensor([136 * full + sum((a + 3 * r) % 17 for r in range(rest)) - 8 * n for a in range(17)],
                         dtype=torch.float64)
    a = (torch.arange(start, start + count, dtype=torch.int64) * 7 + salt) % 17
    return table[a]


def _random(rank: int, count: int, seed: int) -> torch.Tensor:
    import torch

    gen = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randn(count, generator=gen, dtype=torch.float32)


def rank_bytes(config: BenchConfig, n: int) -> int:
    """Peak bytes one rank allocates for the sweep's largest size (buffers, result, float64 check chunks;
    codec runs also hold every rank's input and its float64 copies)."""
    typesize = 2 if config.dtype == "bfloat16" else 4
    size = sizes(config.min_bytes, config.max_bytes, config.factor)[-1]
    count, total = _counts(config.op, size, typesize, n)
    mine = count * typesize * (n if config.op in ("reduce_scatter", "all_to_all") else 1)
    out = total if config.op == "all_gather" else mine
    check = 8 * 3 * min(_CHECK_CHUNK, out // typesize)
    codec = (n * mine + 2 * 8 * n * (mine // typesize)) if config.codec is not None else 0
    return 3 * mine + out + check + codec


class _Case:
    """One op at one size: this rank's input, the call to time, and the check of its result."""

    def __init__(self, group: Group, op: str, count: int, dtype: torch.dtype, codec: BlockCodec | None,
                 seed: int) -> None:
        self.group, self.op, self.count, self.dtype, self.codec, self.seed = group, op, count, dtype, codec, seed
        n, r = group.size, group.rank
        self.total = count * n if op in _SPLIT_OPS and op != "all_gather" else count
        self.inputs: list[torch.Tensor] = []
        if codec is not None:
            self.inputs = [_random(i, self.total, seed).to(dtype) for i in range(n)]
            self.mine = self.inputs[r]
        else:
            self.mine = _pattern(r, self.total, dtype)
        self.buf = self.mine.clone()
        self.recv = self.buf.clone()

    def reset(self) -> None:
        self.buf.copy_(self.mine)

    def run(self) -> Any:
        g, op = self.group, self.op
        if op == "all_reduce":
            return g.all_reduce(self.buf, codec=self.codec)
        if op == "all_gather":
            return g.all_gather(self.buf, codec=self.codec)
        if op == "reduce_scatter":
            return g.reduce_scatter(self.buf)
        if op == "broadcast":
            return g.broadcast(self.buf, src=0)
        if op == "all_to_all":
            return g.all_to_all(self.buf)
        return self._sendrecv()

    def _sendrecv(self) -> Any:
        from tensorfabric.transfer.group import SendRecv

        g = self.group
        if g.size == 1:
            self.recv.copy_(self.buf)
            return self.recv
        nxt, prev = (g.rank + 1) % g.size, (g.rank - 1) % g.size
        g.batch_send_recv([SendRecv("send", self.buf, nxt), SendRecv("recv", self.recv, prev)])
        return self.recv

    def _input(self, rank: int, count: int, start: int) -> torch.Tensor:
        """float64 elements ``start .. start+count`` of rank ``rank``'s input."""
        import torch

        if self.codec is not None:
            return self.inputs[rank][start:start + count].to(torch.float64)
        return _pattern(rank, count, torch.float64, start=start)

    def _sum(self, count: int, start: int) -> torch.Tensor:
        import torch

        if self.codec is not None:
            return torch.stack([x[start:start + count].to(torch.float64) for x in self.inputs]).sum(0)
        return _sum_of_patterns(self.group.size, count, start=start)

    def expected(self) -> list[tuple[int, int, Callable[[int, int], torch.Tensor]]]:
        """``(offset into the flat result, length, make(start, n))`` pieces covering the result, where
        ``make`` builds elements ``start .. start+n`` of the piece in float64 (so checks can go chunk by chunk)."""
        n, r, c = self.group.size, self.group.rank, self.count

        def inp(rank: int, base: int) -> Callable[[int, int], torch.Tensor]:
            return lambda start, k: self._input(rank, k, base + start)

        if self.op == "all_reduce":
            return [(0, c, lambda start, k: self._sum(k, start))]
        if self.op == "all_gather":
            return [(i * c, c, inp(i, 0)) for i in range(n)]
        if self.op == "reduce_scatter":
            return [(0, c, lambda start, k: self._sum(k, r * c + start))]
        if self.op == "broadcast":
            return [(0, c, inp(0, 0))]
        if self.op == "all_to_all":
            return [(i * c, c, inp(i, r * c)) for i in range(n)]
        return [(0, self.total, inp((r - 1) % n, 0))]

    def check(self, result: torch.Tensor) -> tuple[int, float]:
        import torch

        flat = result.reshape(-1)
        wrong, max_error = 0, 0.0
        bound = self._bound() if self.codec is not None else None
        for offset, length, make in self.expected():
            for start in range(0, length, _CHECK_CHUNK):
                k = min(_CHECK_CHUNK, length - start)
                at = offset + start
                err = (flat[at:at + k].to(torch.float64) - make(start, k)).abs()
                if err.numel():
                    max_error = max(max_error, float(err.max()))
                if bound is None:
                    wrong += int((err != 0).sum())
                else:
                    wrong += int((err > bound[at:at + k] * (1 + 1e-6) + 1e-30).sum())
        return wrong, max_error

    def _bound(self) -> torch.Tensor:
        import torch

        from tensorfabric.transfer.compressed import error_bound_all_reduce

        assert self.codec is not None
        if self.op == "all_reduce":
            return error_bound_all_reduce(self.inputs, self.codec, self.group.size, out_dtype=self.dtype)
        parts = []
        for x in self.inputs:
            padded = self.codec.padded(x.numel())
            xf = torch.nn.functional.pad(x.to(torch.float64), (0, padded - x.numel()))
            blockmax = xf.view(-1, self.codec.block).abs().amax(dim=1).repeat_interleave(self.codec.block)
            b = (self.codec.unit_error * blockmax)[: x.numel()]
            eps_out = 2.0**-8 if self.dtype == torch.bfloat16 else 0.0
            parts.append(b + (x.to(torch.float64).abs() + b) * eps_out)
        return torch.cat(parts)


def _time_per_op(group: Group, case: _Case, warmup: int, iters: int) -> float:
    import torch

    for _ in range(warmup):
        case.run()
    group.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        case.run()
    local = (time.perf_counter() - t0) / iters
    if group.pg is None:
        return local
    seconds = torch.tensor([local], dtype=torch.float64)
    group.all_reduce(seconds, op="avg")
    return float(seconds.item())


def run_bench(group: Group, config: BenchConfig, advance: Callable[[float], None] | None = None,
              on_row: Callable[[BenchRow], None] | None = None) -> BenchResult:
    """Run the sweep on ``group`` (every member calls this); every rank gets the same result. ``on_row`` sees
    each row as soon as it is measured."""
    import torch

    from tensorfabric.transfer.codecs import get_codec

    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[config.dtype]
    typesize = torch.tensor([], dtype=dtype).element_size()
    codec = get_codec(config.codec, config.block) if config.codec is not None else None
    n = group.size
    rows = []
    for index, size in enumerate(sizes(config.min_bytes, config.max_bytes, config.factor)):
        count, total_bytes = _counts(config.op, size, typesize, n)
        case = _Case(group, config.op, count, dtype, codec, seed=index)
        seconds = _time_per_op(group, case, config.warmup, config.iters)
        wrong: int | None = None
        max_error: float | None = None
        if config.check:
            case.reset()
            wrong, max_error = case.check(case.run())
            if group.pg is not None:
                flag = torch.tensor([wrong], dtype=torch.int64)
                group.all_reduce(flag)
                wrong = int(flag.item())
        algbw = total_bytes / 1e9 / seconds if seconds > 0 else 0.0
        wire = None
        if codec is not None:
            if config.op == "all_reduce":
                wire = codec.encoded_nbytes(codec.padded(count, n))
            else:
                wire = codec.encoded_nbytes(codec.padded(count)) * n
        row = BenchRow(
            size=total_bytes, count=count, type=DTYPES[config.dtype],
            redop="sum" if config.op in ("all_reduce", "reduce_scatter") else "none",
            root=0 if config.op == "broadcast" else -1, time_us=seconds * 1e6, algbw=algbw,
            busbw=algbw * bus_factor(config.op, n), wrong=wrong, wire_bytes=wire,
            max_error=max_error if codec is not None else None)
        rows.append(row)
        del case  # the next size allocates its own buffers; never hold two sizes at once
        if on_row is not None:
            on_row(row)
        if advance is not None:
            advance(1)
    ranks = tuple({"rank": e.global_rank, "local_rank": e.local_rank, "host": e.host, "pid": e.pid}
                  for e in group.table)
    # The result labels the uncompressed path "none", as its JSON and the table header always have.
    return BenchResult(config.op, n, group.backend, config.dtype, config.codec or "none", tuple(rows), group.transport,
                       group.engine, ranks)
