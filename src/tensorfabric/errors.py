"""The one exception tree of tensorfabric.

::

    TensorFabricError
     ├── InputError        bad user input: flags, specs, files (CLI exit code 2)
     │    └── ParseError   a file or stream that does not parse; carries source, line and excerpt
     ├── DiscoveryError    the host could not be inspected (sysfs unreadable, tool failed)
     ├── TransferError     a collective failed or timed out; carries op, group and peer
     ├── DataError         numbers that are not numbers: damaged weights (checksum, NaN/Inf), non-finite logits
     ├── LabError          network-namespace lab could not be built or driven
     └── SimulationError   the simulator was asked for something it cannot compute

    KeyboardInterrupt
     └── Interrupted       SIGTERM or SIGHUP, raised like SIGINT's KeyboardInterrupt (tensorfabric.signals)

Library code raises these and never prints or exits; only ``tensorfabric.cli`` maps them to messages and
exit codes. Lower-layer exceptions are translated at the boundary with ``raise ... from exc``.
"""

from __future__ import annotations

__all__ = [
    "DataError",
    "DiscoveryError",
    "InputError",
    "Interrupted",
    "LabError",
    "ParseError",
    "SimulationError",
    "TensorFabricError",
    "TransferError",
]


class TensorFabricError(Exception):
    """Base of every error tensorfabric raises on purpose."""


class InputError(TensorFabricError, ValueError):
    """Bad user input. The message names the offending value and the accepted form."""


class ParseError(InputError):
    """Input that does not parse.

    ``source`` names the file or stream, ``line`` is 1-based (``None`` when not line-oriented) and
    ``excerpt`` holds the offending text, shortened for display.
    """

    def __init__(
        self, message: str, *, source: str = "<input>", line: int | None = None, excerpt: str = ""
    ) -> None:
        self.source = source
        self.line = line
        self.excerpt = excerpt[:120]
        where = source if line is None else f"{source}:{line}"
        text = f"{where}: {message}"
        if self.excerpt:
            text += f" (near {self.excerpt!r})"
        super().__init__(text)


class DiscoveryError(TensorFabricError):
    """The host could not be inspected."""


class TransferError(TensorFabricError):
    """A collective or point-to-point transfer failed or timed out.

    ``op`` is the collective's name, ``group`` the group's name and ``peer`` the rank (global) that
    failed or did not answer, when known.
    """

    def __init__(self, message: str, *, op: str = "", group: str = "", peer: int | None = None) -> None:
        self.op = op
        self.group = group
        self.peer = peer
        parts = [p for p in (f"op={op}" if op else "", f"group={group}" if group else "",
                             f"peer={peer}" if peer is not None else "") if p]
        super().__init__(f"{message} [{' '.join(parts)}]" if parts else message)


class DataError(TensorFabricError):
    """Data that cannot be right: a weight file that no longer matches its checksum, a tensor holding NaN or
    Inf, logits that stopped being finite. Exit 1: the command ran and found the numbers wrong; the message names
    the file, tensor or step and the likely cause."""


class LabError(TensorFabricError):
    """The network-namespace lab could not be built, driven or torn down."""


class SimulationError(TensorFabricError):
    """The simulator cannot compute what it was asked for."""


class Interrupted(KeyboardInterrupt):
    """A termination signal (SIGTERM, SIGHUP) delivered as an interrupt, so cleanup runs as it does for Ctrl-C.

    ``signum`` is the signal; ``exit_code`` the shell's convention for death by it (128 + signum: 143, 129).
    """

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        self.exit_code = 128 + signum
        super().__init__(signal.Signals(signum).name)
