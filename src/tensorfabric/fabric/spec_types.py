"""Field types of the fabric spec: unit-aware speeds, lengths and sizes, DSCP and priority ranges.

Values are stored in base units (bit/s, metres, bytes) and accepted in the forms :mod:`tensorfabric.units` parses
(``400G``, ``5m``, ``1.5MB``). A unit error keeps the units module's wording; the loader prefixes the field path.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from tensorfabric import units

__all__ = ["Dscp", "Length", "Mtu", "Percent", "Priority", "Size", "Speed", "SpecModel", "UNIT_PREFIX"]

# Unit parsers are called with what="value" so the loader can swap the prefix for the field path.
UNIT_PREFIX = "value: "


def _speed(value: Any) -> Any:
    return units.parse_rate(value, what="value") if isinstance(value, str | int | float) else value


def _length(value: Any) -> Any:
    return units.parse_length(value, what="value") if isinstance(value, str | int | float) else value


def _size(value: Any) -> Any:
    return units.parse_size(value, what="value") if isinstance(value, str | int | float) else value


def _unit_schema(description: str, example: str) -> WithJsonSchema:
    return WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}], "description": description,
                           "examples": [example]})


Speed = Annotated[float, BeforeValidator(_speed), _unit_schema("link rate; bit/s or with a unit", "400G")]
Length = Annotated[float, BeforeValidator(_length), _unit_schema("cable length; metres or with a unit", "5m")]
Size = Annotated[int, BeforeValidator(_size), _unit_schema("bytes, or with a unit (KB = 1000, KiB = 1024)", "150KB")]
Dscp = Annotated[int, Field(ge=0, le=63)]
Priority = Annotated[int, Field(ge=0, le=7)]
Percent = Annotated[int, Field(ge=0, le=100)]
Mtu = Annotated[int, Field(ge=576, le=16384)]


class SpecModel(BaseModel):
    """Shared pydantic settings: frozen records, unknown keys refused, YAML names as aliases."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
