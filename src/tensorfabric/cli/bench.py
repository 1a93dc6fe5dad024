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
from tensorfabric.cli._options import (
    OUTPUT_FILE,
    codec_option,
    count,
    engine_options,
    force_option,
    json_option,
    lab_options,
    refuse_existing,
    timeout_option,
)
from tensorfabric.errors import InputError
from tensorfabric.host.nccl_tests_table import footer_lines, format_table, header_lines, row_line

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")


def _run_rank(rank: int, config: Any, show_progress: bool, timeout_s: float, engine: str = "auto",
              require: str = "warn", stream: bool = False) -> Any:
    """Body of one rank (module level so ``spawn`` can pickle it). With ``stream`` rank 0 prints the header
    and each row as it is measured (an interrupted sweep keeps its rows); the caller prints the footer."""
    from tensorfabric.transfer.bench import BenchConfig, BenchResult, run_bench, sizes
    from tensorfabric.transfer.group import init

    group = init(timeout_s=timeout_s, engine=engine, require_transport=require)
    try:
        if group.rank == 0:
            on_row = None
            if stream:
                bare = BenchResult(config.op, group.size, group.backend, config.dtype, config.codec or "none",
                                   transport=group.transport, engine=group.engine)
                click.echo("\n".join(header_lines(bare, config)))

                def on_row(row: Any) -> None:
                    click.echo(row_line(row))
                    sys.stdout.flush()
            steps = len(sizes(config.min_bytes, config.max_bytes, config.factor))
            with progress(f"{config.op} x{group.size}", steps, enabled=show_progress) as advance:
                return run_bench(group, config, advance, on_row)
        assert isinstance(config, BenchConfig)
        run_bench(group, config)
        return None
    finally:
        group.destroy()




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


def _sweep(config: Any, where: Any, timeout_s: float, engine: str = "auto", require: str = "warn",
           stream: bool = False) -> Any:
    """Rank 0's result wherever the ranks run (None on the other ranks of a launched job)."""
    from tensorfabric.transfer.bench import rank_bytes
    from tensorfabric.transfer.launch import launch

    # Lab hosts are namespaces of this machine: their ranks share its memory, as local ranks do.
    _check_memory(rank_bytes(config, where.ranks), where.local_ranks, config)
    lab = where.kind == "lab"
    # Inside a namespace rank 0 draws no bars, and its rows come back with its result.
    show = not lab and sys.stderr.isatty() and sys.stdout.isatty()
    args = (config, show, timeout_s, engine, require, stream and not lab)
    return launch(_run_rank, where, args=args, timeout_s=timeout_s * 4 + (120 if lab else 60)).get(0)


def _check_memory(per_rank: int, local_ranks: int, config: Any, meminfo: str = "/proc/meminfo") -> None:
    """InputError before any rank starts when the sweep cannot fit in this host's available memory."""
    from tensorfabric.units import format_size

    try:
        with open(meminfo) as handle:
            fields = dict(line.split(":", 1) for line in handle if ":" in line)
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return  # not Linux, or an unreadable meminfo: nothing to check against
    if per_rank * local_ranks > available:
        raise InputError(f"--max {format_size(config.max_bytes)}: {config.op} needs about {format_size(per_rank)} "
                         "per rank, "
                         f"{format_size(per_rank * local_ranks)} for {local_ranks} rank(s) on this host, but only "
                         f"{format_size(available)} of memory is available; lower --max")


@click.command(name="bench", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--op", type=click.Choice(OPS), default="all_reduce", show_default=True, help="Collective to sweep.")
# nccl-tests' short flags (-b -e -f -g -n -w -c) as well: torchrun's own parser takes `--max` for an abbreviation
# of its `--max-restarts` and stops, while single-letter flags it does not define pass through to the module
@click.option("-b", "--min", "min_bytes", type=SIZE, default="8", show_default=True, help="Smallest size (bytes).")
@click.option("-e", "--max", "max_bytes", type=SIZE, default="32M", show_default=True,
              help="Largest size (32M keeps a 2-core machine under a minute; nccl-tests users pass 128M).")
@click.option("-f", "--factor", type=count(2, 1024), default=2, show_default=True, help="Size multiplier.")
@click.option("-w", "--warmup", type=count(0, 100_000), default=5, show_default=True, help="Warm-up iterations.")
@click.option("-n", "--iters", type=count(1, 1_000_000), default=20, show_default=True, help="Timed iterations.")
@click.option("-c", "--check", type=click.IntRange(0, 1), default=1, show_default=True,
              help="Verify every result (1) or not (0; #wrong shows N/A), as nccl-tests' -c.")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16"]), default="float32", show_default=True)
@codec_option("Bench the compressed path with this codec.")
@click.option("--block", type=count(2, 1 << 20), default=64, show_default=True, help="Codec block size (even).")
@click.option("-g", "--nproc", type=count(1, 1024), default=1, show_default=True,
              help="Spawn this many local ranks (ignored under torchrun); nccl-tests' -g.")
@lab_options("needs root")
@timeout_option("120s", "How long any collective may take before it fails, e.g. 120s or 5min.")
@engine_options("tensors up to 64 KiB")
@json_option("Print one JSON object instead of the table.")
@click.option("--plot", type=OUTPUT_FILE, default=None, help="Write busbw vs size to FILE.png.")
@force_option("--plot's file")
def cli(op: str, min_bytes: int, max_bytes: int, factor: int, warmup: int, iters: int, check: int, dtype: str,
        codec: str | None, block: int, nproc: int, lab_spec: str | None, lab_name: str | None, timeout_s: float,
        engine: str, require_rdma: bool, as_json: bool, plot: str | None, force: bool) -> int:
    """Measure time, algbw and busbw of a collective over a size sweep, nccl-tests style.

    \b
    Under a launcher, use nccl-tests' short flags (torchrun mistakes --max for its --max-restarts):
      torchrun --nnodes 2 --nproc-per-node 1 --node-rank $NODE_RANK --master-addr $HEAD \\
          --master-port 29500 -m tensorfabric bench -b 8 -e 128M -f 2
      srun --nodes 2 --ntasks-per-node 1 bash -c 'torchrun --nnodes 2 --nproc-per-node 1 \\
          --node-rank $SLURM_NODEID --master-addr $HEAD --master-port 29500 -m tensorfabric bench -b 8 -e 128M'
    """
    from dataclasses import replace

    from tensorfabric.transfer.bench import BenchConfig
    from tensorfabric.transfer.launch import placement

    if block % 2:
        raise InputError(f"--block: {block!r} must be an even integer such as 32, 64 or 128")
    refuse_existing({"--plot": plot}, force)
    if require_rdma:
        from tensorfabric.cli.env import require_rdma_here

        require_rdma_here()  # exit 2 here, not after ranks are spawned and fail one by one
    config = BenchConfig(op=op, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, warmup=warmup,
                         iters=iters, dtype=dtype, codec=codec, block=block, check=bool(check))
    configs = [config]
    if plot is not None and config.codec is not None:
        # The overlay needs the uncompressed curve from the same machine and setup.
        configs.append(replace(config, codec=None))
    results: list[Any] = []
    require = "rdma" if require_rdma else "warn"
    where = placement(os.environ, ranks=nproc, lab=lab_spec, lab_name=lab_name)
    # Streaming rows as they are measured keeps them when the sweep is interrupted (not from lab hosts).
    streamed = where.kind != "lab" and not as_json
    for index, cfg in enumerate(configs):
        result = _sweep(cfg, where, timeout_s, engine, require, stream=streamed and index == 0)
        if result is None:  # a non-zero rank of a launched job: rank 0 reports
            return 0
        results.append(result)
    result = results[0]
    if plot is not None:
        _plot(plot, results)
    if as_json:
        emit_json(result.to_dict())
    elif streamed:
        click.echo("\n".join(footer_lines(result)))
    else:
        click.echo(format_table(result, config))
    return 1 if result.wrong else 0

