"""Parsers of deployed configurations: one module per format, selected from a registry.

``parse_deployed(path)`` picks the format from the file extension when it is unambiguous, else by sniffing
the content (first match in registry order), and raises :class:`~tensorfabric.errors.ParseError` when
neither decides. Every parser returns a :class:`~tensorfabric.fabric.deployed.Deployed` and fails only with
ParseError.

====================  ==========================================  =====================
format                what                                        extensions
====================  ==========================================  =====================
``sonic``             SONiC config_db.json (or a fragment)        .json
``nvue``              Cumulus ``nv set`` commands                 .nvue
``host-script``       host set-up bash (ours or doRoCE-style)     .sh .bash
``mlnx_qos``          ``mlnx_qos -i IF`` output                   .mlnx_qos
``nxos``              Cisco NX-OS running-config subset           .nxos
``eos``               Arista EOS running-config subset            .eos
``nccl-env``          ``/etc/nccl.conf`` or ``.env``              .env .conf
====================  ==========================================  =====================
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Protocol

from tensorfabric.errors import ParseError
from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.parsers import eos, host_script, mlnx_qos, nccl_env, nvue, nxos, sonic
from tensorfabric.registry import Registry

__all__ = ["FORMATS", "PARSERS", "detect_format", "parse_deployed", "parse_text"]


class _Parse(Protocol):
    def __call__(self, text: str, *, source: str = ..., device: str | None = ...) -> Deployed: ...


@dataclass(frozen=True, slots=True)
class _Entry:
    format: str
    suffixes: tuple[str, ...]
    sniff: Callable[[str], bool]
    parse: _Parse


def _entry(module: ModuleType) -> _Entry:
    return _Entry(module.FORMAT, module.SUFFIXES, module.sniff, module.parse)


# Sniffing order matters: specific markers first, the permissive NAME=value format last.
PARSERS: Registry[_Entry] = Registry("format")
for _module in (sonic, nvue, host_script, mlnx_qos, nxos, eos, nccl_env):
    PARSERS.register(_module.FORMAT, _entry(_module))
FORMATS: tuple[str, ...] = PARSERS.names()
_MAX_BYTES = 64 * 1024 * 1024


def detect_format(text: str, source: str = "<input>") -> str:
    """The registry format of ``text``: by extension of ``source`` first, then by content."""
    suffix = Path(source).suffix.lower()
    by_suffix = [e for e in PARSERS.values() if suffix in e.suffixes]
    # .conf is too common a suffix to trust on its own.
    if len(by_suffix) == 1 and (by_suffix[0].format != "nccl-env" or by_suffix[0].sniff(text)):
        return by_suffix[0].format
    for entry in PARSERS.values():
        if entry.sniff(text):
            return entry.format
    suffixes = ", ".join(sorted({s for e in PARSERS.values() for s in e.suffixes}))
    raise ParseError(
        f"cannot tell the format; name the file with one of {suffixes} or pass one of {', '.join(FORMATS)}",
        source=source, excerpt=text.lstrip()[:60],
    )


def parse_text(text: str, *, source: str = "<input>", fmt: str | None = None, device: str | None = None) -> Deployed:
    """Parse ``text`` as ``fmt`` (detected when ``None``)."""
    chosen = fmt or detect_format(text, source)
    if chosen not in PARSERS:
        raise ParseError(f"unknown format {chosen!r}; use one of {', '.join(FORMATS)}", source=source)
    return PARSERS.get(chosen).parse(text, source=source, device=device)


def parse_deployed(path: str | os.PathLike[str], *, fmt: str | None = None, device: str | None = None) -> Deployed:
    """Read and parse one deployed configuration file."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ParseError(f"cannot read: {exc.strerror or exc}", source=source) from None
    if len(data) > _MAX_BYTES:
        raise ParseError(f"file is {len(data)} bytes; at most {_MAX_BYTES} are accepted", source=source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"not UTF-8 text (byte {exc.start})", source=source) from None
    return parse_text(text, source=source, fmt=fmt, device=device)
