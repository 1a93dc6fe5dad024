"""Readers of deployed configurations: one module per dialect, selected from a registry.

``parse_deployed(path)`` and ``parse_text(text)`` put the text through the one intake
(:func:`tensorfabric.intake.normalise`: prompts, fences, ``...`` elisions, CRLF, collector prefixes taken off), score
every dialect's markers on what is left, and read it with the best-scoring dialect that understands it. The record
carries how it was chosen (:class:`~tensorfabric.fabric.deployed.Detection`: "detected as NX-OS: 14 markers
(policy-map type network-qos, ...); next EOS with 3") and what was read (a
:class:`~tensorfabric.intake.ReadReport`: lines used, lines not understood, warnings).

Readers follow the intake contract: a statement they do not understand is skipped and listed, a malformed value
is a warning naming its line, a reference the excerpt does not resolve leaves that fact unknown. ParseError (exit
2) only for not-text, empty input, a raw Jinja template, or a text in which no dialect recognises a QoS fact (the
error says what was expected and shows the first line). ``--format X`` that understands nothing is such an error,
never an empty record that lints clean.

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
``sonic-redis``       ``redis-cli``/``sonic-db-cli`` hgetall      .redis
``nvue-yaml``         NVUE startup.yaml / ``nv config show``      .yaml .yml
``dell-os10``         Dell OS10 running-config subset             .os10
``onyx``              NVIDIA Onyx / MLNX-OS running-config        .onyx
``avd``               Arista AVD structured config (YAML)         .avd.yml .avd.yaml
====================  ==========================================  =====================
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Literal

from tensorfabric.errors import InputError, ParseError
from tensorfabric.fabric.deployed import Deployed, Detection
from tensorfabric.fabric.parsers import (
    avd,
    cumulus_datapath,
    dell_os10,
    dell_sonic,
    eos,
    host_script,
    junos,
    mlnx_qos,
    nccl_env,
    nvue,
    nvue_show,
    nvue_yaml,
    nxos,
    onyx,
    sonic,
    sonic_redis,
)
from tensorfabric.fabric.parsers._read import Reading, reading
from tensorfabric.fsutil import read_input
from tensorfabric.intake import MAX_LINE_CHARS, Line, Tally
from tensorfabric.registry import Registry

__all__ = ["FORMATS", "PARSERS", "detect", "detect_format", "parse_deployed", "parse_text"]


@dataclass(frozen=True, slots=True)
class _Entry:
    format: str
    name: str
    suffixes: tuple[str, ...]
    markers: tuple[tuple[str, re.Pattern[str]], ...]
    expected: str
    read: Callable[..., Deployed]


def _entry(module: ModuleType) -> _Entry:
    return _Entry(module.FORMAT, module.NAME, module.SUFFIXES, module.MARKERS, module.EXPECTED, module.read)


# Order breaks ties between equal scores: specific formats first, the permissive NAME=value format last.
PARSERS: Registry[_Entry] = Registry("format")
for _module in (sonic, sonic_redis, junos, nvue_show, nvue, nvue_yaml, avd,
                cumulus_datapath, host_script, mlnx_qos, dell_sonic, onyx, dell_os10,
                nxos, eos, nccl_env):
    PARSERS.register(_module.FORMAT, _entry(_module))
FORMATS: tuple[str, ...] = PARSERS.names()
_MAX_BYTES = 64 * 1024 * 1024
_CLEAR_LEAD = 3
"""Markers another dialect must show before an explicit --format with none of its own is refused."""
_MARKER_CHARS = 4096
"""Markers are looked for in the first characters of a line: every marker sits at a statement's start."""


def _score(entry: _Entry, lines: list[Line]) -> tuple[int, tuple[str, ...]]:
    """How many lines carry one of the dialect's markers, and which markers were seen (first seen first)."""
    count = 0
    seen: dict[str, None] = {}
    for line in lines:
        head = line.text[:_MARKER_CHARS].lstrip()
        # A comment names what it comments on ("! system qos is set elsewhere", "# pfc.port_group_list = [...]").
        head = head.lstrip("!#/ ") if head[:1] in "!#/" else head
        hit = False
        for name, pattern in entry.markers:
            if pattern.search(head):
                seen.setdefault(name, None)
                hit = True
        count += hit
    return count, tuple(seen)


def _ranked(r: Reading, source: str) -> list[tuple[_Entry, int, tuple[str, ...], Literal["content", "extension"]]]:
    lines = [line for line in r.text.lines if line.kind in ("text", "command")]
    scored = [(entry, *_score(entry, lines)) for entry in PARSERS.values()]
    order = {entry.format: i for i, entry in enumerate(PARSERS.values())}
    ranked = sorted(scored, key=lambda item: (-item[1], order[item[0].format]))
    suffix = Path(source).suffix.lower()
    double = "".join(Path(source).suffixes[-2:]).lower()  # leaf1.avd.yml names AVD, not any YAML
    by_suffix = [item for item in ranked if double in item[0].suffixes] or \
        [item for item in ranked if suffix in item[0].suffixes]
    out: list[tuple[_Entry, int, tuple[str, ...], Literal["content", "extension"]]] = []
    # An extension that names one dialect is tried first; a text it understands nothing of falls to content.
    if len(by_suffix) == 1 and (by_suffix[0][1] > 0 or by_suffix[0][0].format != "nccl-env"):
        out.append((*by_suffix[0], "extension"))
    out.extend((*item, "content") for item in ranked if item[1] > 0 and not (out and item[0] is out[0][0]))
    return out


def detect(text: str | bytes, source: str = "<input>") -> Detection:
    """How ``text`` would be read: the best-scoring dialect, its markers and the runner-up."""
    r = reading(text, source=source, label="configuration")
    ranked = _ranked(r, source)
    if not ranked:
        raise _undecided(r, source)
    return _detection(ranked, 0)


def _detection(ranked: list[tuple[_Entry, int, tuple[str, ...], Literal["content", "extension"]]],
               chosen: int) -> Detection:
    entry, score, markers, how = ranked[chosen]
    others = [item for i, item in enumerate(ranked) if i != chosen]
    runner = others[0] if others else None
    return Detection(entry.format, entry.name, how, score, markers,
                     runner[0].format if runner else None, runner[0].name if runner else None,
                     runner[1] if runner else 0)


def detect_format(text: str, source: str = "<input>") -> str:
    """The registry format of ``text``: by extension of ``source`` first, then by content."""
    return detect(text, source).format


def _first_line(r: Reading) -> str:
    first = next((line for line in r.text.lines if line.kind != "blank"), None)
    shown = f"; the first line is {first.text.strip()[:100]!r} (line {first.number})" if first else ""
    long = r.text.long_lines
    if long:
        shown += (f"; {len(long)} line(s) over {MAX_LINE_CHARS} characters skipped unread (line "
                  f"{', '.join(map(str, long[:3]))}{', ...' if len(long) > 3 else ''})")
    return shown


def _undecided(r: Reading, source: str) -> ParseError:
    names = ", ".join(f"{e.name} ({e.format})" for e in PARSERS.values())
    return ParseError(
        f"cannot tell the format: no line carries a QoS statement of any dialect{_first_line(r)}. Expected one of: "
        f"{names}; name the file with its extension or pass --format", source=source)


def _by_name(fmt: str, source: str) -> _Entry:
    if fmt in PARSERS:
        return PARSERS.get(fmt)
    raise ParseError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}", source=source)


def _understood_nothing(r: Reading, entry: _Entry, hint: str = "") -> ParseError:
    report = r.tally.report()
    warned = f"; {len(report.warnings)} warning(s), first: {str(report.warnings[0])[:200]}" if report.warnings else ""
    return ParseError(
        f"read as {entry.name} but found nothing a lint rule can check: no {entry.name} QoS, PFC or interface "
        f"settings (expected {entry.expected}){_first_line(r)}{warned}{hint}", source=r.source)


def parse_text(text: str | bytes, *, source: str = "<input>", fmt: str | None = None,
               device: str | None = None) -> Deployed:
    """Read ``text`` as ``fmt``; when ``None``, as the best-scoring dialect that understands it."""
    probe = reading(text, source=source, label="configuration")
    if fmt is not None:
        entry = _by_name(fmt, source)
        score, markers = _score(entry, [ln for ln in probe.text.lines if ln.kind in ("text", "command")])
        ranked = _ranked(probe, source)
        others = [item for item in ranked if item[0] is not entry]
        detection = Detection(entry.format, entry.name, "--format", score, markers,
                              others[0][0].format if others else None, others[0][0].name if others else None,
                              others[0][1] if others else 0)
        record, r = _read(probe, entry, device)
        hint = f"; the text looks like {others[0][0].name} ({others[0][1]} markers)" if others else ""
        if record is None:
            raise _understood_nothing(r, entry, hint)
        if score == 0 and others and others[0][1] >= _CLEAR_LEAD:
            # A generic line (an interface MTU) read under a dialect whose statements the text never uses is not
            # a reading of it: say what the text is instead of linting a sliver of it.
            raise ParseError(f"--format {fmt}: not one {entry.name} statement in the text{hint}; drop --format or "
                             f"pass --format {others[0][0].format}", source=source)
        return replace(record, detection=detection)
    ranked = _ranked(probe, source)
    if not ranked:
        raise _undecided(probe, source)
    first_error: ParseError | None = None
    for i, (entry, _, _, _) in enumerate(ranked):
        try:
            record, r = _read(probe, entry, device)
        except ParseError as exc:  # a hard limit of one reader (nesting, size): another dialect may still read it
            first_error = first_error or exc
            continue
        if record is not None:
            return replace(record, detection=_detection(ranked, i))
        first_error = first_error or _understood_nothing(r, entry)
    assert first_error is not None
    raise first_error


def _read(probe: Reading, entry: _Entry, device: str | None) -> tuple[Deployed | None, Reading]:
    """The record ``entry`` reads from the normalised text with its read report, or None when it understood nothing."""
    label = entry.name if entry.name.endswith(("config_db", "output", "file", "script", "roce")) else \
        f"{entry.name} config"
    r = Reading(probe.text, Tally(probe.text, label), probe.raw)
    record = entry.read(r, device=device)
    report = r.finish()
    if not report.used or not record.has_facts():
        return None, r
    return replace(record, read=report), r


def parse_deployed(path: str | os.PathLike[str], *, fmt: str | None = None, device: str | None = None) -> Deployed:
    """Read and parse one deployed configuration file."""
    source = str(path)
    # The one file gate: a FIFO with no writer or a device is refused from stat, before any open blocks. Its
    # refusal stays a ParseError naming the file, as every other reason this reader gives.
    what = "deployed config"
    try:
        data = read_input(source, what, max_bytes=_MAX_BYTES)
    except ParseError:
        raise
    except InputError as exc:
        reason = str(exc).removeprefix(f"{what} {source!r} ").removeprefix("cannot be read: ")
        raise ParseError(f"cannot read: {'it ' if reason.startswith('is ') else ''}{reason}", source=source) from None
    return parse_text(data, source=source, fmt=fmt, device=device)
