"""Parse and format sizes, rates, durations and lengths.

Accepted forms (case-insensitive suffixes, optional space, decimal numbers):

* sizes (bytes): ``8``, ``512B``, ``4KB`` (4000), ``4KiB`` (4096), ``128M``, ``16MiB``, ``1GB``, ``1GiB``.
  A bare ``K``/``M``/``G`` on a size means binary (KiB, MiB, GiB), as nccl-tests' ``-b 8 -e 128M``.
* rates (bits per second): ``400G``, ``100gbit``, ``25Gbps``, ``1gbit``, ``200mbit``, ``10kbit``, ``9600bps``.
* durations (seconds): ``200ms``, ``5us``, ``10ns``, ``1.5s``, ``2m`` is refused (ambiguous) -- use ``2min``.
* lengths (metres): ``5m``, ``300m``, ``2km``, ``50cm``.

A rate or a length is never guessed: ``400`` (string or number) could be bit/s, Mb/s or Gb/s, ``5`` metres or
feet, so both refuse a value without a unit and name the accepted forms. Sizes keep bytes and durations seconds
as their documented base unit.

Every parser raises :class:`~tensorfabric.errors.InputError` naming the value and the accepted form.
"""

from __future__ import annotations

import math
import re

from tensorfabric.errors import InputError

__all__ = [
    "format_duration",
    "format_rate",
    "format_size",
    "parse_duration",
    "parse_length",
    "parse_rate",
    "parse_size",
]

_NUMBER = re.compile(r"^\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-zµ/]*)\s*$")

_SIZE_UNITS: dict[str, int] = {
    "": 1, "b": 1,
    "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
}
_RATE_UNITS: dict[str, float] = {
    "bit": 1.0, "bps": 1.0,
    "k": 1e3, "kbit": 1e3, "kbps": 1e3, "kb/s": 1e3,
    "m": 1e6, "mbit": 1e6, "mbps": 1e6, "mb/s": 1e6,
    "g": 1e9, "gbit": 1e9, "gbps": 1e9, "gb/s": 1e9, "gbe": 1e9,
    "t": 1e12, "tbit": 1e12, "tbps": 1e12, "tb/s": 1e12, "b/s": 1.0,
}
_DURATION_UNITS: dict[str, float] = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0, "h": 3600.0,
    "d": 86400.0,
}
_LENGTH_UNITS: dict[str, float] = {"m": 1.0, "cm": 0.01, "mm": 0.001, "km": 1000.0}


def _split(text: object, what: str, example: str) -> tuple[float, str]:
    if isinstance(text, bool):
        raise InputError(f"{what}: {text!r} is not a number; use a form such as {example}")
    if isinstance(text, int | float):
        if not math.isfinite(text):
            raise InputError(f"{what}: {text!r} is not finite; use a form such as {example}")
        return float(text), ""
    if not isinstance(text, str):
        raise InputError(f"{what}: {text!r} must be a string such as {example}")
    match = _NUMBER.match(text)
    if match is None:
        raise InputError(f"{what}: {text!r} is not a valid {what}; use a form such as {example}")
    value = float(match.group(1))
    if not math.isfinite(value):
        raise InputError(f"{what}: {text!r} is not finite; use a form such as {example}")
    return value, match.group(2).lower()


def _lookup(table: dict[str, float] | dict[str, int], unit: str, text: object, what: str,
            example: str) -> float:
    if unit not in table:
        accepted = ", ".join(sorted(k for k in table if k)) or "none"
        raise InputError(
            f"{what}: unknown unit in {text!r}; use a form such as {example} (units: {accepted})"
        )
    return float(table[unit])


def parse_size(text: str | int | float, *, what: str = "size", allow_zero: bool = False) -> int:
    """Parse a byte size such as ``128M`` (binary), ``16MiB`` or ``1GB`` (decimal) into bytes."""
    example = "'8', '4K', '16MiB', '128M' or '1GB'"
    value, unit = _split(text, what, example)
    nbytes = value * _lookup(_SIZE_UNITS, unit, text, what, example)
    if nbytes < 0 or (nbytes == 0 and not allow_zero):
        raise InputError(f"{what}: {text!r} must be a positive size such as {example}")
    if nbytes != int(nbytes):
        raise InputError(f"{what}: {text!r} is not a whole number of bytes")
    return int(nbytes)


_RATE_FORMS = "bps, K/M/G/T, optionally followed by bit, bps or b/s"
_LENGTH_FORMS = "mm, cm, m, km"


def _unit_required(text: object, unit: str, what: str, example: str, forms: str) -> None:
    if unit == "":
        raise InputError(f"{what}: {text!r} has no unit (a unit is never guessed); use a form such as {example} "
                         f"(units: {forms})")


def parse_rate(text: str | int | float, *, what: str = "rate") -> float:
    """Parse a link rate such as ``400G``, ``100gbit``, ``200mbit`` into bits per second (a unit is required)."""
    example = "'400G', '100gbit', '25Gbps' or '200mbit'"
    value, unit = _split(text, what, example)
    _unit_required(text, unit, what, example, _RATE_FORMS)
    bps = value * _lookup(_RATE_UNITS, unit, text, what, example)
    if bps <= 0:
        raise InputError(f"{what}: {text!r} must be a positive rate such as {example}")
    return bps


def parse_duration(text: str | int | float, *, what: str = "duration", allow_zero: bool = False) -> float:
    """Parse a duration such as ``200ms``, ``5us`` or ``1.5s`` into seconds (a bare number is seconds)."""
    example = "'200ms', '5us', '1.5s' or '10min'"
    value, unit = _split(text, what, example)
    seconds = value * _lookup(_DURATION_UNITS | {"": 1.0}, unit, text, what, example)
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise InputError(f"{what}: {text!r} must be a positive duration such as {example}")
    return seconds


def parse_length(text: str | int | float, *, what: str = "length") -> float:
    """Parse a cable length such as ``5m``, ``300m`` or ``2km`` into metres (a unit is required)."""
    example = "'5m', '300m' or '2km'"
    value, unit = _split(text, what, example)
    _unit_required(text, unit, what, example, _LENGTH_FORMS)
    metres = value * _lookup(_LENGTH_UNITS, unit, text, what, example)
    if metres <= 0:
        raise InputError(f"{what}: {text!r} must be a positive length such as {example}")
    return metres


def format_size(nbytes: float, *, binary: bool = True) -> str:
    """``format_size(134217728) == '128MiB'``; exact multiples print without decimals."""
    base, names = (1024.0, ["B", "KiB", "MiB", "GiB", "TiB"]) if binary else (
        1000.0, ["B", "KB", "MB", "GB", "TB"])
    value = float(nbytes)
    for name in names:
        if abs(value) < base or name == names[-1]:
            return f"{value:.0f}{name}" if value == int(value) else f"{value:.2f}{name}"
        value /= base
    raise AssertionError("unreachable")


def format_rate(bps: float) -> str:
    """``format_rate(4e11) == '400Gbit/s'``."""
    for scale, name in ((1e12, "Tbit/s"), (1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if abs(bps) >= scale:
            value = bps / scale
            return f"{value:.0f}{name}" if value == int(value) else f"{value:.2f}{name}"
    return f"{bps:.0f}bit/s"


def format_duration(seconds: float) -> str:
    """Human form with a unit chosen by magnitude: ``'350us'``, ``'12.5ms'``, ``'1.20s'``."""
    magnitude = abs(seconds)
    if magnitude >= 1.0:
        return f"{seconds:.2f}s"
    if magnitude >= 1e-3:
        return f"{seconds * 1e3:.3g}ms"
    if magnitude >= 1e-6:
        return f"{seconds * 1e6:.3g}us"
    return f"{seconds * 1e9:.3g}ns"
