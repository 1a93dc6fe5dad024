"""Entry point: ``tensorfabric <verb>`` and ``python -m tensorfabric``.

Verbs live one per module and are imported only when used, so ``tensorfabric fabric ...`` never pays for
torch. This is the only place that turns errors into messages and exit codes:

* 0 -- fine; 1 -- the command worked and found problems (error findings, alerts, wrong results) or a
  runtime failure such as a TransferError; 2 -- bad input or usage (one line naming the value and the
  accepted form).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import Any

import click

from tensorfabric import __version__
from tensorfabric.errors import InputError, TensorFabricError
from tensorfabric.registry import Registry

__all__ = ["VERBS", "cli", "main"]

# name -> "module:attribute". The registry is the single list of verbs; adding one is one line here.
VERBS: Registry[click.Command] = Registry("verb", lazy={
    "run": "tensorfabric.cli.run:cli",
    "bench": "tensorfabric.cli.bench:cli",
    "doctor": "tensorfabric.cli.doctor:cli",
    "env": "tensorfabric.cli.env:cli",
    "fabric": "tensorfabric.cli.fabric:cli",
    "monitor": "tensorfabric.cli.monitor:cli",
    "simulate": "tensorfabric.cli.simulate:cli",
    "lab": "tensorfabric.cli.lab:cli",
    "model": "tensorfabric.cli.model:cli",
})


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def __init__(self, *args: Any, lazy: Registry[click.Command], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy.names()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self._lazy:
            command = self._lazy.get(cmd_name)
            assert isinstance(command, click.Command), f"verb {cmd_name!r} is not a click command"
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, lazy=VERBS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="tensorfabric")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-vv for debug).")
def cli(verbose: int) -> None:
    """tensorfabric: LLM inference on RoCE fabrics -- run, prove, configure, watch, simulate."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises for expected failures)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="tensorfabric", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return 2
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "tensorfabric"
        click.echo(f"{where}: error: {_one_line(exc.format_message())}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except InputError as exc:
        click.echo(f"tensorfabric: error: {_one_line(str(exc))}", err=True)
        return 2
    except TensorFabricError as exc:
        click.echo(f"tensorfabric: {type(exc).__name__}: {_one_line(str(exc))}", err=True)
        return 1
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    if result is None:
        return 0
    return int(result)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
