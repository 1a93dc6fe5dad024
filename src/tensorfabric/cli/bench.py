"""``tensorfabric bench``: nccl-tests-style bandwidth sweep of one collective.

Three ways to get ranks: ``--nproc N`` spawns N local ranks (torchrun-style environment); under an existing
torchrun (or lab) launch it simply runs as that rank; ``--lab 2x1gbit`` runs one rank per host of a
network-namespace lab with shaped links. Rank 0 prints; the others stay quiet.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from tensorfabric.cli._common import SIZE, emit_json, progress
from tensorfabric.cli._options import OUTPUT_FILE, codec_option, count, json_option, lab_options, timeout_option
from tensorfabric.errors import InputError

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")


def _run_rank(rank: int, config: Any, show_progress: bool, timeout_s: float) -> Any:
    """Body of one rank (module level so ``spawn`` can pickle it)."""
    from tensorfabric.transfer.bench import BenchConfig, run_bench, sizes
    from tensorfabric.transfer.group import init

    group = init(timeout_s=timeout_s)
    try:
        if group.rank == 0:
            steps = len(sizes(config.min_bytes, config.max_bytes, config.factor))
            with progress(f"{config.op} x{group.size}", steps, enabled=show_progress) as advance:
                return run_bench(group, config, advance)
        assert isinstance(config, BenchConfig)
        run_bench(group, config)
        return None
    finally:
        group.destroy()


def _header(result: Any, config: Any) -> list[str]:
    lines = [
        f"# tensorfabric bench: {result.op}  nranks {result.nranks}  backend {result.backend}"
        + (f"  transport {result.transport}" if result.transport else "")
        + f"  dtype {result.dtype}  codec {result.codec}",
    ]
    if config is not None:
        lines.append(f"# minBytes {config.min_bytes} maxBytes {config.max_bytes} step: {config.factor}(factor) "
                     f"warmup iters: {config.warmup} iters: {config.iters} validation: 1")
    codec = result.codec != "none"
    extra = f"  {'wire':>12}  {'maxerr':>9}" if codec else ""
    extra_units = f"  {'(B)':>12}  {'':>9}" if codec else ""
    lines += [
        "#",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>9}  {'algbw':>7}  "
        f"{'busbw':>7}  {'#wrong':>6}{extra}",
        f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>9}  {'(GB/s)':>7}  "
        f"{'(GB/s)':>7}  {'':>6}{extra_units}",
    ]
    return lines


def format_table(result: Any, config: Any = None) -> str:
    lines = _header(result, config)
    for r in result.rows:
        line = (f"  {r.size:>10}  {r.count:>12}  {r.type:>8}  {r.redop:>6}  {r.root:>6}  {r.time_us:>9.1f}  "
                f"{r.algbw:>7.3f}  {r.busbw:>7.3f}  {r.wrong:>6}")
        if r.wire_bytes is not None:
            line += f"  {r.wire_bytes:>12}  {r.max_error:>9.2e}"
        lines.append(line)
    lines += [f"# Out of bounds values : {result.wrong} {'OK' if result.wrong == 0 else 'FAILED'}",
              f"# Avg bus bandwidth    : {result.avg_busbw:.3f}", "#"]
    return "\n".join(lines)


def _plot(path: str, results: list[Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tensorfabric.fsutil import atomic_write_figure

    fig, ax = plt.subplots(figsize=(7, 4))
    for res in results:
        label = res.codec if res.codec != "none" else "uncompressed"
        ax.plot([r.size for r in res.rows], [r.busbw for r in res.rows], marker="o", ms=3, label=label)
    first = results[0]
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"{first.op}, {first.nranks} ranks, {first.backend}, {first.dtype}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    atomic_write_figure(path, fig, dpi=110, bbox_inches="tight")


def _sweep(config: Any, nproc: int, timeout_s: float) -> Any:
    from tensorfabric.transfer.launch import spawn, under_torchrun

    show = sys.stderr.isatty() and sys.stdout.isatty()
    if under_torchrun(os.environ):
        return _run_rank(int(os.environ["RANK"]), config, show, timeout_s)
    if nproc == 1:
        return _run_rank(0, config, show, timeout_s)
    return spawn(_run_rank, nproc, args=(config, show, timeout_s), timeout_s=timeout_s * 4 + 60)[0]


@click.command(name="bench", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--op", type=click.Choice(OPS), default="all_reduce", show_default=True, help="Collective to sweep.")
@click.option("--min", "min_bytes", type=SIZE, default="8", show_default=True, help="Smallest size (bytes).")
@click.option("--max", "max_bytes", type=SIZE, default="32M", show_default=True,
              help="Largest size (32M keeps a 2-core machine under a minute; nccl-tests users pass 128M).")
@click.option("--factor", type=count(2, 1024), default=2, show_default=True, help="Size multiplier.")
@click.option("--warmup", type=count(0, 100_000), default=5, show_default=True, help="Warm-up iterations.")
@click.option("--iters", type=count(1, 1_000_000), default=20, show_default=True, help="Timed iterations.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32", show_default=True)
@codec_option("Bench the compressed path with this codec.")
@click.option("--block", type=count(2, 1 << 20), default=64, show_default=True, help="Codec block size (even).")
@click.option("--nproc", type=count(1, 1024), default=1, show_default=True,
              help="Spawn this many local ranks (ignored under torchrun).")
@lab_options("needs root")
@timeout_option("120s", "How long any collective may take before it fails, e.g. 120s or 5min.")
@json_option("Print one JSON object instead of the table.")
@click.option("--plot", type=OUTPUT_FILE, default=None, help="Write busbw vs size to FILE.png.")
def cli(op: str, min_bytes: int, max_bytes: int, factor: int, warmup: int, iters: int, dtype: str,
        codec: str | None, block: int, nproc: int, lab_spec: str | None, lab_name: str | None, timeout_s: float,
        as_json: bool, plot: str | None) -> int:
    """Measure time, algbw and busbw of a collective over a size sweep, nccl-tests style."""
    from dataclasses import replace

    from tensorfabric.transfer.bench import BenchConfig

    if block % 2:
        raise InputError(f"--block: {block!r} must be an even integer such as 32, 64 or 128")
    _check_fits(max_bytes, 1 if lab_spec is not None else nproc)
    config = BenchConfig(op=op, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, warmup=warmup,
                         iters=iters, dtype=dtype, codec=codec, block=block)
    configs = [config]
    if plot is not None and config.codec is not None:
        # The overlay needs the uncompressed curve from the same machine and setup.
        configs.append(replace(config, codec=None))
    results: list[Any] = []
    for cfg in configs:
        if lab_spec is not None:
            results.append(_lab_sweep(lab_spec, lab_name, cfg, timeout_s))
        else:
            result = _sweep(cfg, nproc, timeout_s)
            if result is None:  # a non-zero rank under torchrun: rank 0 reports
                return 0
            results.append(result)
    result = results[0]
    if plot is not None:
        _plot(plot, results)
    if as_json:
        emit_json(result.to_dict())
    else:
        click.echo(format_table(result, config))
    return 1 if result.wrong else 0


# Each local rank holds the input, the output and a reference copy of the largest size at once.
_BUFFERS_PER_RANK = 3


def _check_fits(max_bytes: int, nranks: int, physical_bytes: int | None = None) -> None:
    """A sweep whose largest buffers exceed this machine's memory fails up front, not as an allocator crash."""
    if physical_bytes is None:
        physical_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    need = max_bytes * _BUFFERS_PER_RANK * nranks
    if need > physical_bytes:
        from tensorfabric.units import format_size

        raise InputError(f"--max {format_size(max_bytes)}: {nranks} rank(s) need about {format_size(need)} and "
                         f"this machine has {format_size(physical_bytes)} of memory; pass a smaller --max")


def _lab_sweep(spec: str, name: str | None, config: Any, timeout_s: float) -> Any:
    from tensorfabric.lab.launch import run_lab

    return run_lab(spec, _run_rank, (config, False, timeout_s), timeout_s=timeout_s * 4 + 120, name=name)[0]
