"""Entry point: ``tensorfabric <verb>`` and ``python -m tensorfabric``.

Verbs live one per module and are imported only when used, so ``tensorfabric fabric ...`` never pays for
torch. This is the only place that turns errors into messages and exit codes:

* 0 -- fine; 1 -- the command worked and found problems (error findings, alerts, wrong results, a failed
  source) or a runtime failure such as a TransferError; 2 -- bad input or usage (one line naming the value and
  the accepted form) or an environment the user must fix: a busy port, an unresolvable host, a missing or
  unwritable directory, a full disk, a size that cannot be allocated; 130 / 143 / 129 -- stopped by SIGINT,
  SIGTERM or SIGHUP (all three run the same cleanup: ranks reaped, labs torn down, temporary files removed).

No traceback reaches the user: anything unexpected is one line naming the exception (exit 1), and ``--debug``
prints the traceback as well. The README's exit-code table is tested row by row in tests/test_cli_exit_codes.py.
"""

from __future__ import annotations

import errno
import logging
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import click

from tensorfabric import __version__
from tensorfabric.errors import InputError, Interrupted, TensorFabricError
from tensorfabric.registry import Registry
from tensorfabric.signals import terminate_as_interrupt

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
    "fleet": "tensorfabric.cli.fleet:cli",
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


_state: dict[str, bool] = {"debug": False}


@click.group(cls=LazyGroup, lazy=VERBS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="tensorfabric")
@click.option("-v", "--verbose", count=True, help="More log output on stderr (-vv for debug).")
@click.option("--debug", is_flag=True, help="Print the traceback of an error as well as its one-line message.")
def cli(verbose: int, debug: bool) -> None:
    """tensorfabric: LLM inference on RoCE fabrics -- run, prove, configure, watch, simulate."""
    _state["debug"] = debug
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")


# OS errors the user fixes in their environment (exit 2); anything else from the OS is a runtime failure (exit 1).
_USER_ERRNOS = frozenset({errno.EADDRINUSE, errno.EADDRNOTAVAIL, errno.EACCES, errno.EPERM, errno.ENOENT,
                          errno.ENOTDIR, errno.EISDIR, errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.EEXIST,
                          errno.ENAMETOOLONG, errno.ELOOP, errno.EMFILE, errno.ENOMEM})


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _os_error(exc: OSError) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{str(exc.filename)!r}: {reason}" if exc.filename else reason


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (never raises for expected failures)."""
    args = list(sys.argv[1:] if argv is None else argv)
    _state["debug"] = False
    try:
        with terminate_as_interrupt():
            code = _main(args)
    except Interrupted as exc:  # a signal that arrived between the verb's end and the handler's removal
        code = _interrupted(exc)
    return code


def _interrupted(exc: BaseException | None) -> int:
    if isinstance(exc, Interrupted):
        click.echo(f"terminated by {exc}", err=True)
        return exc.exit_code
    click.echo("interrupted", err=True)
    return 130


def _debug() -> None:
    if _state["debug"]:
        traceback.print_exc(file=sys.stderr)
        detail = getattr(sys.exc_info()[1], "detail", None)
        if callable(detail):  # errors that carry other processes' tracebacks (spawned ranks)
            print(detail(), file=sys.stderr)


def _main(args: list[str]) -> int:
    try:
        result = cli.main(args=args, prog_name="tensorfabric", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return 2
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "tensorfabric"
        click.echo(f"{where}: error: {_one_line(exc.format_message())}{_hint(exc)}", err=True)
        return 2
    except click.exceptions.Abort as exc:
        # click turns KeyboardInterrupt (and so Interrupted) into Abort; the signal is its cause.
        if exc.__cause__ is not None:
            return _interrupted(exc.__cause__)
        click.echo("aborted", err=True)
        return 130
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except InputError as exc:
        _debug()
        click.echo(f"tensorfabric: error: {_one_line(str(exc))}", err=True)
        return 2
    except TensorFabricError as exc:
        _debug()
        name = getattr(exc, "display_name", type(exc).__name__)
        click.echo(f"tensorfabric: {name + ': ' if name else ''}{_one_line(str(exc))}", err=True)
        return 1
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    except MemoryError:
        _debug()
        click.echo("tensorfabric: error: not enough memory for the requested sizes; ask for less", err=True)
        return 2
    except OSError as exc:
        _debug()
        user = exc.errno in _USER_ERRNOS or _is_resolver_error(exc)
        click.echo(f"tensorfabric: error: {_one_line(_os_error(exc))}", err=True)
        return 2 if user else 1
    except Exception as exc:  # noqa: BLE001 -- the promise is: no traceback without --debug
        _debug()
        click.echo(f"tensorfabric: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
                   "(run with --debug for the traceback)", err=True)
        return 1
    if result is None:
        return 0
    return int(result)


def _hint(exc: click.UsageError) -> str:
    """A spec file given as an argument: every verb takes it as --fabric FILE (one spelling)."""
    message = exc.format_message()
    if "unexpected extra argument" in message and (".yaml" in message or ".yml" in message):
        return "; give the spec as --fabric FILE"
    return ""


def _is_resolver_error(exc: OSError) -> bool:
    import socket

    return isinstance(exc, socket.gaierror)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
