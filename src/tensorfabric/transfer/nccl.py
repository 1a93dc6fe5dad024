"""The host-doctor hook: derived NCCL environment before init, transport verification after it.

Only the NCCL backend uses this module; Gloo/CPU runs never import :mod:`tensorfabric.host`.

* :func:`apply_env` writes a derived NCCL environment into the process environment (NCCL reads it there)
  but never overwrites a variable the user already set.
* :func:`capture_log` arranges for NCCL_DEBUG=INFO output to land in a file during init and the first
  collective (unless the user chose their own NCCL_DEBUG/NCCL_DEBUG_FILE), and :func:`verify` hands that text
  to ``tensorfabric.host.nccl_log.parse_nccl_log`` to learn the transport really used.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from tensorfabric.errors import InputError, ParseError, TransferError
from tensorfabric.fsutil import SCRATCH_ENV, scratch_dir

__all__ = ["LogCapture", "TRANSPORT_CHECKS", "apply_env", "capture_log", "verify"]

log = logging.getLogger(__name__)

TRANSPORT_CHECKS = ("any", "rdma", "warn")


def apply_env(nccl_env: Mapping[str, str] | None, environ: MutableMapping[str, str]) -> dict[str, str]:
    """Set each variable of ``nccl_env`` that ``environ`` lacks; return the ones actually applied."""
    applied: dict[str, str] = {}
    for key, value in (nccl_env or {}).items():
        if key not in environ:
            environ[key] = str(value)
            applied[key] = str(value)
        elif environ[key] != str(value):
            log.info("keeping user setting %s=%s (derived %s)", key, environ[key], value)
    return applied


@dataclass(frozen=True)
class LogCapture:
    """Where NCCL writes its log during init; ``path`` is None when the user's own settings win."""

    path: Path | None

    def read(self) -> str:
        if self.path is None:
            return ""
        texts = [p.read_text(errors="replace") for p in sorted(self.path.parent.glob(self.path.name + "*"))]
        return "\n".join(texts)

    def discard(self) -> None:
        """Remove the capture's directory once its text is read (NCCL's open file descriptor keeps working)."""
        if self.path is not None:
            import shutil

            shutil.rmtree(self.path.parent, ignore_errors=True)


def capture_log(environ: MutableMapping[str, str]) -> LogCapture:
    if "NCCL_DEBUG" in environ or "NCCL_DEBUG_FILE" in environ:
        return LogCapture(None)
    scratch = environ.get(SCRATCH_ENV)
    # Under the launcher's scratch directory when there is one: a killed rank then leaves nothing behind.
    base = Path(scratch_dir("nccl", scratch))
    base = base / "nccl.log"
    environ["NCCL_DEBUG"] = "INFO"
    environ["NCCL_DEBUG_SUBSYS"] = environ.get("NCCL_DEBUG_SUBSYS", "INIT,ENV,NET")
    # NCCL expands %h (host) and %p (pid); read() globs for the expanded name.
    environ["NCCL_DEBUG_FILE"] = f"{base}.%h.%p"
    return LogCapture(base)


def verify(text: str, require_transport: str, *, group: str) -> str:
    """Parse NCCL's log and return the transport ("nccl/roce", "nccl/socket", ...), enforcing the policy."""
    if require_transport not in TRANSPORT_CHECKS:
        raise InputError(f"require_transport: {require_transport!r} is not one of {', '.join(TRANSPORT_CHECKS)}")
    from tensorfabric.host.nccl_log import parse_nccl_log

    try:
        result = parse_nccl_log(text)
    except ParseError as exc:
        # An empty or NCCL-less capture happens when the user chose their own NCCL_DEBUG: nothing proves the
        # transport, so "rdma" refuses to go on and the other policies carry on with "unknown".
        if require_transport == "rdma":
            raise TransferError(
                f"cannot prove NCCL uses RDMA: no NCCL INFO log was captured ({exc}); unset NCCL_DEBUG and "
                "NCCL_DEBUG_FILE so tensorfabric can capture it", op="init", group=group) from exc
        log.warning("NCCL transport unknown: no NCCL INFO log captured (%s)", exc)
        return "nccl/unknown"
    transport = str(result.transport)
    # rdma is True for RoCE, IB and RDMA net plugins (IBext, ...); False for sockets.
    if require_transport == "any" or result.rdma:
        return f"nccl/{transport}"
    message = (f"NCCL is using transport {transport!r}, not RDMA (RoCE/IB); collectives will run far slower. "
               "Check `tensorfabric doctor`; set NCCL_NET=IB to make NCCL fail instead of falling back.")
    if require_transport == "rdma":
        raise TransferError(message, op="init", group=group)
    log.warning("%s", message)
    return f"nccl/{transport}"
