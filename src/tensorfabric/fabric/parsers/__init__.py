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
``junos``             Junos ``class-of-service`` brace config     .junos
``dell-sonic``        Dell Enterprise SONiC CLI running-config    .dellsonic
``cumulus-datapath``  Cumulus traffic.conf / qos_features.conf    .traffic_conf
``nvue-show``         ``nv show qos roce`` output                 .nvshow
====================  ==========================================  =====================

Sniffing tries every format whose markers appear, in registry order, and keeps the first that parses into a
record with facts; a format that parses but understands nothing is refused, never returned as an empty record.
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
from tensorfabric.fabric.parsers import (
    cumulus_datapath,
    dell_sonic,
    eos,
    host_script,
    junos,
    mlnx_qos,
    nccl_env,
    nvue,
    nvue_show,
    nxos,
    sonic,
)
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
for _module in (sonic, junos, nvue_show, nvue, cumulus_datapath, host_script, mlnx_qos, dell_sonic, nxos, eos,
                nccl_env):
    PARSERS.register(_module.FORMAT, _entry(_module))
FORMATS: tuple[str, ...] = PARSERS.names()
_MAX_BYTES = 64 * 1024 * 1024


def _candidates(text: str, source: str) -> list[_Entry]:
    suffix = Path(source).suffix.lower()
    by_suffix = [e for e in PARSERS.values() if suffix in e.suffixes]
    # .conf is too common a suffix to trust on its own.
    if len(by_suffix) == 1 and (by_suffix[0].format != "nccl-env" or by_suffix[0].sniff(text)):
        return by_suffix
    return [e for e in PARSERS.values() if e.sniff(text)]


def _undecided(text: str, source: str) -> ParseError:
    suffixes = ", ".join(sorted({s for e in PARSERS.values() for s in e.suffixes}))
    return ParseError(
        f"cannot tell the format; name the file with one of {suffixes} or pass --format with one of "
        f"{', '.join(FORMATS)}", source=source, excerpt=text.lstrip()[:60],
    )


def detect_format(text: str, source: str = "<input>") -> str:
    """The registry format of ``text``: by extension of ``source`` first, then by content."""
    found = _candidates(text, source)
    if not found:
        raise _undecided(text, source)
    return found[0].format


def _by_name(fmt: str, source: str) -> _Entry:
    if fmt in PARSERS:
        return PARSERS.get(fmt)
    raise ParseError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}", source=source)


def parse_text(text: str, *, source: str = "<input>", fmt: str | None = None, device: str | None = None) -> Deployed:
    """Parse ``text`` as ``fmt``; when ``None``, as the first detected format that understands it."""
    found = [_by_name(fmt, source)] if fmt is not None else _candidates(text, source)
    if not found:
        raise _undecided(text, source)
    first_error: ParseError | None = None
    for entry in found:
        try:
            record = entry.parse(text, source=source, device=device)
        except ParseError as exc:
            first_error = first_error or exc
            continue
        if record.has_facts():
            return record
        first_error = first_error or ParseError(
            f"read as {entry.format} but found nothing a lint rule can check; pass --format if it is another "
            "dialect", source=source, excerpt=text.lstrip()[:60])
    assert first_error is not None
    raise first_error


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
