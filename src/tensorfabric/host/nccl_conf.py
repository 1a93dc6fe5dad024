"""The one reader of ``NAME=value`` files: /etc/nccl.conf, ~/.nccl.conf, NCCL_CONF_FILE, and shell ``.env`` files.

Which files NCCL reads, in its order (``initEnvFunc`` in NCCL's ``src/misc/param.cc``, read for 2.18 to 2.29):
the file named by ``NCCL_CONF_FILE`` when that variable is set and not empty, otherwise ``.nccl.conf`` in the
user's home directory (``getpwuid(getuid())->pw_dir``, not ``$HOME``); then ``/etc/nccl.conf`` in every case.
:func:`nccl_conf_paths` gives that order and :func:`read_nccl_conf` reads it, with the environment and the home
directory as parameters.

A ``.conf`` is read as NCCL reads it (``setEnvFile`` in NCCL's ``src/misc/param.cc``, read for 2.18 to 2.28):

* a line whose first character is ``#`` is skipped; so is a line without ``=``;
* the name is everything before the first ``=`` and the value everything after it, both verbatim: no trimming,
  no unquoting, no inline comments, no ``export`` -- ``NCCL_IB_HCA="mlx5_0"`` selects a device called
  ``"mlx5_0"`` with the quotes, ``NCCL_IB_TC = 106`` sets a variable called ``NCCL_IB_TC `` that NCCL never
  reads, ``export NCCL_IB_TC=106`` one called ``export NCCL_IB_TC``, and a CRLF file leaves ``\\r`` in every value;
* the value is cut at 1023 bytes;
* each pair goes through ``setenv(name, value, 0)``, which never overwrites: the environment beats the files,
  the first file read beats the later one (NCCL_CONF_FILE, else ~/.nccl.conf, then /etc/nccl.conf), and within a
  file the *first* line that sets a name wins (``ncclOsSetEnv`` is ``setenv(name, value, 0)`` on Linux).

A shell ``.env`` (``source``-d before the job) is read as the shell does: optional ``export`` (which may set several
variables: ``export A=1 B=2``), the value one shell word (quotes removed, ``#`` comments), and the last assignment
wins.

Every line that does not set what it appears to carries a ``problem``; readers of pasted text turn those into
warnings naming the line, the doctor reads the values NCCL would end up with.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ENVIRONMENT", "ETC_NCCL_CONF", "SHELL_LINE_MAX", "Assignment", "ConfFile", "Dialect", "EnvFile",
           "NCCL_VALUE_MAX", "NcclConf", "Shadowed", "nccl_conf_paths", "parse_nccl_conf", "read_assignment",
           "read_assignments", "read_env_file", "read_exported", "read_nccl_conf", "user_home"]

Dialect = Literal["nccl", "shell"]
NCCL_VALUE_MAX = 1023
"""``envValue[1024]`` in setEnvFile: longer values are cut."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SHELL = re.compile(r"(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)")
_EXPORT = re.compile(r"export[ \t]+(.*)")
_ASSIGNING = re.compile(r"(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_]{0,255})=")
SHELL_LINE_MAX = 4096
"""Longest shell line judged: shlex walks characters in Python (a minute on a 10 MB line), and real assignments
are a few hundred characters; a longer one is a warning, not read."""
ETC_NCCL_CONF = "/etc/nccl.conf"
ENVIRONMENT = "environment"
"""The origin of a value the process environment set (the files never override it)."""


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
    """One line's first assignment; None when the reader skips it (comment, blank, no ``=``)."""
    found = read_assignments(text, number, dialect)
    return found[0] if found else None


def read_assignments(text: str, number: int, dialect: Dialect) -> tuple[Assignment, ...]:
    """Every assignment of one line (NCCL: at most one; the shell: several after ``export``)."""
    if dialect == "nccl":
        found = _nccl(text, number)
        return () if found is None else (found,)
    stripped = text.strip()
    if len(stripped) > SHELL_LINE_MAX and not stripped.startswith("#"):
        assigning = _ASSIGNING.match(stripped)
        if assigning is None:
            return ()
        name = assigning.group(1)
        return (Assignment(number, name, stripped[:80], f"the line setting {name} is {len(stripped)} characters, "
                           f"longer than the {SHELL_LINE_MAX} a shell value is judged at; it is not read",
                           effective=False),)
    exported = _EXPORT.fullmatch(stripped)
    if exported is None:
        one = _shell(stripped, number)
        return () if one is None else (one,)
    return _exported(exported.group(1), number)


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
    if "$" in raw and _expands(raw):
        # ${NCCL_IB_GID_INDEX:-3}, $(ls ...): the value is whatever the shell makes of it where the file is sourced
        return _expansion(number, name, raw)
    try:
        words = shlex.split(raw, comments=True) if raw else [""]
    except ValueError as exc:
        return Assignment(number, name, raw, f"value does not parse as a shell word: {exc}", effective=False)
    if len(words) > 1:
        return Assignment(number, name, raw, f"value of {name} must be one word; quote it if it holds spaces",
                          effective=False)
    return Assignment(number, name, words[0] if words else "")


def _expansion(number: int, name: str, raw: str) -> Assignment:
    """An assignment whose value the shell computes where the file runs: kept as written, never judged."""
    return Assignment(number, name, raw, f"value of {name} is a shell expansion ({raw}); it is not judged",
                      effective=False)


def _expands(raw: str) -> bool:
    """Whether the shell expands something in ``raw``: a ``$`` outside single quotes and not escaped (one pass)."""
    quote, escaped = "", False
    for ch in raw:
        if escaped:
            escaped = False
        elif quote == "'":
            quote = "" if ch == "'" else quote
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quote = "" if quote else '"'
        elif ch == "'" and not quote:
            quote = "'"
        elif ch == "$":
            return True
    return False


def _exported(rest: str, number: int) -> tuple[Assignment, ...]:
    """``export WORD...``: each word that holds ``=`` sets a variable (bash -x traces quote whole words:
    ``export 'NCCL_X=a b'``); a word without ``=`` exports a variable set elsewhere and says nothing here."""
    if "$" in rest and _expands(rest):
        match = _SHELL.fullmatch(rest)
        name = match.group(1) if match else rest.partition("=")[0]
        return (_expansion(number, name, rest),)
    try:
        words = shlex.split(rest, comments=True)
    except ValueError as exc:
        return (Assignment(number, rest.partition("=")[0], rest, f"value does not parse as a shell word: {exc}",
                           effective=False),)
    return tuple(_word(word, number) for word in words if "=" in word)


def read_exported(words: Iterable[str], number: int) -> tuple[Assignment, ...]:
    """The arguments of an ``export`` command a caller has already split as the shell does (quotes removed, the
    variables it knows substituted): a ``$`` still in a word is an expansion the caller could not resolve."""
    out = []
    for word in words:
        if "=" not in word:
            continue
        name, _, value = word.partition("=")
        if "$" in value:
            out.append(_expansion(number, name, value))
        else:
            out.append(_word(word, number))
    return tuple(out)


def _word(word: str, number: int) -> Assignment:
    name, _, value = word.partition("=")
    if _NAME.fullmatch(name):
        return Assignment(number, name, value)
    return Assignment(number, name, value, f"{name!r} is not a variable name", effective=False)


def read_env_file(lines: Iterable[tuple[int, str]], dialect: Dialect) -> EnvFile:
    """``(line number, text)`` pairs as the reader of ``dialect`` reads them; see the module's docstring."""
    values: dict[str, str] = {}
    where: dict[str, int] = {}
    out: list[Assignment] = []
    for number, text in lines:
        for found in read_assignments(text, number, dialect):
            _keep(found, dialect, values, where, out)
    return EnvFile(values, tuple(out))


def _keep(found: Assignment, dialect: Dialect, values: dict[str, str], where: dict[str, int],
          out: list[Assignment]) -> None:
    if found.effective and dialect == "nccl" and found.name in where:
        found = Assignment(found.line, found.name, found.value, f"{found.name} is set again; NCCL keeps the first "
                           f"value (line {where[found.name]}: {values[found.name]!r})", effective=False)
    elif found.effective:
        values[found.name] = found.value
        where.setdefault(found.name, found.line)
    out.append(found)


def parse_nccl_conf(text: str) -> dict[str, str]:
    """The variables NCCL sets from an /etc/nccl.conf text (only the names a program can look up)."""
    return dict(read_env_file(enumerate(text.split("\n"), 1), "nccl").values)


def nccl_conf_paths(environ: Mapping[str, str], home: str | None) -> tuple[str, ...]:
    """The files NCCL reads, in its order: ``NCCL_CONF_FILE`` when set and not empty, else ``home``/.nccl.conf
    (``home`` None: the user has no home directory and NCCL reads no user file); then /etc/nccl.conf.

    ``initEnvFunc`` in NCCL's src/misc/param.cc: ``getenv("NCCL_CONF_FILE")`` and ``strlen > 0``, else
    ``userHomeDir()`` + "/.nccl.conf"; ``setEnvFile("/etc/nccl.conf")`` follows unconditionally. A file named
    twice is read once here: the second reading could set nothing the first did not.
    """
    first = environ.get("NCCL_CONF_FILE", "")
    if not first and home:
        first = f"{home.rstrip('/')}/.nccl.conf"
    return (first, ETC_NCCL_CONF) if first and first != ETC_NCCL_CONF else (ETC_NCCL_CONF,)


@dataclass(frozen=True, slots=True)
class ConfFile:
    path: str
    """As NCCL opens it (NCCL_CONF_FILE verbatim, ~ expanded to the home directory)."""
    read: EnvFile | None
    """None when the file is absent or unreadable: NCCL skips it silently."""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "found": self.read is not None,
                "values": dict(self.read.values) if self.read is not None else {},
                "problems": [{"line": a.line, "name": a.name, "problem": a.problem}
                             for a in (self.read.assignments if self.read is not None else ()) if a.problem]}


@dataclass(frozen=True, slots=True)
class Shadowed:
    """A value in a later file that NCCL never sets, because an earlier file set the name differently."""

    path: str
    line: int
    name: str
    value: str
    by: str
    """The file whose value NCCL keeps."""
    kept: str


@dataclass(frozen=True, slots=True)
class NcclConf:
    """What NCCL's configuration files set on this host, before the environment (which they never override)."""

    files: tuple[ConfFile, ...] = ()
    """In NCCL's reading order (:func:`nccl_conf_paths`), absent ones included."""
    values: Mapping[str, str] = field(default_factory=dict)
    """Name -> value the files give NCCL: the first file that sets a name wins."""
    origin: Mapping[str, str] = field(default_factory=dict)
    """Name -> the file its value came from."""
    shadowed: tuple[Shadowed, ...] = ()

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The values NCCL reads: the environment's, then the files' for names the environment does not set."""
        return {**self.values, **{k: v for k, v in environ.items() if k in self.values}}

    def origins(self, environ: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
        """Name -> where NCCL gets it: :data:`ENVIRONMENT` or a file's path (names set nowhere are left out)."""
        return {n: ENVIRONMENT if n in environ else self.origin[n] for n in names if n in environ or n in self.origin}

    def to_dict(self) -> dict[str, Any]:
        return {"files": [f.to_dict() for f in self.files], "values": dict(self.values),
                "origin": dict(self.origin),
                "shadowed": [{"path": s.path, "line": s.line, "name": s.name, "value": s.value, "by": s.by,
                              "kept": s.kept} for s in self.shadowed]}


def read_nccl_conf(environ: Mapping[str, str], home: str | None,
                   read: Callable[[str], str | None]) -> NcclConf:
    """NCCL's configuration files as NCCL reads them: ``read(path)`` gives a file's text (None when absent);
    ``environ`` and ``home`` decide which files, as in :func:`nccl_conf_paths`."""
    files: list[ConfFile] = []
    values: dict[str, str] = {}
    origin: dict[str, str] = {}
    shadowed: list[Shadowed] = []
    for path in nccl_conf_paths(environ, home):
        text = read(path)
        env = read_env_file(enumerate(text.split("\n"), 1), "nccl") if text is not None else None
        files.append(ConfFile(path, env))
        # Within a file a repeated name is already not effective (the first line wins), so each name comes once.
        for a in env.assignments if env is not None else ():
            if not a.effective:
                continue
            if a.name not in values:
                values[a.name], origin[a.name] = a.value, path
            elif values[a.name] != a.value:
                shadowed.append(Shadowed(path, a.line, a.name, a.value, origin[a.name], values[a.name]))
    return NcclConf(tuple(files), values, origin, tuple(shadowed))


def user_home() -> str | None:
    """The home directory NCCL looks in for ``.nccl.conf``: the user database's (``getpwuid(getuid())``), not
    ``$HOME``; None when the user has none."""
    import os
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_dir or None
    except KeyError:
        return None
