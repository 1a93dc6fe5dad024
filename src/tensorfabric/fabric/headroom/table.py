"""SONiC's ``pg_profile_lookup.ini``: the vendor's own lossless-PG headroom table, read and answered exactly.

SONiC's traditional buffer model looks a lossless profile up by port speed and cable length in this file of the
device's SKU directory (``device/<vendor>/<platform>/<SKU>/pg_profile_lookup.ini``). One row per line::

    # speed cable size xon xoff threshold [xon_offset]
     100000    5m 133120 19456 113664 0

``speed`` is Mb/s (the column's unit in SONiC, as in ``PORT|Ethernet0 speed``), ``cable`` a length with its
``m`` suffix, the four buffer columns bytes; ``threshold`` is the profile's ``dynamic_th`` (a signed exponent) and
``xon_offset`` is present on Broadcom SKUs. ``#`` starts a comment. :func:`lookup` answers only what the table
holds: a speed or cable length the table lacks is an InputError naming what it has, never an interpolation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tensorfabric.errors import InputError, ParseError
from tensorfabric.fsutil import read_input
from tensorfabric.units import format_rate

__all__ = ["HeadroomTable", "TableRow", "load_table", "lookup", "parse_table"]

_MAX_BYTES = 4 * 1024 * 1024  # real tables are a few KB; refuse anything that cannot be one


@dataclass(frozen=True, slots=True)
class TableRow:
    speed_mbps: int
    cable_m: float
    cable_text: str
    size: int
    xon: int
    xoff: int
    threshold: int
    xon_offset: int | None
    line: int

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"speed_mbps": self.speed_mbps, "cable": self.cable_text, "size": self.size,
                                  "xon": self.xon, "xoff": self.xoff, "threshold": self.threshold}
        if self.xon_offset is not None:
            out["xon_offset"] = self.xon_offset
        return out


@dataclass(frozen=True, slots=True)
class HeadroomTable:
    source: str
    rows: tuple[TableRow, ...]

    def speeds(self) -> list[int]:
        return sorted({r.speed_mbps for r in self.rows})

    def cables(self, speed_mbps: int) -> list[str]:
        rows = sorted((r for r in self.rows if r.speed_mbps == speed_mbps), key=lambda r: r.cable_m)
        return [r.cable_text for r in rows]


def _int(word: str, what: str, source: str, line: int, text: str, *, signed: bool = False) -> int:
    body = word[1:] if signed and word[:1] == "-" else word
    if not body.isascii() or not body.isdigit() or len(body) > 12:
        raise ParseError(f"{what} {word!r} is not {'an integer' if signed else 'a whole number'}", source=source,
                         line=line, excerpt=text)
    return int(word)


def _cable(word: str, source: str, line: int, text: str) -> float:
    # SONiC writes cable lengths with their unit ("5m", "300m"); a bare number would be a guess.
    body = word[:-1] if word.endswith("m") else ""
    try:
        metres = float(body) if body.isascii() and body.replace(".", "", 1).isdigit() else -1.0
    except ValueError:
        metres = -1.0
    if metres <= 0:
        raise ParseError(f"cable {word!r} must be a length in metres such as '5m' or '300m'", source=source,
                         line=line, excerpt=text)
    return metres


def parse_table(text: str, *, source: str = "pg_profile_lookup.ini") -> HeadroomTable:
    """Parse the file's text; every malformed line is a ParseError naming the line."""
    if len(text) > _MAX_BYTES:
        raise ParseError(f"{len(text)} characters is far beyond a lookup table (at most {_MAX_BYTES})", source=source)
    rows: list[TableRow] = []
    seen: dict[tuple[int, float], int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        body = raw.split("#", 1)[0]
        words = body.split()
        if not words:
            continue
        if len(words) not in (6, 7):
            raise ParseError(f"expected 'speed cable size xon xoff threshold [xon_offset]', got {len(words)} "
                             "columns", source=source, line=number, excerpt=raw)
        speed = _int(words[0], "speed (Mb/s)", source, number, raw)
        if not 1 <= speed <= 100_000_000:
            raise ParseError(f"speed {speed} Mb/s is out of range", source=source, line=number, excerpt=raw)
        cable = _cable(words[1], source, number, raw)
        size, xon, xoff = (_int(w, name, source, number, raw) for w, name in zip(words[2:5], ("size", "xon", "xoff"),
                                                                                 strict=True))
        threshold = _int(words[5], "threshold", source, number, raw, signed=True)
        offset = _int(words[6], "xon_offset", source, number, raw) if len(words) == 7 else None
        key = (speed, cable)
        if key in seen:
            raise ParseError(f"{speed} Mb/s {words[1]} is listed twice (first on line {seen[key]})", source=source,
                             line=number, excerpt=raw)
        seen[key] = number
        rows.append(TableRow(speed, cable, words[1], size, xon, xoff, threshold, offset, number))
    if not rows:
        raise ParseError("no profile rows (expected lines 'speed cable size xon xoff threshold [xon_offset]')",
                         source=source)
    return HeadroomTable(source, tuple(rows))


def load_table(path: str | os.PathLike[str]) -> HeadroomTable:
    """A SONiC ``pg_profile_lookup.ini`` through the one file gate (a FIFO or a device is refused before any open)."""
    target = os.fspath(path)
    if not os.path.lexists(target):
        raise InputError(f"table: {target!r} does not exist; give a SONiC pg_profile_lookup.ini")
    data = read_input(target, "headroom table (a SONiC pg_profile_lookup.ini)", max_bytes=_MAX_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"headroom table {target!r} is not UTF-8 text (byte {exc.start}); give a SONiC "
                         "pg_profile_lookup.ini") from None
    return parse_table(text, source=target)


def lookup(table: HeadroomTable, speed_bps: float, cable_m: float, *, round_up: bool = False) -> TableRow:
    """The row for exactly this speed and cable length, as SONiC's buffer manager would pick it.

    ``round_up``: the row of the shortest listed cable at least ``cable_m`` long -- what an operator configures
    for a cable between two rows (a 3 m cable as ``5m``); a longer row always holds more headroom.
    """
    speed_mbps = round(speed_bps / 1e6)
    if abs(speed_mbps * 1e6 - speed_bps) > 0.5:
        raise InputError(f"speed: {format_rate(speed_bps)} is not a whole number of Mb/s; the table is keyed by Mb/s")
    speeds = table.speeds()
    if speed_mbps not in speeds:
        listed = ", ".join(format_rate(s * 1e6).replace("bit/s", "") for s in speeds)
        raise InputError(f"speed: {format_rate(speed_bps)} is not in {table.source} (it lists {listed}); "
                         "the table answers only what it holds")
    rows = sorted((r for r in table.rows if r.speed_mbps == speed_mbps), key=lambda r: r.cable_m)
    for row in rows:
        if abs(row.cable_m - cable_m) < 1e-9 or (round_up and row.cable_m > cable_m):
            return row
    raise InputError(f"cable: {cable_m:g}m is not in {table.source} for {format_rate(speed_bps)} (it lists "
                     f"{', '.join(table.cables(speed_mbps))}); configure the cable length the table has, or use a "
                     "formula preset (--asic)")
