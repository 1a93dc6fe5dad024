"""``tensorfabric bench``: nccl-tests-style bandwidth sweep of one collective.

Three ways to get ranks: ``--nproc N`` spawns N local ranks (torchrun-style environment); under an existing
torchrun (or lab) launch it simply runs as that rank; ``--lab 2x1gbit`` runs one rank per host of a
network-namespace lab with shaped links. Rank 0 prints; the others stay quiet.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import click

from tensorfabric.cli._common import SIZE, progress
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
from tensorfabric.host.nccl_tests_table import footer_lines, format_table

if TYPE_CHECKING:
    from tensorfabric.transfer.bench_report import BenchReport

__all__ = ["OPS", "cli", "render"]

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")


def _bars(description: str, steps: int) -> AbstractContextManager[Callable[[float], None]]:
    """Rank 0's bar on this terminal (module level: the launcher pickles it for a spawned rank 0)."""
    return progress(description, steps, enabled=True)


def _emit(lines: str) -> None:
    """Rank 0's table lines as they are measured (module level, as ``_bars``)."""
    click.echo(lines)
    sys.stdout.flush()


def render(report: BenchReport) -> None:
    """The nccl-tests table; only its footer when the header and rows were printed as they were measured."""
    if report.streamed:
        click.echo("\n".join(footer_lines(report.result)))
    else:
        click.echo(format_table(report.result, report.config))


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
    from tensorfabric.transfer.bench import BenchConfig
    from tensorfabric.transfer.bench_report import plot_busbw
    from tensorfabric.transfer.bench_run import run_benchmark
    from tensorfabric.transfer.launch import placement

    if block % 2:
        raise InputError(f"--block: {block!r} must be an even integer such as 32, 64 or 128")
    refuse_existing({"--plot": plot}, force)
    if require_rdma:
        from tensorfabric.cli.env import require_rdma_here

        require_rdma_here()  # exit 2 here, not after ranks are spawned and fail one by one
    config = BenchConfig(op=op, min_bytes=min_bytes, max_bytes=max_bytes, factor=factor, warmup=warmup,
                         iters=iters, dtype=dtype, codec=codec, block=block, check=bool(check))
    where = placement(os.environ, ranks=nproc, lab=lab_spec, lab_name=lab_name)
    show = sys.stderr.isatty() and sys.stdout.isatty()
    # Rows streamed as they are measured stay on screen when the sweep is interrupted; a codec's plot overlays
    # the uncompressed curve from the same machine and setup.
    report = run_benchmark(config, where, timeout_s=timeout_s, engine=engine,
                           require="rdma" if require_rdma else "warn", baseline=plot is not None,
                           bars=_bars if show else None, emit=None if as_json else _emit)
    if report is None:  # a non-zero rank of a launched job: rank 0 reports
        return 0
    if plot is not None:
        plot_busbw(plot, report)
    if as_json:
        sys.stdout.write(report.to_json())
    else:
        render(report)
    return report.exit_code
