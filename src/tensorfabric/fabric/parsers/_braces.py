"""A linear-time reader for Junos-style brace configurations (``show configuration`` output).

``name args { children }`` and ``name args;`` become :class:`Stanza` trees; ``[ a b ]`` lists are spliced into
the words; ``/* */`` and ``#`` comments and statements marked ``inactive:`` are dropped (an inactive statement
is not in effect on the device).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tensorfabric.fabric.parsers._common import Where

__all__ = ["Stanza", "brace_tree"]

_MAX_DEPTH = 64


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


def _tokens(text: str, source: str) -> list[tuple[str, bool, int]]:
    """(text, is_punctuation, line) per token."""
    out: list[tuple[str, bool, int]] = []
    i, n, line = 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
        elif ch in " \t\r":
            i += 1
        elif ch == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise Where(source, line).error("comment '/*' is never closed")
            line += text.count("\n", i, end)
            i = end + 2
        elif ch in "{};[]":
            out.append((ch, True, line))
            i += 1
        elif ch == '"':
            end = text.find('"', i + 1)
            if end < 0 or "\n" in text[i:end]:
                raise Where(source, line).error("quoted string is not closed on its line")
            out.append((text[i + 1:end], False, line))
            i = end + 1
        else:
            start = i
            while i < n and text[i] not in " \t\r\n{};[]\"#":
                if text.startswith("/*", i):
                    break
                i += 1
            word = text[start:i]
            if any(ord(c) < 32 for c in word):
                raise Where(source, line, word[:40]).error("statement holds control characters")
            out.append((word, False, line))
    return out


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
