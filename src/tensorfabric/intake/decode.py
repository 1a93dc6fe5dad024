"""Bytes as users hand them over, made into text or refused as not text.

A paste is text when it decodes as UTF-8 with at most a few bad bytes (terminals and collectors mangle a character
now and then; one bad byte must not cost the whole paste). A byte-order mark is dropped, UTF-16 with its BOM (what
Windows editors save) is decoded. NUL bytes, or a head that is mostly control bytes, mean a binary file.
"""

from __future__ import annotations

from tensorfabric.errors import ParseError

__all__ = ["BAD_UTF8_SHARE", "decode"]

BAD_UTF8_SHARE = 0.01
"""Above this share of undecodable bytes (and more than 8 of them) the input is taken for binary, not text."""
_HEAD_CHARS = 65536
_ALLOWED_CONTROLS = frozenset("\t\n\r\x1b\x0c")


def _not_text(reason: str, what: str, source: str, line: int | None = None) -> ParseError:
    return ParseError(f"not text ({reason}); expected {what}", source=source, line=line)


def decode(data: str | bytes, *, source: str = "<input>", what: str = "text") -> tuple[str, dict[str, int]]:
    """``(text, notes)``: the decoded text and what decoding had to do (``{"BOM": 1, "invalid UTF-8 bytes": 3}``).

    Raises ParseError for binary input and for input that is empty or only whitespace.
    """
    notes: dict[str, int] = {}
    if isinstance(data, bytes):
        text = _decode_bytes(data, source, what, notes)
    else:
        text = data
        if text.startswith("\ufeff"):
            text = text[1:]
            notes["BOM"] = 1
    nul = text.find("\x00")
    if nul >= 0:
        raise _not_text("it contains NUL bytes", what, source, text.count("\n", 0, nul) + 1)
    head = text[:_HEAD_CHARS]
    controls = sum(1 for ch in head if ch < " " and ch not in _ALLOWED_CONTROLS)
    if controls > max(8, len(head) // 10):
        raise _not_text("mostly control characters", what, source)
    if not text.strip():
        raise ParseError(f"empty input; expected {what}", source=source)
    return text, notes


def _decode_bytes(data: bytes, source: str, what: str, notes: dict[str, int]) -> str:
    if data.startswith(b"\xef\xbb\xbf"):
        notes["BOM"] = 1
        data = data[3:]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            notes["UTF-16"] = 1
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise _not_text("a UTF-16 mark but no UTF-16 text", what, source) from None
    if b"\x00" in data:
        raise _not_text("it contains NUL bytes", what, source, data.count(b"\n", 0, data.find(b"\x00")) + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if bad > max(8, int(len(data) * BAD_UTF8_SHARE)):
        raise _not_text(f"{bad} bytes are not UTF-8", what, source)
    notes["invalid UTF-8 bytes"] = bad
    return text
