"""``file:PATH`` -- counters from any paste: NIC, RDMA, Prometheus text and switch CLI output, sniffed per block.

The text goes through the intake (:func:`~tensorfabric.intake.normalise`): prompts, timestamps, collector prefixes,
ANSI colours and Markdown come off, command and heading lines are told apart from output. It is then split into
sections at commands, headings and every line that opens a registered format (a table header, ``NIC
statistics:``, ``link mlx5_0/1``); each block is read by the format that opened it, else by the one its command
announces, else by the one that claims most of its lines (:data:`~.textformat.FORMATS`). What no format claims --
prose, headings, other programs' output -- is skipped and listed in the read report, never a source error.

Labels come from the paste: the host a prompt or collector prefix names (else the monitor's host), the device a
command or heading names (``ethtool -S eth2``, ``## mlx5_1``), else the file's stem (numbered when several blocks
name nothing); switch output is labelled with the switch the prompt names, else the file's stem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from tensorfabric.errors import InputError
from tensorfabric.intake import Line, ReadReport, Section, Tally, Text, normalise
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources.base import Reading, SourceContext
from tensorfabric.telemetry.sources.generic import GenericBudget
from tensorfabric.telemetry.sources.textformat import FORMATS, BlockReader, Context, CounterFormat, Sink, Store

__all__ = ["EXPECTED", "FileSource", "open_source", "read_counters"]

EXPECTED = ("counter output: `ethtool -S`, `rdma statistic show`, hw_counters dumps, Prometheus text, or switch "
            "CLI output (SONiC show pfc/queue/pfcwd/watermark, NX-OS, EOS, Junos, Mellanox SDK dumps)")

_MARK = "\u241e"  # an opener's section title: no command or heading text starts with this control picture
# Prometheus comment lines and table rules reach us as headings ("# TYPE x counter", "=====")
_COMMENT = re.compile(r"(?:HELP|TYPE|UNIT|EOF)(?: .*)?")
_ORNAMENT = re.compile(r"[=\-+*_~#| ]*")
# what a command line says about the device and port it printed
_DEVICE_IN_COMMAND = (
    re.compile(r"ethtool\s+(?:-S|--statistics)\s+([\w.:@-]{1,64})"),
    re.compile(r"show_counters\s+([\w.:-]{1,64})(?:\s+(?:-p\s+)?(\d{1,3}))?"),
    re.compile(r"link\s+([\w.-]{1,64})/(\d{1,3})"),
    re.compile(r"/sys/class/infiniband/([\w.-]{1,64})(?:/ports/(\d{1,3}))?"),
    re.compile(r"/sys/class/net/([\w.:@-]{1,64})/"),
)
# a heading that names a device (``## eth2 (mlx5_core)``, ``=== mlx5_1 ===``) starts a new device's block
_DEVICE_IN_HEADING = re.compile(
    r"\b((?:eth|ens|enp|eno|enP|ib|bond|mlx5_|mlx4_|bnxt_re|irdma|rdmap|rocep|roceP|efa_|hfi1_|qedr|erdma|rxe)"
    r"[\w.-]{0,40}?)(?=[\s:,()/]|$)")


@dataclass(slots=True)
class _Stream:
    """Where one host's (or one unnamed origin's) lines stand: the command in force and the block being read."""

    origin: str
    command: str = ""
    suggested: CounterFormat | None = None
    device: str = ""
    port: str = ""
    heading_device: str = ""
    block: BlockReader | None = None
    fmt: CounterFormat | None = None
    last: str = ""
    """The format of the last block read, to count sections as changes of format or context."""


class _Driver:
    def __init__(self, text: Text, ctx: SourceContext, name: str, stem: str, budget: GenericBudget) -> None:
        self.text = text
        self.ctx = ctx
        self.name = name
        self.stem = stem or "paste"
        self.tally = Tally(text, "counter output")
        self.formats = FORMATS.values()
        self.openers = tuple((f.name, f.opens) for f in self.formats)
        self.commands = tuple(f.command for f in self.formats if f.command is not None)
        self.store = Store(self.tally, budget)
        self.streams: dict[str, _Stream] = {}
        self.current = ""
        self.prompted = False
        self.time = ctx.clock()
        self.used_formats: dict[str, None] = {}
        self.nameless = 0
        self.sections = 0

    # context -------------------------------------------------------------------------------------------------
    def _context(self, stream: _Stream, fmt: CounterFormat, opened: bool) -> Context:
        device = stream.device or stream.heading_device
        fallback = self.stem
        if fmt.name == "ethtool" and opened and not device:
            # each "NIC statistics:" header is another NIC's dump: nameless ones are numbered, never merged
            self.nameless += 1
            fallback = self.stem if self.nameless == 1 else f"{self.stem}-{self.nameless}"
        return Context(source=self.name, time=self.time, host=stream.origin or self.ctx.host,
                       switch=stream.origin or self.stem, command=stream.command, device=device, port=stream.port,
                       fallback=fallback)

    def _stream(self, origin: str) -> _Stream:
        key = origin or self.current
        stream = self.streams.get(key)
        if stream is None:
            stream = self.streams[key] = _Stream(key)
        return stream

    def _command(self, stream: _Stream, command: str) -> None:
        self._close(stream)
        stream.command, stream.device, stream.port, stream.heading_device = command, "", "", ""
        stream.last = ""
        stream.suggested = next((f for f in self.formats if f.command is not None and f.command.search(command[:300])),
                                None)
        for pattern in _DEVICE_IN_COMMAND:
            match = pattern.search(command[:400])
            if match is not None:
                stream.device = match.group(1)
                stream.port = (match.group(2) or "") if match.re.groups >= 2 else ""
                break

    def _heading(self, stream: _Stream, title: str) -> None:
        match = _DEVICE_IN_HEADING.search(title[:200])
        if match is None or not any(c.isdigit() for c in match.group(1)):  # "## ibverbs notes" names no device
            return
        if stream.fmt is not None and stream.fmt.side == "nic":
            self._close(stream)
        # the latest name wins: a heading after a command's output names the next device's dump
        stream.heading_device, stream.device, stream.port, stream.last = match.group(1), "", "", ""

    # blocks --------------------------------------------------------------------------------------------------
    def _open(self, stream: _Stream, fmt: CounterFormat, *, opened: bool = False) -> None:
        self._close(stream)
        stream.fmt, stream.block = fmt, fmt.start(Sink(self.store, self._context(stream, fmt, opened)))
        if stream.last != fmt.name:
            self.sections += 1
            stream.last = fmt.name

    def _close(self, stream: _Stream) -> None:
        if stream.block is not None:
            stream.block.finish()
        stream.block, stream.fmt = None, None

    def _sniff(self, lines: tuple[Line, ...], at: int, stream: _Stream) -> CounterFormat | None:
        line = lines[at].text
        if stream.suggested is not None and stream.suggested.claims(line):
            return stream.suggested
        if not any(f.claims(line) for f in self.formats):
            return None
        scores = {f.name: 0 for f in self.formats}
        for later in lines[at:at + 400]:
            if later.kind == "text":
                for f in self.formats:
                    scores[f.name] += f.claims(later.text)
        best = max(self.formats, key=lambda f: scores[f.name])
        return best if scores[best.name] > 0 else None

    def _feed(self, stream: _Stream, lines: tuple[Line, ...], at: int) -> None:
        line = lines[at]
        if line.kind == "blank":
            if stream.block is not None:
                stream.block.feed(line)
            return
        if stream.block is not None:
            verdict = stream.block.feed(line)
            if verdict == "used":
                self.tally.use(line)
                self._seen(stream)
                return
            if verdict == "unknown":
                self.tally.not_understood(line)
                return
            assert stream.fmt is not None
            if stream.fmt.claims(line.text) or not any(f.claims(line.text) for f in self.formats):
                return  # prose between the rows of a table: skipped, and the block goes on
        fmt = self._sniff(lines, at, stream)
        if fmt is None:
            return
        self._open(stream, fmt)
        assert stream.block is not None
        verdict = stream.block.feed(line)
        if verdict == "used":
            self.tally.use(line)
            self._seen(stream)
        elif verdict == "unknown":
            self.tally.not_understood(line)

    def _seen(self, stream: _Stream) -> None:
        if stream.fmt is not None:
            self.used_formats[stream.fmt.label] = None

    # walk ----------------------------------------------------------------------------------------------------
    def run(self) -> tuple[list[Sample], ReadReport]:
        kinds = {line.text: line.kind for line in self.text.lines if line.kind in ("command", "heading")}
        for section in self.text.sections(starts=self._opener):
            self._section(section, kinds)
        for stream in self.streams.values():
            self._close(stream)
        self.tally.sections = max(1, self.sections)
        if self.used_formats:
            self.tally.format = f"counter output ({', '.join(self.used_formats)})"
        self.tally.require(EXPECTED)
        return list(self.store.samples.values()), self.tally.report()

    def _opener(self, line: Line) -> str | None:
        text = line.text
        for name, opens in self.openers:
            if opens(text):
                return _MARK + name
        # a command pasted without a prompt the intake knows ("show pfc counters" alone on a line, "# show_counters
        # mlx5_1"): the line names the device and the format of the output that follows
        command = text.strip().lstrip("#$").strip()
        if command[:1].islower() and len(command) < 300 and any(c.match(command) for c in self.commands) \
                and not any(f.claims(text) for f in self.formats):  # "hw_counters/np_cnp_sent:0" is output
            return command
        return None

    def _section(self, section: Section, kinds: Mapping[str, str]) -> None:
        title = section.title
        command = bool(title) and not title.startswith(_MARK) and (kinds.get(title) == "command" or title not in kinds)
        # the host a prompt names holds until the next prompt; a collector's origin (JSON records, kubectl) names
        # the host only where no prompt does
        if command:
            self.current, self.prompted = section.origin, True
        elif section.origin and not self.prompted:
            self.current = section.origin
        stream = self._stream(self.current)
        lines = section.lines
        if title.startswith(_MARK):
            fmt = FORMATS.get(title[len(_MARK):])
            self._open(stream, fmt, opened=True)
        elif command:
            self._command(stream, title)
            if title not in kinds and lines:
                lines = lines[1:]  # the bare command line itself opened this section
        elif title:
            self._heading(stream, title)
        # lines a collector prefixed with several hosts (pdsh, kubectl --prefix) are interleaved: each host's lines
        # are read in their own stream; lines all from one collector origin are this section's output
        interleaved = len({line.origin for line in lines if line.origin}) > 1
        for at in range(len(lines)):
            line = lines[at]
            target = self._stream(line.origin) if interleaved and line.origin else stream
            if at == 0 and title.startswith(_MARK):
                self._first(target, lines)
                continue
            self._feed(target, lines, at)

    def _first(self, stream: _Stream, lines: tuple[Line, ...]) -> None:
        """The opener line of a block opened by its format."""
        assert stream.block is not None
        verdict = stream.block.feed(lines[0])
        if verdict == "used":
            self.tally.use(lines[0])
            self._seen(stream)
        elif verdict == "unknown":
            self.tally.not_understood(lines[0])


def _demoted(text: Text) -> Text:
    """Headings that are a format's own lines (Prometheus comments, table rules) turned back into content."""
    changed = False
    lines: list[Line] = []
    for line in text.lines:
        if line.kind == "heading" and (_COMMENT.fullmatch(line.text[:4096]) or _ORNAMENT.fullmatch(line.text[:256])):
            restored = f"# {line.text}" if _COMMENT.fullmatch(line.text[:4096]) else "=" * 8
            lines.append(replace(line, text=restored, kind="text"))
            changed = True
        else:
            lines.append(line)
    return replace(text, lines=tuple(lines)) if changed else text


def read_counters(data: str | bytes, *, name: str, ctx: SourceContext, budget: GenericBudget,
                  stem: str = "") -> tuple[list[Sample], ReadReport]:
    """Samples and the read report for one paste; ParseError for not-text, empty, or nothing recognised."""
    text = _demoted(normalise(data, source=name, what=EXPECTED))
    return _Driver(text, ctx, name, stem, budget).run()


class FileSource:
    """``file:PATH``: the file is read again on every poll (an operator may paste a newer dump over it)."""

    def __init__(self, name: str, path: Path, ctx: SourceContext) -> None:
        self.name = name
        self._path = path
        self._ctx = ctx
        self._budget = GenericBudget(ctx.counters, name)
        self.last_read: ReadReport | None = None

    def _data(self) -> bytes:
        from tensorfabric.fsutil import read_input

        return read_input(self._path, self.name)

    def check(self) -> None:
        """ParseError when the file is not text, empty, or holds nothing that reads as counters."""
        read_counters(self._data(), name=self.name, ctx=self._ctx, budget=GenericBudget(self._ctx.counters, self.name),
                      stem=self._path.stem)

    def read(self) -> Reading:
        samples, report = read_counters(self._data(), name=self.name, ctx=self._ctx, budget=self._budget,
                                        stem=self._path.stem)
        self.last_read = report
        errors: list[str] = []
        self._budget.report(errors)
        return Reading(tuple(samples), tuple(errors), report)


def open_source(arg: str, ctx: SourceContext) -> FileSource:
    """``file:PATH``; the file is read once here, so a binary or empty file, or one where nothing reads as
    counters, is refused as bad input (one line, exit 2) instead of failing every poll."""
    path = Path(arg)
    if not arg or not path.is_file():
        raise InputError(f"file:{arg}: {arg!r} is not a file (expected {EXPECTED})")
    source = FileSource(f"file:{arg}", path, ctx)
    source.check()
    return source
