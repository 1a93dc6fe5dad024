"""An NCCL environment file (``/etc/nccl.conf``, ``~/.nccl.conf`` or a shell ``.env``) into a host Deployed.

Accepts ``NAME=value`` lines, ``#`` comments and blank lines, read by the one reader of such files
(``host.nccl_conf``): a ``.conf`` file as NCCL reads it (the value is everything after the first ``=``, quotes
included; ``export`` or spaces around ``=`` make a variable NCCL never looks up; the first assignment wins), any
other file as a shell-sourced ``.env`` (``export`` allowed, values unquoted as the shell would, the last wins).
A line that does not set what it appears to is a warning naming it.
"""

from __future__ import annotations

import re

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.parsers._common import Where, device_from_source
from tensorfabric.fabric.parsers._read import Reading
from tensorfabric.host.nccl_conf import read_env_file

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "nccl-env"
NAME = "NCCL environment file"
SUFFIXES = (".env", ".conf")
EXPECTED = "NCCL_*=value lines (/etc/nccl.conf, ~/.nccl.conf or a shell .env)"
MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("NCCL_*=value", re.compile(r"^\s*(?:export\s+)?NCCL_[A-Z0-9_]+=")),
)


def read(r: Reading, *, device: str | None = None) -> Deployed:
    source = r.source
    # A paste's indentation is presentation (quotes, lists), not part of the file NCCL would read.
    lines = [(line.number, line.text.lstrip()) for line in r.content() if line.kind == "text"]
    env = read_env_file(lines, "nccl" if source.endswith(".conf") else "shell")
    for found in env.assignments:
        with r.statement(found.line):
            if found.effective:
                r.use(found.line)
            if found.problem:
                raise Where(source, found.line, "").error(found.problem)
    return Deployed(device=device or device_from_source(source), kind="host", format=FORMAT, source=source,
                    nccl_env=dict(env.values))
