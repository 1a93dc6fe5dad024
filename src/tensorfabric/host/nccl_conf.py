"""The one reader of ``NAME=value`` files: /etc/nccl.conf, ~/.nccl.conf, NCCL_CONF_FILE, and shell ``.env`` files.

A ``.conf`` is read as NCCL reads it (``setEnvFile`` in NCCL's ``src/misc/param.cc``, read for 2.18 to 2.28):

* a line whose first character is ``#`` is skipped; so is a line without ``=``;
* the name is everything before the first ``=`` and the value everything after it, both verbatim: no trimming,
  no unquoting, no inline comments, no ``export`` -- ``NCCL_IB_HCA="mlx5_0"`` selects a device called
  ``"mlx5_0"`` with the quotes, ``NCCL_IB_TC = 106`` sets a variable called ``NCCL_IB_TC `` that NCCL never
  reads, ``export NCCL_IB_TC=106`` one called ``export NCCL_IB_TC``, and a CRLF file leaves ``\\r`` in every value;
* the value is cut at 1023 bytes;
* each pair goes through ``setenv(name, value, 0)``, which never overwrites: the environment beats the files,
  the first file read beats the later one (NCCL_CONF_FILE, else ~/.nccl.conf, then /etc/nccl.conf), and within a
  file the *first* line that sets a name wins.

A shell ``.env`` (``source``-d before the job) is read as the shell does: optional ``export``, the value one shell
word (quotes removed, ``#`` comments), and the last assignment wins.

Every line that does not set what it appears to carries a ``problem``; readers of pasted text turn those into
warnings naming the line, the doctor reads the values NCCL would end up with.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["Assignment", "Dialect", "EnvFile", "NCCL_VALUE_MAX", "parse_nccl_conf", "read_assignment",
           "read_env_file"]

Dialect = Literal["nccl", "shell"]
NCCL_VALUE_MAX = 1023
"""``envValue[1024]`` in setEnvFile: longer values are cut."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHELL = re.compile(r"(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)")


@dataclass(frozen=True, slots=True)
class Assignment:
    line: int
    name: str
    """The variable the line sets, as the reader sets it (NCCL: verbatim, spaces and ``export`` included)."""
    value: str
    problem: str = ""
    """Why the line does not set what it appears to ('' when it does)."""
    effective: bool = True
    """Whether the reader sets a variable a program would look up under the name the writer meant."""


@dataclass(frozen=True, slots=True)
class EnvFile:
    values: Mapping[str, str]
    """Name -> value as the reader ends up with them (NCCL: first wins; shell: last wins)."""
    assignments: tuple[Assignment, ...]
    """Every assignment line, in order, with its problem."""


def read_assignment(text: str, number: int, dialect: Dialect) -> Assignment | None:
    """One line; None when the reader skips it (comment, blank, no ``=``)."""
    return _nccl(text, number) if dialect == "nccl" else _shell(text, number)


def _nccl(text: str, number: int) -> Assignment | None:
    if text.startswith("#") or "=" not in text:
        return None
    name, _, value = text.partition("=")
    if not _NAME.fullmatch(name):
        meant = name.strip().removeprefix("export").strip()
        if name.strip().startswith("export") and _NAME.fullmatch(meant):
            why = f"NCCL reads .conf files literally: this sets {name!r}, not {meant}; write {meant}=value " \
                  "without 'export'"
        elif _NAME.fullmatch(meant):
            why = f"NCCL reads .conf files literally: this sets {name!r}, not {meant}; write {meant}=value " \
                  "without spaces around '='"
        else:
            why = f"{name.strip()!r} is not a variable name"
        return Assignment(number, name, value, why, effective=False)
    problems = []
    if value[:1] in ("'", '"'):
        problems.append(f"NCCL reads .conf values literally: the quotes are part of {name}'s value {value}")
    elif " #" in value or "\t#" in value:
        problems.append(f"NCCL keeps what follows '#' as part of {name}'s value: comments go on a line of their own")
    if value.endswith("\r"):
        problems.append(f"a CR (a Windows line end) is part of {name}'s value; save the file with Unix line ends")
    if len(value.encode()) > NCCL_VALUE_MAX:
        value = value.encode()[:NCCL_VALUE_MAX].decode(errors="ignore")
        problems.append(f"NCCL cuts {name}'s value at {NCCL_VALUE_MAX} bytes")
    return Assignment(number, name, value, "; ".join(problems))


def _shell(text: str, number: int) -> Assignment | None:
    stripped = text.strip()
    if not stripped or stripped.startswith("#"):
        return None
    match = _SHELL.fullmatch(stripped)
    if match is None:
        return None
    name, raw = match.groups()
    if "$" in raw and not (raw.startswith("'") and raw.endswith("'")):
        # ${NCCL_IB_GID_INDEX:-3}, $(ls ...): the value is whatever the shell makes of it where the file is sourced
        return Assignment(number, name, raw, f"value of {name} is a shell expansion ({raw}); it is not judged",
                          effective=False)
    try:
        words = shlex.split(raw, comments=True) if raw else [""]
    except ValueError as exc:
        return Assignment(number, name, raw, f"value does not parse as a shell word: {exc}", effective=False)
    if len(words) > 1:
        return Assignment(number, name, raw, f"value of {name} must be one word; quote it if it holds spaces",
                          effective=False)
    return Assignment(number, name, words[0] if words else "")


def read_env_file(lines: Iterable[tuple[int, str]], dialect: Dialect) -> EnvFile:
    """``(line number, text)`` pairs as the reader of ``dialect`` reads them; see the module's docstring."""
    values: dict[str, str] = {}
    where: dict[str, int] = {}
    out: list[Assignment] = []
    for number, text in lines:
        found = read_assignment(text, number, dialect)
        if found is None:
            continue
        if found.effective and dialect == "nccl" and found.name in where:
            found = Assignment(number, found.name, found.value, f"{found.name} is set again; NCCL keeps the first "
                               f"value (line {where[found.name]}: {values[found.name]!r})", effective=False)
        elif found.effective:
            values[found.name] = found.value
            where.setdefault(found.name, number)
        out.append(found)
    return EnvFile(values, tuple(out))


def parse_nccl_conf(text: str) -> dict[str, str]:
    """The variables NCCL sets from an /etc/nccl.conf text (only the names a program can look up)."""
    return dict(read_env_file(enumerate(text.split("\n"), 1), "nccl").values)
