"""A paste made into lines a reader can use: envelopes stripped, commands and headings told apart from content.

:func:`normalise` never interprets the content; it only takes off what collectors, terminals and chat tools wrapped
around it, and records what it took off and where, so a reader can say what it read (:class:`~.report.ReadReport`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

from tensorfabric.intake.decode import decode
from tensorfabric.intake.envelopes import dominant_prefix, is_elision, strip_emphasis, unwrap

__all__ = ["MAX_LINE_CHARS", "Line", "LineKind", "Section", "Text", "normalise"]

MAX_LINE_CHARS = 65536
"""Longest line interpreted. No log, table or config line a tool prints is near this; longer lines (a concatenated
or corrupted file, a minified blob) are reported by number and skipped, so no reader ever scans them."""

LineKind = Literal["text", "command", "heading", "blank"]


@dataclass(frozen=True, slots=True)
class Line:
    number: int
    """1-based line number in the input as given (for a re-joined line, its first physical line)."""
    text: str
    """The content with every envelope taken off, right-stripped."""
    kind: LineKind = "text"
    """``command``: a shell-prompt line (``text`` is the command); ``heading``: a Markdown or ``==> f <==`` title."""
    origin: str = ""
    """The host, rank or pod a collector prefix or prompt named ("" when none did)."""


@dataclass(frozen=True, slots=True)
class Section:
    title: str
    """The command or heading that opened the section ("" for text before any)."""
    origin: str
    lines: tuple[Line, ...]

    def content(self) -> Iterator[Line]:
        return (line for line in self.lines if line.kind == "text")


@dataclass(frozen=True, slots=True)
class Text:
    source: str
    lines: tuple[Line, ...]
    total: int
    """Physical lines in the input."""
    envelope_counts: dict[str, int] = field(default_factory=dict)
    """What was taken off, and from how many lines (``{"Ray prefix": 412, "CRLF": 413}``)."""
    long_lines: tuple[int, ...] = ()
    elided: tuple[int, ...] = ()
    """Lines that were only an elision mark (``...``, ``[snip]``): the paste is known to be cut there."""
    joined: tuple[int, ...] = ()
    """First line numbers of hard-wrapped lines re-joined by :meth:`rejoined`."""

    @property
    def envelopes(self) -> tuple[str, ...]:
        return tuple(self.envelope_counts)

    def content(self) -> Iterator[Line]:
        return (line for line in self.lines if line.kind == "text")

    def sections(self, starts: Callable[[Line], str | None] | None = None) -> tuple[Section, ...]:
        """Contiguous blocks, split at command and heading lines and wherever ``starts(line)`` names a title (that
        line opens the new block and belongs to it)."""
        blocks: list[Section] = []
        title, origin, current = "", "", list[Line]()

        def close() -> None:
            if current or title:
                blocks.append(Section(title, origin or _common_origin(current), tuple(current)))

        for line in self.lines:
            named = starts(line) if starts is not None and line.kind == "text" else None
            if line.kind in ("command", "heading") or named is not None:
                close()
                title, origin = (named, "") if named is not None else (line.text, line.origin)
                current = [line] if named is not None else []
                continue
            current.append(line)
        close()
        return tuple(blocks)

    def by_origin(self) -> dict[str, tuple[Line, ...]]:
        groups: dict[str, list[Line]] = {}
        for line in self.lines:
            groups.setdefault(line.origin, []).append(line)
        return {name: tuple(lines) for name, lines in groups.items()}

    def rejoined(self, parses: Callable[[str], bool], *, most: int = 4) -> Text:
        """Hard-wrapped lines re-joined: a content line that does not parse takes up to ``most - 1`` following
        content lines (with and without a space between) when the joined text parses."""
        lines = self.lines
        out: list[Line] = []
        joined: list[int] = []
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.kind != "text" or parses(line.text):
                out.append(line)
                i += 1
                continue
            taken = _join(lines, i, parses, most)
            if taken is None:
                out.append(line)
                i += 1
                continue
            text, used = taken
            out.append(replace(line, text=text))
            joined.append(line.number)
            i += used
        if not joined:
            return self
        return replace(self, lines=tuple(out), joined=self.joined + tuple(joined))


def _join(lines: tuple[Line, ...], i: int, parses: Callable[[str], bool], most: int) -> tuple[str, int] | None:
    glued, spaced = lines[i].text, lines[i].text
    for k in range(i + 1, min(i + most, len(lines))):
        nxt = lines[k]
        if nxt.kind != "text" or nxt.origin != lines[i].origin:
            return None
        glued, spaced = glued + nxt.text.lstrip(), spaced + " " + nxt.text.lstrip()
        if parses(glued):
            return glued, k - i + 1
        if parses(spaced):
            return spaced, k - i + 1
    return None


def _common_origin(lines: list[Line]) -> str:
    origins = Counter(line.origin for line in lines if line.origin)
    return origins.most_common(1)[0][0] if origins else ""


_PROMPT_AT = re.compile(r"(?:\([\w.-]{1,64}\) )?[\w.-]{1,64}@([\w.-]{1,253})(?::[^\s$#%>]{0,512})? ?[$#%>] ?(.*)")
_PROMPT_BRACKET = re.compile(r"\[[\w.-]{1,64}@([\w.-]{1,253})(?: [^\]]{0,512})?\] ?[$#] ?(.*)")
_PROMPT_SWITCH = re.compile(r"([A-Za-z](?:[\w.-]{0,61}\w)?)(?:\(config[\w-]{0,64}\))?[#>] ?([a-z].*|$)")
_PROMPT_BARE = re.compile(r"[$%] +(\S.*)")
_HASH_COMMAND = re.compile(r"# {1,2}((?:sudo |\./|/)?([a-z][a-z0-9_.+/-]{0,64})(?: .*)?)")
# a root prompt "# cmd" must name something that looks like a program: table headers such as nccl-tests'
# "#  size  count  type" start with lowercase words too
_KNOWN_COMMANDS = frozenset((
    "cat", "rdma", "ethtool", "ibstat", "ibstatus", "ibv_devinfo", "show", "sudo", "lspci", "dmesg", "ip",
    "ibdev2netdev",
    "mlnx_qos", "kubectl", "docker", "python", "python3", "torchrun", "srun", "mpirun", "grep", "echo", "for", "ls",
    "journalctl", "tail", "head", "less", "nv", "vtysh", "sonic-cfggen", "redis-cli", "pfcstat", "pfcwd", "ucx_info",
    "nccl", "env", "printenv", "lldptool", "dcbtool", "tc", "sysctl", "perfquery", "show_gids", "watch", "bash", "sh",
    "show_counters", "ibv_rc_pingpong", "ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_write_lat", "rdma_statistic",
    "mlxlink", "mlxconfig", "mst", "ethtool-s", "nvidia-smi", "curl", "promtool"))
_HEADING = re.compile(r"#{2,6} +(\S.*)|# ([^a-z\s].*)|==> (.{1,4096}) <==|={3,} ?(\S.{0,4096}?) ?={3,}")
_FENCE = ("```", "~~~")
_EXPOSITION = ("HELP ", "TYPE ", "UNIT ", "EOF")


def _prompt(text: str, hash_prompts: bool) -> tuple[str, str] | None:
    """``(command, host)`` when the line is a shell or switch prompt."""
    first = text[:1]
    if first == "[":
        match = _PROMPT_BRACKET.match(text)
        return (match[2].strip(), match[1]) if match else None
    if first in "$%":
        match = _PROMPT_BARE.match(text)
        return (match[1].strip(), "") if match else None
    if first == "#":
        if not hash_prompts:
            return None
        match = _HASH_COMMAND.fullmatch(text)
        if match is None:
            return None
        program = match[2].rsplit("/", 1)[-1]
        # tool output starts lines with "# word" too ("# nccl-tests version 2.19.6"): only a known program, a
        # benchmark binary or a path reads as a root prompt
        if program not in _KNOWN_COMMANDS and not program.endswith(("_perf", "_test", ".sh", ".py")) and \
                not match[1].startswith(("./", "/", "sudo ")):
            return None
        return match[1].strip(), ""
    if "@" in text[:130]:
        match = _PROMPT_AT.match(text)
        if match is not None:
            return match[2].strip(), match[1]
    match = _PROMPT_SWITCH.match(text)
    if match is not None and (match[2] == "" or match[2][:1].islower()):
        return match[2].strip(), match[1]
    return None


def _heading(text: str, hash_prompts: bool) -> str | None:
    if text[:1] not in "#=" or (text[:1] == "#" and not hash_prompts):
        return None
    match = _HEADING.fullmatch(text)
    if match is None:
        return None
    title = next(g for g in match.groups() if g is not None).strip()
    # tool output that starts with "#" (nccl-tests' "# Avg bus bandwidth    : 12.3", Prometheus' "# HELP x") is
    # content, and a bare "=====" rule is decoration, not a title
    if "  " in title or " : " in title or "\t" in title or not title.strip("=") or title.startswith(_EXPOSITION):
        return None
    return title


def _classify(number: int, text: str, origin: str, counts: Counter[str], hash_prompts: bool,
              elided: list[int]) -> Line | None:
    stripped = text.strip()
    if not stripped:
        return Line(number, "", "blank", origin)
    if stripped.startswith(_FENCE):
        counts["Markdown fences"] += 1
        return None
    if is_elision(stripped):
        counts["elisions"] += 1
        elided.append(number)
        return None
    inner = strip_emphasis(stripped)
    if inner is not None:
        counts["Markdown emphasis"] += 1
        text = stripped = inner
    prompt = _prompt(stripped, hash_prompts)
    if prompt is not None:
        counts["shell prompts"] += 1
        command, host = prompt
        unwrapped = strip_emphasis(command)
        return Line(number, unwrapped if unwrapped is not None else command, "command", host or origin)
    heading = _heading(stripped, hash_prompts)
    if heading is not None:
        return Line(number, heading, "heading", origin)
    return Line(number, text.rstrip(), "text", origin)


def _physical(raw: str, counts: Counter[str]) -> str:
    if raw.endswith("\r"):
        raw = raw[:-1]
        counts["CRLF"] += 1
    if "\r" in raw:
        # a terminal capture: each carriage return redrew the line, so what a person saw is the last non-empty draw
        counts["carriage returns"] += 1
        raw = next((piece for piece in reversed(raw.split("\r")) if piece.strip()), "")
    return raw


def normalise(data: str | bytes, *, source: str = "<input>", what: str = "text", hash_prompts: bool = True,
              max_line_chars: int = MAX_LINE_CHARS) -> Text:
    """Lines of ``data`` with every envelope taken off; ParseError for binary or empty input.

    ``hash_prompts=False`` for formats whose ``#`` lines are comments (configs): then ``# cmd`` is not a prompt and
    ``# Title`` not a heading, and both reach the reader as text.
    """
    decoded, notes = decode(data, source=source, what=what)
    counts: Counter[str] = Counter(notes)
    physical = decoded.split("\n")
    if physical and physical[-1] == "":
        physical.pop()
    long_lines: list[int] = []
    stage: list[tuple[int, str, str]] = []
    for number, raw in enumerate(physical, start=1):
        if len(raw) > max_line_chars:
            long_lines.append(number)
            continue
        raw = _physical(raw, counts)
        for piece, origin in _expand(raw, counts):
            stage.append((number, piece, origin))
    stage = _strip_dominant(stage, counts, hash_prompts)
    lines: list[Line] = []
    elided: list[int] = []
    for number, text, origin in stage:
        line = _classify(number, text, origin, counts, hash_prompts, elided)
        if line is not None:
            lines.append(line)
    return Text(source, tuple(lines), len(physical), dict(counts), tuple(long_lines), tuple(elided))


def _countable(text: str, hash_prompts: bool) -> bool:
    """A line that can carry a collector prefix: not a fence, an elision, a prompt or a heading the paster added."""
    stripped = text.strip()
    return not (stripped.startswith(_FENCE) or is_elision(stripped) or _prompt(stripped, hash_prompts) is not None
                or _heading(stripped, hash_prompts) is not None)


def _strip_dominant(stage: list[tuple[int, str, str]], counts: Counter[str],
                    hash_prompts: bool) -> list[tuple[int, str, str]]:
    """Take off the ambiguous prefixes most lines carry (pdsh inside srun, say: one family at a time)."""
    tried: set[str] = set()
    while (prefix := dominant_prefix((text for _, text, _ in stage if _countable(text, hash_prompts)),
                                     exclude=tried)) is not None:
        tried.add(prefix.name)
        out: list[tuple[int, str, str]] = []
        for number, text, origin in stage:
            match = prefix.strip(text)
            if match is not None:
                counts[prefix.name] += 1
                rest, named = unwrap(text[match.end():], counts)
                text, origin = rest, named or prefix.origin(match) or origin
            out.append((number, text, origin))
        stage = out
    return stage


def _expand(raw: str, counts: Counter[str]) -> list[tuple[str, str]]:
    text, origin = unwrap(raw, counts)
    if "\n" not in text:
        return [(text, origin)]
    # a JSON record whose message holds several lines (a Fluent Bit record of a multi-line write)
    return [(unwrap(piece, counts)[0], origin) for piece in text.split("\n")]
