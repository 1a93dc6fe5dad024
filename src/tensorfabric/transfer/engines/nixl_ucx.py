"""What a NIXL agent needs from the process around it: the wheel, UCX's environment, UCX's log, NIXL's logging.

Environment: UCX reads the process environment, so :func:`prepare_ucx_env` (the one place the NIXL engine writes
it) sets ``UCX_MODULES=^efa`` (the wheel's EFA module crashes at exit when Debian's ibverbs-providers is
installed) and the log capture that proves the transport (:mod:`tensorfabric.host.ucx_log`), never overriding a
variable the user set. The engine (:mod:`~tensorfabric.transfer.engines.nixl_engine`) and the KV transfer
(:mod:`tensorfabric.transfer.kv`) share these.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

__all__ = ["available", "prepare_ucx_env", "read_ucx_log", "route_nixl_logging"]


def available() -> bool:
    """Whether the NIXL wheel (``nixl-cu12``) can be imported here."""
    try:
        import nixl_cu12  # noqa: F401
    except ImportError:
        return False
    return True


def prepare_ucx_env(environ: MutableMapping[str, str], log_path: str | None) -> None:
    """Set what UCX must see before the agent exists, keeping every user setting."""
    environ.setdefault("UCX_MODULES", "^efa")
    if log_path is not None:
        environ["UCX_LOG_LEVEL"] = "info"
        environ["UCX_LOG_FILE"] = log_path


def read_ucx_log(log_path: str | None) -> str:
    """This process's UCX log so far (``%p`` in ``log_path`` is the pid); '' when it was not captured."""
    from pathlib import Path

    if log_path is None:
        return ""
    _flush_c_stdio()
    try:
        return Path(log_path.replace("%p", str(os.getpid()))).read_text(errors="replace")
    except OSError:
        return ""


def route_nixl_logging() -> None:
    """nixl_cu12 logs INFO lines to **stdout** (it would corrupt ``--json``); send them to the root logger
    (stderr) at WARNING unless the user chose ``NIXL_LOG_LEVEL``."""
    import logging
    import sys

    logger = logging.getLogger("nixl")
    for handler in list(logger.handlers):
        if getattr(handler, "stream", None) is sys.stdout:
            logger.removeHandler(handler)
    logger.propagate = True
    if "NIXL_LOG_LEVEL" not in os.environ:
        logger.setLevel(logging.WARNING)


def _flush_c_stdio() -> None:
    """UCX logs through a buffered C ``FILE*``; ``fflush(NULL)`` pushes its lines to the file now."""
    import ctypes

    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
