"""Option definitions shared by every verb: one spelling, one type and one range check per concept.

``--json`` (machine output), ``--timeout`` (a duration with units, finite and positive), ``--codec`` (a registered
codec or ``none``), ``--fabric FILE`` (a fabric spec), ``--lab SPEC`` / ``--lab-name NAME``, output paths checked
before any work starts, and :class:`RegistryChoice`, whose choices are a registry's ``names()`` read when first
needed (so ``--help`` of one verb never imports another subsystem).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from tensorfabric.cli._common import DURATION
from tensorfabric.errors import InputError
from tensorfabric.registry import Registry, resolve

__all__ = ["OUTPUT_DIR", "OUTPUT_FILE", "RegistryChoice", "codec_option", "count", "fabric_option", "force_option",
           "json_option", "lab_options", "refuse_existing", "timeout_option"]

F = TypeVar("F", bound=Callable[..., Any])


class RegistryChoice(click.Choice):  # type: ignore[type-arg]
    """``click.Choice`` over ``registry.names()`` (plus ``extra``), looked up on first use.

    ``registry`` is a :class:`Registry` or its ``module:attr`` so the CLI module need not import it.
    """

    def __init__(self, registry: Registry[Any] | str, *, extra: Sequence[str] = (),
                 order: Callable[[Sequence[str]], Sequence[str]] = tuple) -> None:
        self._registry = registry
        self._extra = tuple(extra)
        self._order = order
        self._choices: tuple[str, ...] | None = None
        self.case_sensitive = True

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        if self._choices is None:
            registry = resolve(self._registry) if isinstance(self._registry, str) else self._registry
            assert isinstance(registry, Registry), f"{self._registry!r} is not a Registry"
            self._choices = (*self._order(registry.names()), *self._extra)
        return self._choices

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:
        self._choices = tuple(value)


def json_option(help: str = "Machine output: one JSON document on stdout.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help)


def timeout_option(default: str, help: str) -> Callable[[F], F]:
    """``--timeout`` as a duration with units (``120s``, ``5min``; a bare number is seconds), finite and > 0."""
    return click.option("--timeout", "timeout_s", type=DURATION, default=default, show_default=True, help=help)


def _codec(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # "No codec" is None in the library; the command line spells it "none".
    return None if value in (None, "none") else value


def codec_option(help: str) -> Callable[[F], F]:
    """``--codec NAME``: a registered codec, or ``none`` (the default) for the uncompressed path."""
    choice = RegistryChoice("tensorfabric.transfer.codecs:CODECS", extra=("none",),
                            order=lambda names: sorted(n for n in names if n != "none"))
    return click.option("--codec", type=choice, default="none", show_default=True, callback=_codec, help=help)


def fabric_option(help: str = "Fabric spec (YAML).", *, required: bool = False) -> Callable[[F], F]:
    """``--fabric FILE``: the one way every verb takes a fabric spec."""
    if required:  # click 8.5 treats an explicit default=None as a value and then never enforces required
        return click.option("--fabric", "fabric_path", type=click.Path(dir_okay=False), required=True,
                            metavar="FILE", help=help)
    return click.option("--fabric", "fabric_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                        help=help)


def lab_options(what: str) -> Callable[[F], F]:
    """``--lab NxRATE`` and ``--lab-name NAME`` (so two users on one host can pick their labs' names)."""
    def decorate(fn: F) -> F:
        fn = click.option("--lab-name", default=None, metavar="NAME",
                          help="Name of the lab --lab builds (default: one derived from the process id).")(fn)
        return click.option("--lab", "lab_spec", default=None, metavar="SPEC",
                            help=f"Run one rank per host of a network-namespace lab, e.g. 2x1gbit ({what}).")(fn)
    return decorate


def engine_options(what: str) -> Callable[[F], F]:
    """``--engine auto|torch|nixl`` and ``--require-rdma``: which path small tensors take, and whether a transport
    other than RDMA (a silent shared-memory or TCP fallback) is an error."""
    def decorate(fn: F) -> F:
        fn = click.option("--require-rdma", is_flag=True,
                          help="Fail unless the transport UCX/NCCL report is RDMA (no silent shm/TCP fallback).")(fn)
        from tensorfabric.transfer.engines import ENGINE_CHOICES

        return click.option("--engine", type=click.Choice(ENGINE_CHOICES), default="auto",
                            show_default=True,
                            help=f"nixl: {what} through NIXL/UCX one-sided writes; torch: all through "
                                 "torch.distributed; auto: nixl when installed.")(fn)
    return decorate


def count(low: int, high: int | None = None) -> click.IntRange:
    """An integer range every integer flag declares (``None``: no upper bound)."""
    return click.IntRange(low, high)


class _Output(click.Path):
    """A path this command will write: its directory (or nearest existing ancestor) must be a writable directory.

    Checked while parsing, so a typo in ``--plot`` fails in a second, not after a ten-minute sweep.
    """

    def __init__(self, *, directory: bool) -> None:
        super().__init__(dir_okay=directory, file_okay=not directory)
        self._directory = directory

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        path = Path(os.fsdecode(super().convert(value, param, ctx)))
        if not self._directory and path.is_dir():
            self.fail(f"{str(path)!r} is a directory; give a file name", param, ctx)
        parent = path if self._directory else path.parent
        existing = next(p for p in (parent, *parent.parents) if p.exists() or p == p.parent)
        if not existing.is_dir():
            self.fail(f"{str(existing)!r} is not a directory", param, ctx)
        if not os.access(existing, os.W_OK | os.X_OK):
            self.fail(f"directory {str(existing)!r} is not writable (read-only or no permission); "
                      "pick another location", param, ctx)
        return str(path)


OUTPUT_FILE = _Output(directory=False)
OUTPUT_DIR = _Output(directory=True)


def force_option(what: str) -> Callable[[F], F]:
    """``--force``: the one spelling, on every verb that writes, for replacing a file that exists."""
    return click.option("--force", is_flag=True, help=f"Replace {what} when it already exists.")


def refuse_existing(outputs: Mapping[str, str | None], force: bool) -> None:
    """InputError naming the flag when a file it would write exists (or is a symlink) and ``--force`` is not given.

    Writes go through a temporary file and ``os.replace``, which replaces a symlink itself rather than its target,
    so with ``--force`` nothing outside the named path is ever touched.
    """
    for flag, path in outputs.items():
        if path and not force and os.path.lexists(path):
            kind = "is a symbolic link" if os.path.islink(path) else "exists"
            raise InputError(f"{flag} {path!r} {kind}; pass --force to replace it or pick another name")
