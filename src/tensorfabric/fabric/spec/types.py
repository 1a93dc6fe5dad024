"""Field types of the fabric spec: unit-aware speeds, lengths and sizes, DSCP and priority ranges.

Values are stored in base units (bit/s, metres, bytes) and accepted in the forms :mod:`tensorfabric.units` parses
(``400G``, ``5m``, ``1.5MB``). A speed or length without a unit is refused (never guessed); sizes default to bytes.
Dumping a spec writes speeds and lengths back with their unit, so a dump loads again. A unit error keeps
the units module's wording; the loader prefixes the field path.
"""

from __future__ import annotations

import math
from functools import lru_cache, partial
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, WithJsonSchema

from tensorfabric import units

__all__ = ["Dscp", "Length", "Mtu", "Percent", "Priority", "Size", "Speed", "SpecModel", "Text", "UNIT_PREFIX",
           "check_text"]

# Unit parsers are called with what="value" so the loader can swap the prefix for the field path.
UNIT_PREFIX = "value: "


_MAX_SPEED_BPS = 1e14  # 100 Tb/s: far above any port, keeps headroom arithmetic finite
_MAX_LENGTH_M = 100_000.0  # 100 km: beyond any PFC span


# A large spec repeats a few unit strings thousands of times ("400G", "3m"): each is parsed once. Errors are not
# cached (lru_cache keeps results only), so every bad value still raises where it stands.
_parse_rate = lru_cache(maxsize=256)(partial(units.parse_rate, what="value"))
_parse_length = lru_cache(maxsize=256)(partial(units.parse_length, what="value"))


def _speed(value: Any) -> Any:
    if not isinstance(value, str | int | float):
        return value
    bps = _parse_rate(value)
    if not bps <= _MAX_SPEED_BPS:  # also refuses NaN, which units lets through for numeric input
        raise ValueError(f"{UNIT_PREFIX}{value!r} is above 100T; use a port speed such as '400G'")
    return bps


def _length(value: Any) -> Any:
    if not isinstance(value, str | int | float):
        return value
    metres = _parse_length(value)
    if not metres <= _MAX_LENGTH_M:
        raise ValueError(f"{UNIT_PREFIX}{value!r} is above 100km; use a cable length such as '5m'")
    return metres


def _size(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{UNIT_PREFIX}{value!r} is not a finite size; use a form such as '150KB'")
    return units.parse_size(value, what="value") if isinstance(value, str | int | float) else value


def _speed_text(bps: float) -> str:
    # A dumped spec must load back: values keep an explicit unit, exactly (bare numbers are refused on input).
    gbps = bps / 1e9
    return f"{int(gbps)}G" if gbps.is_integer() and int(gbps) * 1e9 == bps else f"{bps!r}bps"


def _length_text(metres: float) -> str:
    return f"{int(metres)}m" if float(metres).is_integer() else f"{metres!r}m"


def check_text(value: str) -> str:
    """Free text (vendor, model, names) reaches rendered files and comments: one printable line only."""
    if not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise ValueError(f"holds a newline or control character ({bad!r}); use one line of printable text")
    if len(value) > 255:
        raise ValueError("is longer than 255 characters")
    return value


def _unit_schema(description: str, example: str) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}], "description": description,
                           "examples": [example]})


Speed = Annotated[float, BeforeValidator(_speed), PlainSerializer(_speed_text, return_type=str),
                  _unit_schema("link rate with a unit (G = Gb/s, M = Mb/s, bps); a bare number is refused", "400G")]
Length = Annotated[float, BeforeValidator(_length), PlainSerializer(_length_text, return_type=str),
                   _unit_schema("cable length with a unit (m, cm, km); a bare number is refused", "5m")]
Size = Annotated[int, BeforeValidator(_size), _unit_schema("bytes, or with a unit (KB = 1000, KiB = 1024)", "150KB")]
Text = Annotated[str, AfterValidator(check_text)]
Dscp = Annotated[int, Field(ge=0, le=63)]
Priority = Annotated[int, Field(ge=0, le=7)]
Percent = Annotated[int, Field(ge=0, le=100)]
Mtu = Annotated[int, Field(ge=576, le=16384)]


class SpecModel(BaseModel):
    """Shared pydantic settings: frozen records, unknown keys refused, YAML names as aliases."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
