"""What every dialect reader shares: the intake, the tally, warnings instead of aborts, and cut-off pastes.

A config arrives as operators paste it: after a ``$ cat file`` prompt, inside a Markdown fence, with ``...`` where
they cut it, indented as a list item, or as a transcript of configuration-mode prompts
(``leaf1(config-pmap-c-qos)# set qos-group 3``). :func:`reading` puts it through the one intake
(:func:`tensorfabric.intake.normalise`) and gives the dialect reader a :class:`Reading`: the content lines with
their original numbers, transcript lines turned back into indented configuration, and a
:class:`~tensorfabric.intake.Tally` the reader marks as it goes.

The contract: a statement the reader understands is *used*; a malformed value in it is a *warning* naming the line
(:meth:`Reading.statement` turns the ParseError of a checked value into one) and the statement is skipped; a line
that carries QoS vocabulary but that no rule read is *not understood*; anything else is skipped. Only a text with
nothing recognised is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tensorfabric.errors import ParseError
from tensorfabric.fabric.parsers._common import Block
from tensorfabric.intake import Line, ReadReport, Tally, Text, normalise

__all__ = ["Marker", "Reading", "TemplateError", "bare", "config_lines", "markers", "reading", "tail_open"]

WHAT = "a switch or host QoS configuration"

# Words a QoS statement carries. A line holding one that no rule read is "not understood" (listed); other lines
# (descriptions, VLANs, routing) are "skipped". Looked for as substrings of the lowercased line with str's own
# search: a case-insensitive regex alternation of these words cost 0.11 s on one 64K-character line.
_QOS_WORDS = ("qos", "pfc", "priority", "flow-control", "ecn", "random-detect", "wred", "dscp", "cos", "queue",
              "pause", "watchdog", "watch-dog", "buffer", "mtu", "trust", "schedul", "traffic-class", "no-drop",
              "no-loss", "code-point", "forwarding-class", "congestion", "nccl_", "lossless", "headroom", "xoff",
              "xon", "cable")


def qos_like(text: str) -> bool:
    """Whether ``text`` carries a word of a QoS statement (any case, anywhere in it)."""
    low = text.lower()
    return any(word in low for word in _QOS_WORDS)


# Raw templates: Jinja/Go actions ({% ... %}, {{ ... }}) never occur in a rendered config or in valid JSON.
_TEMPLATE = re.compile(r"\{%|\{\{[^}\n]{0,200}\}\}")

# A switch prompt in configuration mode: NX-OS "leaf1(config-pmap-c-qos)# ", EOS "sw(config-if-Et1)#",
# Dell SONiC "sonic(conf-sched-policy-q)# ". The mode tells how deep the command sits.
_CONFIG_PROMPT = re.compile(
    r"[ \t]{0,8}[A-Za-z][\w.-]{0,62}[ \t]?\((conf(?:ig)?(?:-[\w/.:-]{0,96})?)\)[ \t]?#[ \t]?(.*)")
# Sub-sub-modes: NX-OS class inside a policy map (-c-, -c), EOS/Dell queue inside a profile/scheduler (txq-N, -q).
_DEEP_MODE = re.compile(r"-c(?:-|$)|txq|-q(?:-|$)")
_TOP_OPENERS = frozenset({"interface", "class-map", "policy-map", "system", "hostname", "hardware", "vlan", "router",
                          "line"})
_TOP_QOS = ("qos profile", "qos map", "qos wred-policy", "qos scheduler-policy")
_MID_OPENERS = frozenset({"class", "uc-tx-queue", "tx-queue", "mc-tx-queue", "queue"})
_LEAVE = frozenset({"end", "exit", "configure", "configure terminal", "conf t", "config", "commit", "copy"})


class TemplateError(ParseError):
    """The input is a template (Jinja or Go), not a configuration."""


@dataclass
class Reading:
    """One text being read: its lines, its tally and the bookkeeping that turns errors into warnings."""

    text: Text
    tally: Tally
    raw: tuple[str, ...]
    """Physical lines as given, for what the intake takes off but a config reader needs (prompt modes)."""
    _warned: set[int] = field(default_factory=set)
    _used: set[int] = field(default_factory=set)

    @property
    def source(self) -> str:
        return self.text.source

    def use(self, number: int | None) -> None:
        if number is not None:
            self.tally.use(number)
            self._used.add(number)

    def unread_under(self, roots: Iterable[Block]) -> None:
        """Lines inside a QoS block this reader used that no rule read: statements of the format it does not model.
        Interface blocks are left to the QoS vocabulary of :meth:`finish` (descriptions and VLANs are not QoS)."""
        for root in roots:
            if root.line in self._used and root.words[0] != "interface":
                for node in root.subtree():
                    if node.line not in self._used:
                        self.tally.not_understood(node.line)

    def unknown(self, number: int | None) -> None:
        if number is not None:
            self.tally.not_understood(number)

    def warn(self, number: int | None, message: str) -> None:
        self.tally.warn(number if number is not None else 0, message)
        if number is not None:
            self._warned.add(number)

    @contextmanager
    def statement(self, number: int | None) -> Iterator[None]:
        """Run the reading of one statement; a ParseError from a checked value becomes a warning on its line."""
        try:
            yield
        except ParseError as exc:
            self.warn(exc.line if exc.line is not None else number, bare(exc))

    def finish(self, label: str | None = None) -> ReadReport:
        """List QoS-looking lines no rule read as not understood; the report."""
        for line in self.text.lines:
            if line.kind == "command" and self.config_prompt(line) is None:
                continue  # a shell command (cat, show ...): not a statement of the configuration
            if line.kind in ("text", "command") and qos_like(line.text) and not _comment(line.text):
                self.tally.not_understood(line.number)
        if label is not None:
            self.tally.format = label
        return self.tally.report()

    def content(self) -> Iterator[Line]:
        """Content lines: text, and commands (a prompt's command is often the configuration itself)."""
        return (line for line in self.text.lines if line.kind in ("text", "command"))

    def config_prompt(self, line: Line) -> tuple[str, str] | None:
        """``(mode, command)`` when ``line`` was typed at a configuration-mode prompt."""
        if line.kind != "command" or not 0 < line.number <= len(self.raw):
            return None
        match = _CONFIG_PROMPT.match(self.raw[line.number - 1][:4096])
        return (match[1], match[2].strip()) if match else None


Marker = tuple[str, "re.Pattern[str]"]
"""A dialect marker for detection: what it is called in the detection line, and the pattern that finds it."""


def markers(*pairs: tuple[str, str]) -> tuple[Marker, ...]:
    """A dialect's detection markers, compiled once: ``markers(("qos map dscp-tc", r"^qos map dscp-tc\b"), ...)``."""
    return tuple((name, re.compile(pattern)) for name, pattern in pairs)


def bare(exc: ParseError) -> str:
    """The message of a ParseError without the ``source:line:`` it prints in front."""
    text = str(exc)
    where = exc.source if exc.line is None else f"{exc.source}:{exc.line}"
    return text[len(where) + 2:] if text.startswith(where + ": ") else text


def _comment(text: str) -> bool:
    return text.lstrip().startswith(("!", "#", "/*", "*", "//"))


def reading(data: str | bytes, *, source: str, label: str) -> Reading:
    """Normalise ``data`` for a config reader; ParseError for not-text, empty input or a raw template."""
    text = normalise(data, source=source, what=WHAT, hash_prompts=False)
    for line in text.lines:
        if line.kind in ("text", "command") and _TEMPLATE.search(line.text):
            raise TemplateError(
                "this is a Jinja template, not a configuration: render it first (sonic-cfggen -t, ansible "
                f"template, j2) and lint the result; line {line.number} is {line.text.strip()[:80]!r}",
                source=source, line=line.number)
    decoded = data if isinstance(data, str) else data.decode("utf-8", errors="replace")
    raw = tuple(decoded.split("\n"))
    return Reading(text, Tally(text, label), raw)


def _mode_depth(mode: str) -> int:
    if mode in ("config", "conf"):
        return 0
    return 2 if _DEEP_MODE.search(mode) else 1


def _opener_depth(command: str, depth: int) -> int:
    """How deep a command sits whatever mode it was typed in: EOS and NX-OS let a sub-mode open a sibling."""
    first = command.split(" ", 1)[0]
    if first in _TOP_OPENERS or command.startswith(_TOP_QOS):
        return 0
    if first in _MID_OPENERS:
        return min(depth, 1)
    return depth


def config_lines(r: Reading, *, dedent: bool = True) -> list[tuple[int, str]]:
    """``(line number, text)`` of every configuration line, transcripts re-indented from their prompt modes and the
    whole paste dedented to its least indentation (a config pasted as a Markdown list item or RST block)."""
    out: list[tuple[int, str]] = []
    for line in r.content():
        if line.kind == "command":
            prompt = r.config_prompt(line)
            if prompt is None:
                continue  # a shell command (cat, show running-config): what follows is its output
            mode, command = prompt
            if not command or command in _LEAVE or command.split(" ", 1)[0] in ("exit", "end", "show", "do"):
                continue
            depth = _opener_depth(command, _mode_depth(mode))
            out.append((line.number, "  " * depth + command))
            continue
        out.append((line.number, line.text.replace("\t", "    ") if "\t" in line.text else line.text))
    if dedent:
        widths = [len(t) - len(t.lstrip(" ")) for _, t in out if t.strip() and not _comment(t)]
        cut = min(widths) if widths else 0
        if cut:
            out = [(n, t[cut:] if t[:cut].strip() == "" else t.lstrip(" ")) for n, t in out]
    return out


def tail_open(lines: list[tuple[int, str]]) -> bool:
    """The paste ends without a terminator (``!``, ``end``, ``}``): its last block may have been cut short."""
    for _, text in reversed(lines):
        stripped = text.strip()
        if not stripped:
            continue
        return not (stripped.startswith("!") or stripped in ("end", "exit", "}", "};", "quit"))
    return False
