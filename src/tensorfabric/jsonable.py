"""The one ``json.dumps(default=...)`` hook for ``--json`` documents: records serialise through their ``to_dict``,
sets and tuples as lists, numpy scalars as Python numbers; anything else is a TypeError naming the type."""

from __future__ import annotations

from typing import Any

__all__ = ["json_default"]


def json_default(obj: Any) -> Any:
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if hasattr(obj, "item"):  # numpy scalars, as simulator parameters carry them
        return obj.item()
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")
