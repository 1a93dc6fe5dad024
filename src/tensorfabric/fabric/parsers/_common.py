"""Shared parsing helpers: checked numbers, interface ranges and an indentation tree for CLI configs.

Every helper raises :class:`~tensorfabric.errors.ParseError` with the source, line and excerpt, so a parser
built from them can only fail in that one way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePath

from tensorfabric import units
from tensorfabric.errors import InputError, ParseError

__all__ = [
    "Block",
    "Where",
    "block_tree",
    "device_from_source",
    "expand_interfaces",
    "parse_float",
    "parse_int",
    "parse_priorities",
    "MAX_COMMAND_CHARS",
    "parse_bytes",
    "shell_words",
    "strip_inline_comment",
]


@dataclass(frozen=True, slots=True)
class Where:
    """Where a value came from, for error messages."""

    source: str
    line: int | None = None
    excerpt: str = ""

    def error(self, message: str) -> ParseError:
        return ParseError(message, source=self.source, line=self.line, excerpt=self.excerpt)


def parse_int(text: str, where: Where, *, what: str, lo: int | None = None, hi: int | None = None) -> int:
    """A decimal integer within ``[lo, hi]``."""
    if not re.fullmatch(r"[+-]?\d{1,18}", text.strip()):
        raise where.error(f"{what}: {text!r} is not an integer")
    value = int(text)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        bounds = f"{lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
        raise where.error(f"{what}: {value} is out of range {bounds}")
    return value


def parse_float(text: str, where: Where, *, what: str, lo: float = 0.0) -> float:
    try:
        value = float(text)
    except ValueError:
        raise where.error(f"{what}: {text!r} is not a number") from None
    if not value >= lo or value == float("inf"):
        raise where.error(f"{what}: {text!r} must be a finite number >= {lo:g}")
    return value


def parse_bytes(text: str, where: Where, *, what: str) -> int:
    """A byte count, bare or with a unit (``150000``, ``150KB``, ``1.5MB``)."""
    try:
        return units.parse_size(text, what=what, allow_zero=True)
    except InputError as exc:
        raise where.error(str(exc)) from None


_RANGE_ITEM = re.compile(r"^(\d{1,2})(?:-(\d{1,2}))?$")


def parse_priorities(text: str, where: Where, *, what: str, hi: int = 7) -> frozenset[int]:
    """``3``, ``3,4``, ``2-4`` or an empty string into a set of priorities 0..hi."""
    if len(text) > 1024:  # every value 0..63 listed once is 182 characters
        raise where.error(f"{what}: a list of {len(text)} characters is not a priority or DSCP list")
    found: set[int] = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        match = _RANGE_ITEM.match(item)
        if match is None:
            raise where.error(f"{what}: {item!r} must be a number or range such as '3' or '24-31'")
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if first > last or last > hi:
            raise where.error(f"{what}: {item!r} must lie within 0..{hi} and run upwards")
        found.update(range(first, last + 1))
    return frozenset(found)


_MAX_INTERFACES = 16384  # far above any switch; stops a hostile line from expanding into millions of ports
_IFACE = re.compile(r"^([A-Za-z][A-Za-z-]*?)\s*((?:\d+/)*)(\d+)$")
# Guides and runbooks write one block for many ports: "Ethernet1/*", "EthernetN/1", "swp<1-32>". Such a name is kept
# as written, one port standing for all it names.
_PLACEHOLDER = re.compile(r"[A-Za-z][A-Za-z0-9/.:_-]{0,40}(?:[*<>{}]|[A-Z](?=/|$))[A-Za-z0-9/.:*<>{}_-]{0,40}")


def expand_interfaces(text: str, where: Where) -> list[str]:
    """Expand interface lists and ranges into names.

    Accepts ``swp1``, ``swp1-4``, ``swp1,swp3``, ``Ethernet1-4``, ``Ethernet1/1-48``, ``ethernet 1/1-1/48``
    (NX-OS writes the range end with or without its slot). Names keep the spelling of the first element
    with the type capitalised as vendors print it (``ethernet 1/1`` becomes ``Ethernet1/1``). An interface
    pattern as configuration guides print it (``Ethernet1/*``, ``EthernetN/1``) stays one name.
    """
    names: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            raise where.error(f"interface list {text!r} has an empty element")
        first, sep, last = item.partition("-")
        first = first.replace(" ", "")
        match = _IFACE.match(first)
        if match is None:
            if _PLACEHOLDER.fullmatch(item.replace(" ", "")):
                names.append(item.replace(" ", ""))
                continue
            raise where.error(f"interface {item!r} must look like 'swp1', 'Ethernet1/1' or 'Ethernet1-4'")
        kind, slots, start = match.group(1), match.group(2), int(match.group(3))
        kind = kind[0].upper() + kind[1:] if kind.lower() == "ethernet" else kind
        if not sep:
            names.append(f"{kind}{slots}{start}")
            continue
        tail = last.strip().split("/")[-1]
        if not tail.isdigit() or (last.count("/") and last.strip().rsplit("/", 1)[0] + "/" != slots):
            raise where.error(f"interface range {item!r} must end with a port number on the same slot")
        end = int(tail)
        if end < start or end - start > 4096:
            raise where.error(f"interface range {item!r} must run upwards over at most 4096 ports")
        names.extend(f"{kind}{slots}{n}" for n in range(start, end + 1))
        if len(names) > _MAX_INTERFACES:
            raise where.error(f"interface list {text[:40]!r} names more than {_MAX_INTERFACES} ports")
    return names


def device_from_source(source: str) -> str:
    """A device name from a file name: ``configs/leaf1.eos`` -> ``leaf1``."""
    name = PurePath(source).name
    return name.split(".", 1)[0] or name


@dataclass(slots=True)
class Block:
    """One line of an indented CLI configuration and the lines indented under it."""

    text: str
    line: int
    children: list[Block] = field(default_factory=list)

    @property
    def words(self) -> list[str]:
        return self.text.split()

    def where(self, source: str) -> Where:
        return Where(source, self.line, self.text)

    def subtree(self) -> Iterator[Block]:
        """This block and every block under it (iteratively: a hostile indentation staircase is deep)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


def strip_inline_comment(text: str, mark: str = "!") -> str:
    """``match dscp 26   ! RoCE data`` without its trailing comment (linear: one find, no regex)."""
    at = text.find(mark)
    while at > 0:
        if text[at - 1] in " \t":
            return text[:at].rstrip()
        at = text.find(mark, at + 1)
    return text


def block_tree(lines: list[tuple[int, str]], *, comments: tuple[str, ...] = ("!", "#"),
               inline: str | None = "!") -> list[Block]:
    """An indented CLI configuration (EOS, NX-OS, Dell SONiC) as a forest by indentation depth.

    ``lines`` are ``(line number, text)`` as :func:`~tensorfabric.fabric.parsers._read.config_lines` gives them.
    """
    roots: list[Block] = []
    stack: list[tuple[int, Block]] = []
    for number, raw in lines:
        stripped = raw.strip()
        if not stripped or stripped.startswith(comments):
            continue
        if inline is not None:
            stripped = strip_inline_comment(stripped, inline)
            if not stripped:
                continue
        depth = len(raw) - len(raw.lstrip(" "))
        node = Block(stripped, number)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        (stack[-1][1].children if stack else roots).append(node)
        stack.append((depth, node))
    return roots


# One piece of a shell word, or a run of blanks. The alternatives start with disjoint characters, so the scan is
# linear on any line (shlex walks characters in Python and takes seconds on one long line).
_SHELL = re.compile(
    r"(?P<blank>[ \t\r\n]+)"
    r"|(?P<plain>[^ \t\r\n'\"\\#]+)"
    r"|'(?P<single>[^']*)'"
    r'|"(?P<double>(?:[^"\\]|\\.)*)"'
    r"|\\(?P<escaped>.)"
    r"|(?P<hash>#)",
    re.S,
)
_DOUBLE_ESCAPE = re.compile(r'\\([\\"])')


MAX_COMMAND_CHARS = 65536
"""Longest shell or CLI command line accepted; real ones are a few hundred characters."""


def shell_words(line: str, *, comments: bool = False) -> list[str]:
    """Split ``line`` into words as POSIX ``shlex.split`` does; ``ValueError`` on an unclosed quote, a trailing
    backslash or a line over :data:`MAX_COMMAND_CHARS`."""
    if len(line) > MAX_COMMAND_CHARS:
        raise ValueError(f"line of {len(line)} characters; commands longer than {MAX_COMMAND_CHARS} are refused")
    words: list[str] = []
    current: list[str] = []
    in_word = False
    pos = 0
    while pos < len(line):
        match = _SHELL.match(line, pos)
        if match is None:
            break
        pos = match.end()
        kind = match.lastgroup or "plain"
        if kind == "hash" and comments:
            # Like shlex, a '#' outside quotes ends the word and comments out the rest of the line.
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            newline = line.find("\n", pos)
            pos = len(line) if newline < 0 else newline
            continue
        if kind == "blank":
            if in_word:
                words.append("".join(current))
                current, in_word = [], False
            continue
        if kind == "hash":
            current.append("#")
        elif kind == "double":
            current.append(_DOUBLE_ESCAPE.sub(r"\1", match.group("double")))
        else:
            current.append(match.group(kind))
        in_word = True
    if pos != len(line):
        raise ValueError("No escaped character" if line[pos] == "\\" else "No closing quotation")
    if in_word:
        words.append("".join(current))
    return words
