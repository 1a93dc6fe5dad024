"""Checks and quoting for values that reach a shell script: every host-script renderer goes through these."""

from __future__ import annotations

import re

from tensorfabric.errors import InputError
from tensorfabric.fabric.renderers._escape import shell, text

__all__ = ["HOST", "NETDEV", "RDMA", "name", "num"]

# No leading "-" (it would read as an option to mlnx_qos/ip/ethtool/dcb); no ":" or "/" (the kernel refuses them).
NETDEV = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")
RDMA = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


def name(value: str, pattern: re.Pattern[str], what: str) -> str:
    """``value`` checked against ``pattern`` and shell-quoted."""
    if not pattern.fullmatch(text(value, what)) or value in (".", ".."):
        raise InputError(f"{what}: {value!r} is not a valid name (letters, digits, _ . -, not starting with '-'; "
                         "Linux netdevs at most 15 characters)")
    return shell(value, what)


def num(value: int, lo: int, hi: int, what: str) -> str:
    """``value`` checked to be an integer in ``lo..hi``."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"{what}: {value!r} must be an integer {lo}..{hi}")
    return str(value)
