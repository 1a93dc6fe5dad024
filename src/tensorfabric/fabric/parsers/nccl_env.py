"""An NCCL environment file (``/etc/nccl.conf``, ``~/.nccl.conf`` or a shell ``.env``) into a host Deployed.

Accepts ``NAME=value`` lines, ``#`` comments and blank lines. A ``.conf`` file is read as NCCL reads it: the
value is everything after the first ``=``, literally. Any other file is read as a shell-sourced ``.env``:
``export`` is allowed and values are unquoted as the shell would.
"""

from __future__ import annotations

import re

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.parsers._common import Where, device_from_source, shell_words
from tensorfabric.fabric.parsers._read import Reading
from tensorfabric.host.discovery import parse_nccl_conf

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "nccl-env"
NAME = "NCCL environment file"
SUFFIXES = (".env", ".conf")
EXPECTED = "NCCL_*=value lines (/etc/nccl.conf, ~/.nccl.conf or a shell .env)"
MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("NCCL_*=value", re.compile(r"^\s*(?:export\s+)?NCCL_[A-Z0-9_]+=")),
)
_ASSIGN = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    literal = source.endswith(".conf")
    env: dict[str, str] = {}
    conf_lines: list[str] = []
    for line in r.content():
        text = line.text.strip()
        if line.kind != "text" or not text or text.startswith("#"):
            continue
        match = _ASSIGN.match(text)
        if match is None:
            continue  # prose or another program's output; listed if it looks like NCCL
        where = Where(source, line.number, text)
        with r.statement(line.number):
            if literal:
                if text.startswith("export"):
                    raise where.error("NCCL reads .conf files literally; write NAME=value without 'export'")
                if match.group(2)[:1] in ("'", '"'):
                    raise where.error(f"NCCL reads .conf values literally: the quotes would be part of "
                                      f"{match.group(1)}")
                conf_lines.append(text)
            else:
                try:
                    words = shell_words(match.group(2), comments=True) if match.group(2) else [""]
                except ValueError as exc:
                    raise where.error(f"value does not parse as a shell word: {exc}") from None
                if len(words) > 1:
                    raise where.error(f"value of {match.group(1)} must be one word; quote it if it holds spaces")
                env[match.group(1)] = words[0] if words else ""
            r.use(line.number)
    # Lines checked above are plain NAME=value, so the host doctor's /etc/nccl.conf reader is the one that reads them.
    if literal:
        env = parse_nccl_conf("\n".join(conf_lines))
    return Deployed(device=device or device_from_source(source), kind="host", format=FORMAT, source=source,
                    nccl_env=env)
