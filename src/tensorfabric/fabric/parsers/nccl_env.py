"""An NCCL environment file (``/etc/nccl.conf``, ``~/.nccl.conf`` or a shell ``.env``) into a host Deployed.

Accepts ``NAME=value`` lines, ``#`` comments and blank lines. A ``.conf`` file is read as NCCL reads it: the
value is everything after the first ``=``, literally. Any other file is read as a shell-sourced ``.env``:
``export`` is allowed and values are unquoted as the shell would.
"""

from __future__ import annotations

import re

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.parsers._common import Where, device_from_source, shell_words
from tensorfabric.host.discovery import parse_nccl_conf

__all__ = ["FORMAT", "SUFFIXES", "parse", "parse_env_lines", "sniff"]

FORMAT = "nccl-env"
SUFFIXES = (".env", ".conf")
_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def _lines(text: str) -> list[tuple[int, str]]:
    return [(n, ln.strip()) for n, ln in enumerate(text.replace("\r\n", "\n").split("\n"), start=1)
            if ln.strip() and not ln.strip().startswith("#")]


def sniff(text: str) -> bool:
    # Last in the registry, so it may be permissive: NCCL variables and an assignment on the first line.
    lines = _lines(text)
    return bool(lines) and _ASSIGN.match(lines[0][1]) is not None and "NCCL_" in text


def parse_env_lines(text: str, source: str) -> dict[str, str]:
    env: dict[str, str] = {}
    literal = source.endswith(".conf")
    for number, line in _lines(text):
        where = Where(source, number, line)
        match = _ASSIGN.match(line)
        if match is None:
            raise where.error("expected NAME=value (optionally prefixed by 'export')")
        if literal:
            if line.startswith("export"):
                raise where.error("NCCL reads .conf files literally; write NAME=value without 'export'")
            if match.group(2)[:1] in ("'", '"'):
                raise where.error(f"NCCL reads .conf values literally: the quotes would be part of {match.group(1)}")
            continue
        try:
            words = shell_words(match.group(2), comments=True) if match.group(2) else [""]
        except ValueError as exc:
            raise where.error(f"value does not parse as a shell word: {exc}") from None
        if len(words) > 1:
            raise where.error(f"value of {match.group(1)} must be one word; quote it if it holds spaces")
        env[match.group(1)] = words[0] if words else ""
    # Lines checked above are plain NAME=value, so the host doctor's /etc/nccl.conf reader is the one that reads them.
    return parse_nccl_conf(text) if literal else env


def parse(text: str, *, source: str = "<input>", device: str | None = None) -> Deployed:
    env = parse_env_lines(text, source)
    if not env:
        raise Where(source).error("no NAME=value lines found")
    return Deployed(device=device or device_from_source(source), kind="host", format=FORMAT, source=source,
                    nccl_env=env)
