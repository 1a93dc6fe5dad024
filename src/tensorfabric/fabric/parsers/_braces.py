"""A linear-time reader for Junos-style brace configurations (``show configuration`` output).

``name args { children }`` and ``name args;`` become :class:`Stanza` trees; ``[ a b ]`` lists are spliced into
the words; ``/* */`` and ``#`` comments and statements marked ``inactive:`` are dropped (an inactive statement
is not in effect on the device). Structural slips of a pasted excerpt are read past and reported, never fatal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from tensorfabric.fabric.parsers._common import Where

__all__ = ["BraceTree", "Stanza", "brace_tree"]

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


@dataclass(slots=True)
class BraceTree:
    """What :func:`brace_tree` read: the stanzas, what it had to tolerate, and what the text left open."""

    roots: list[Stanza]
    problems: list[tuple[int, str]] = field(default_factory=list)
    """``(line, message)`` for every structural slip it read past (a stray ``}``, a missing ``;``)."""
    open_at_end: list[Stanza] = field(default_factory=list)
    """Stanzas still open when the text ended, outermost first: a paste cut inside them."""


def _tokens(lines: list[tuple[int, str]], tree: BraceTree, source: str) -> Iterator[tuple[str, bool, int]]:
    """(text, is_punctuation, line) per token; comments dropped."""
    count = 0
    in_comment = False
    for number, line in lines:
        if _CONTROL.search(line):
            tree.problems.append((number, "line holds control characters; skipped"))
            continue
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
                    tree.problems.append((number, "quoted string is not closed on its line"))
                    continue
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


_PUNCT = frozenset("{};[]")


def _in_quotes(line: str, start: int, at: int) -> bool:
    return line.count('"', start, at) % 2 == 1


def brace_tree(lines: list[tuple[int, str]], source: str) -> BraceTree:
    """``(line number, text)`` lines into top-level stanzas.

    Pastes are cut and hand-edited: a ``}`` with nothing open is skipped, a statement that runs into ``}`` without
    its ``;`` is kept, and stanzas the text leaves open are closed at its end and listed in ``open_at_end``. Each
    slip is a problem ``(line, message)``; only a hostile size (nesting past 64 levels, millions of tokens) raises.
    """
    tree = BraceTree([])
    stack: list[tuple[list[Stanza], Stanza | None]] = [(tree.roots, None)]
    words: list[str] = []
    first_line = 1
    in_list = False
    for tok, punct, line in _tokens(lines, tree, source):
        if not punct:
            if not words:
                first_line = line
            if len(words) >= _MAX_WORDS:
                raise Where(source, line).error(f"statement longer than {_MAX_WORDS} words")
            words.append(tok)
            continue
        if tok == "[":
            in_list = True
        elif tok == "]":
            in_list = False
        elif in_list and tok != "}":
            continue  # a stray ';' or '{' inside [ ]: read past it
        elif tok == ";":
            if words:
                _add(stack[-1][0], Stanza(words, first_line))
            words = []
        elif tok == "{":
            node = Stanza(words or ["{"], first_line if words else line)
            if not words:
                tree.problems.append((line, "'{' without a statement name"))
            _add(stack[-1][0], node)
            stack.append((node.children, node))
            if len(stack) > _MAX_DEPTH:
                raise Where(source, line).error(f"nesting deeper than {_MAX_DEPTH} levels")
            words = []
        elif tok == "}":
            in_list = False
            if words:
                tree.problems.append((first_line, "statement before '}' lacks ';'"))
                _add(stack[-1][0], Stanza(words, first_line))
                words = []
            if len(stack) == 1:
                tree.problems.append((line, "'}' closes nothing (the paste starts inside a block); skipped"))
                continue
            stack.pop()
    if words:
        _add(stack[-1][0], Stanza(words, first_line))
    tree.open_at_end = [node for _, node in stack[1:] if node is not None]
    _drop_inactive(tree.roots)
    return tree


def _add(siblings: list[Stanza], node: Stanza) -> None:
    siblings.append(node)


def _drop_inactive(nodes: list[Stanza]) -> None:
    todo = [nodes]
    while todo:
        current = todo.pop()
        keep = [n for n in current if n.words[:1] != ["inactive:"]]
        current[:] = keep
        for node in keep:
            if node.words[:1] in (["protect:"], ["active:"]):
                node.words = node.words[1:]
            todo.append(node.children)
