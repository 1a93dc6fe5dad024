"""The one JSON loader for text a user gave: config_db dumps, counter captures, doctor reports, model configs.

``json.loads`` has no depth limit of its own: its scanner recurses once per ``[`` or ``{``, so ~1000 nested
brackets end in RecursionError, and a document a little shallower than that parses and then breaks whatever
walks it recursively. :func:`load_json` refuses nesting past :data:`MAX_DEPTH` before parsing, from a linear
scan that runs in C (bytes.translate, one split and a numpy prefix sum; no per-character Python loop), and turns
every failure into a :class:`JsonError`: a :class:`~tensorfabric.errors.ParseError` naming the source, the line
and what was expected. Files the tool wrote itself (lab state, integrity stamps, its own packaged tables, the
blobs fleet ranks exchange) keep plain ``json.loads``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tensorfabric.errors import ParseError

__all__ = ["MAX_DEPTH", "JsonError", "JsonTooDeep", "load_json", "nesting_exceeds"]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects taken, as for YAML (:data:`tensorfabric.yamlload.MAX_DEPTH`). A
config_db.json is four levels deep, a doctor report about eight."""

_DROP = bytes(sorted(set(range(256)) - set(b'[]{}"')))
# One token per match for locating the first level past the cap (the error path only). The string alternative
# always matches (an unterminated string runs to the end), so no quote is ever rescanned.
_TOKEN = re.compile(r'"[^"\\]*(?:\\[\s\S][^"\\]*)*(?:"|\\?\Z)|[\[\]{}]')


class JsonError(ParseError):
    """Text that is not the JSON expected, or nested past :data:`MAX_DEPTH`. ``lineno`` and ``colno`` (1-based)
    and ``pos`` (0-based offset) are set as on :class:`json.JSONDecodeError`, for callers that read them."""

    def __init__(self, problem: str, *, what: str, source: str, lineno: int, colno: int, pos: int,
                 excerpt: str = "") -> None:
        self.problem = problem
        self.lineno, self.colno, self.pos = lineno, colno, pos
        super().__init__(f"{problem} at column {colno}; expected {what}", source=source, line=lineno,
                         excerpt=excerpt)


class JsonTooDeep(JsonError):
    """JSON nested past :data:`MAX_DEPTH`: no reader can take part of it, so a tolerant reader passes it on."""


def nesting_exceeds(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether brackets outside JSON strings nest deeper than ``limit`` (the most ``[``/``{`` open at once).

    Linear and in C throughout: escaped backslashes and then escaped quotes are cut (pairing a run of backslashes
    from its left, as the parser does), so no quote left is escaped; every byte but brackets and quotes is
    deleted; brackets between an odd quote and the next are inside a string; the depth is the largest prefix sum
    of +1 per opening and -1 per closing bracket.
    """
    raw = text.encode("utf-8", "surrogatepass")
    if b"\\" in raw:  # two replaces: a sixth of a regex substitution's time on escape-heavy text
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = raw.translate(None, _DROP)
    if skeleton.count(b"[") + skeleton.count(b"{") <= limit:
        return False
    import numpy as np  # only for text with more brackets than the cap: most JSON lines never get here

    table = np.zeros(256, dtype=np.int64)
    table[list(b"[{")], table[list(b"]}")] = 1, -1
    chars = np.frombuffer(skeleton, dtype=np.uint8)
    steps = table[chars]
    steps[(np.cumsum(chars == ord('"'), dtype=np.int64) & 1).astype(bool)] = 0
    return bool(np.cumsum(steps).max(initial=0) > limit)


def _first_too_deep(text: str, limit: int) -> int:
    """Offset of the first bracket that opens level ``limit + 1`` (0 when there is none)."""
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return match.start()
        elif token in "]}":
            depth -= 1
    return 0


def _where(text: str, pos: int) -> tuple[int, int, str]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start:end if end >= 0 else len(text)]
    return text.count("\n", 0, pos) + 1, pos - start + 1, line[max(0, pos - start - 20):pos - start + 60]


def load_json(data: str | bytes, *, what: str, source: str, first_line: int = 1,
              object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """``json.loads(data)`` with nesting capped at :data:`MAX_DEPTH`; :class:`JsonError` otherwise.

    ``what`` says what was expected ("a JSON list as 'ip -j -s link' prints"), ``source`` names the file or
    stream; ``first_line`` is the line of ``data``'s first line in that source (a JSON line of a larger file).
    ``object_pairs_hook`` is passed on (the SONiC reader finds duplicate keys with it).
    """
    if isinstance(data, bytes):
        try:
            text = data.decode(json.detect_encoding(data))
        except UnicodeDecodeError as exc:
            raise JsonError(f"not UTF-8 text (byte {exc.start})", what=what, source=source, lineno=first_line,
                            colno=1, pos=exc.start) from None
    else:
        text = data
    if not nesting_exceeds(text):
        try:
            return json.loads(text, object_pairs_hook=object_pairs_hook)
        except json.JSONDecodeError as exc:
            line, column, excerpt = _where(text, exc.pos)
            raise JsonError(f"not valid JSON ({exc.msg})", what=what, source=source, lineno=line + first_line - 1,
                            colno=column, pos=exc.pos, excerpt=excerpt) from None
        except RecursionError:  # unbalanced brackets, which the scan leaves to the parser, nested past the stack
            pass
    pos = _first_too_deep(text, MAX_DEPTH)
    line, column, excerpt = _where(text, pos)
    raise JsonTooDeep(f"nested deeper than {MAX_DEPTH} levels", what=what, source=source,
                    lineno=line + first_line - 1, colno=column, pos=pos, excerpt=excerpt[:20])
