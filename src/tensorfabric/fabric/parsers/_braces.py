"""A linear-time reader for Junos-style brace configurations (``show configuration`` output).

``name args { children }`` and ``name args;`` become :class:`Stanza` trees; ``[ a b ]`` lists are spliced into
the words; ``/* */`` and ``#`` comments and statements marked ``inactive:`` are dropped (an inactive statement
is not in effect on the device).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tensorfabric.fabric.parsers._common import Where

__all__ = ["Stanza", "brace_tree"]

_MAX_DEPTH = 64
_MAX_TOKENS = 2_000_000
_MAX_WORDS = 10_000  # far above any real statement; stops one hostile line from becoming millions of words


@dataclass(slots=True)
class Stanza:
    words: list[str]
    line: int
    children: list[Stanza] = field(default_factory=list)

    def where(self, source: str) -> Where:
        return Where(source, self.line, " ".join(self.words)[:80])

    def child(self, *head: str) -> Stanza | None:
        for node in self.children:
            if tuple(node.words[: len(head)]) == head:
                return node
        return None

    def all(self, *head: str) -> list[Stanza]:
        return [n for n in self.children if tuple(n.words[: len(head)]) == head]


# One token: a quoted string (closed on its line), a punctuation mark, or a run of other characters.
_TOKEN = re.compile(r'"[^"\n]*"|[{};\[\]]|[^\s{};\[\]"]+|"')
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f]")


def _tokens(text: str, source: str) -> Iterator[tuple[str, bool, int]]:
    """(text, is_punctuation, line) per token, lazily so a structural error stops the scan; comments dropped."""
    count = 0
    in_comment = False
    for number, line in enumerate(text.split("\n"), start=1):
        if _CONTROL.search(line):
            raise Where(source, number, line[:40]).error("line holds control characters")
        pos = 0
        while pos < len(line):
            if in_comment:
                end = line.find("*/", pos)
                if end < 0:
                    break
                in_comment, pos = False, end + 2
                continue
            start = line.find("/*", pos)
            hash_at = line.find("#", pos)
            stop = len(line)
            if start >= 0:
                stop = start
            if 0 <= hash_at < stop and not _in_quotes(line, pos, hash_at):
                stop = hash_at
                start = -1
            for match in _TOKEN.finditer(line, pos, stop):
                tok = match.group()
                if tok == '"':
                    raise Where(source, number, line[:40]).error("quoted string is not closed on its line")
                count += 1
                if count > _MAX_TOKENS:
                    raise Where(source, number).error(f"more than {_MAX_TOKENS} tokens; no device config is this big")
                if tok[0] == '"':
                    yield tok[1:-1], False, number
                else:
                    yield tok, tok in _PUNCT, number
            if stop == len(line) or start < 0:
                break  # end of line, or a '#' comment runs to it
            in_comment, pos = True, start + 2
    if in_comment:
        raise Where(source).error("comment '/*' is never closed")


_PUNCT = frozenset("{};[]")


def _in_quotes(line: str, start: int, at: int) -> bool:
    return line.count('"', start, at) % 2 == 1


def brace_tree(text: str, source: str) -> list[Stanza]:
    """Parse ``text`` into top-level stanzas; unbalanced braces or brackets are a ParseError."""
    roots: list[Stanza] = []
    stack: list[list[Stanza]] = [roots]
    words: list[str] = []
    first_line = 1
    in_list = False
    for tok, punct, line in _tokens(text, source):
        if not punct:
            if not words:
                first_line = line
            words.append(tok)
            if len(words) > _MAX_WORDS:
                raise Where(source, line).error(f"statement longer than {_MAX_WORDS} words")
            continue
        if tok == "[":
            if in_list:
                raise Where(source, line).error("'[' inside a list")
            in_list = True
        elif tok == "]":
            if not in_list:
                raise Where(source, line).error("']' without '['")
            in_list = False
        elif in_list:
            raise Where(source, line).error(f"{tok!r} inside a [ ] list")
        elif tok == ";":
            if words:
                _add(stack[-1], Stanza(words, first_line))
            words = []
        elif tok == "{":
            if not words:
                raise Where(source, line).error("'{' without a statement name")
            node = Stanza(words, first_line)
            _add(stack[-1], node)
            stack.append(node.children)
            if len(stack) > _MAX_DEPTH:
                raise Where(source, line).error(f"nesting deeper than {_MAX_DEPTH} levels")
            words = []
        elif tok == "}":
            if words:
                raise Where(source, line, " ".join(words)[:40]).error("statement before '}' lacks ';'")
            if len(stack) == 1:
                raise Where(source, line).error("'}' without '{'")
            stack.pop()
    if in_list or words or len(stack) != 1:
        raise Where(source).error("configuration ends inside a statement: braces or brackets are not balanced")
    _drop_inactive(roots)
    return roots


def _add(siblings: list[Stanza], node: Stanza) -> None:
    siblings.append(node)


def _drop_inactive(nodes: list[Stanza]) -> None:
    keep = [n for n in nodes if n.words[:1] != ["inactive:"]]
    nodes[:] = keep
    for node in keep:
        if node.words[:1] in (["protect:"], ["active:"]):
            node.words = node.words[1:]
        _drop_inactive(node.children)
