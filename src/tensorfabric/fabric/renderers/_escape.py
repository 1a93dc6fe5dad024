"""One validation/escaping function per output language: every string a renderer writes goes through one.

:func:`text` is the shared check: a string of printable characters only (no newline, carriage return, tab,
other control or format character, no line/paragraph separator), at most 255 characters. A newline is the one
way out of a comment or a CLI argument in every target, so nothing that fails it reaches a file. Per target:

* shell (host scripts): :func:`shell` quotes a word with :func:`shlex.quote`; :func:`comment` for ``#`` lines.
* SONiC config_db JSON: :func:`json_text`; :mod:`json` escapes quotes and backslashes itself.
* NVUE: the ``nv set`` lines run in a shell, so words are :func:`shell`-quoted and comments are shell comments.
* Arista EOS / Cisco NX-OS: :func:`cli_text` for the rest-of-line arguments (``description``); ``?`` is refused
  because pasted into either CLI it opens context help instead of being typed; :func:`cli_name` for names that
  must be one token (``hostname``, ``interface``, access-list names).
"""

from __future__ import annotations

import re
import shlex

from tensorfabric.errors import InputError

__all__ = ["MAX_TEXT", "cli_name", "cli_text", "comment", "json_text", "shell", "text"]

MAX_TEXT = 255
_CLI_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:/-]{0,63}")


def text(value: object, what: str) -> str:
    """``value`` if it is a printable single-line string of at most :data:`MAX_TEXT` characters."""
    if not isinstance(value, str):
        raise InputError(f"{what}: {value!r} must be text")
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise InputError(f"{what}: {value!r} holds a newline or control character ({bad!r}); use one line of "
                         "printable text")
    if len(value) > MAX_TEXT:
        raise InputError(f"{what}: {value[:40]!r}... is {len(value)} characters; at most {MAX_TEXT}")
    return value


def shell(value: object, what: str) -> str:
    """One shell word: checked, then quoted so the shell sees exactly ``value``."""
    return shlex.quote(text(value, what))


def comment(value: object, what: str) -> str:
    """Text for a ``#`` / ``!`` comment line (shell, NVUE, EOS, NX-OS): a comment ends only at a newline."""
    return text(value, what)


def json_text(value: object, what: str) -> str:
    """A JSON string value (SONiC): checked; quoting and escaping are :func:`json.dumps`'s job."""
    return text(value, what)


def cli_text(value: object, what: str) -> str:
    """A rest-of-line argument of an EOS / NX-OS command such as ``description``."""
    checked = text(value, what)
    if "?" in checked:
        raise InputError(f"{what}: {checked!r} holds '?', which the EOS/NX-OS CLI reads as a help request")
    return checked.strip()


def cli_name(value: object, what: str) -> str:
    """A one-token name in an EOS / NX-OS command (hostname, interface, ACL)."""
    checked = text(value, what)
    if not _CLI_NAME.fullmatch(checked):
        raise InputError(f"{what}: {checked!r} may hold only letters, digits and _ . : / - (at most 64, not "
                         "starting with a punctuation mark)")
    return checked
