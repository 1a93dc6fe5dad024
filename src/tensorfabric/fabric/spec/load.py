"""Loading a fabric spec: YAML text -> validated :class:`FabricSpec`, with errors that name the field path.

pydantic reports locations as tuples (``('links', 3, 'cable_length')``); we print them as ``links[3].cable_length``
and, when the YAML node can be found, add its line number.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tensorfabric.errors import InputError, ParseError
from tensorfabric.fabric.spec.model import FabricSpec
from tensorfabric.fabric.spec.types import UNIT_PREFIX
from tensorfabric.fsutil import read_input
from tensorfabric.yamlload import LOADER as _LOADER
from tensorfabric.yamlload import load_yaml

__all__ = ["field_path", "load", "load_spec", "load_text", "load_yaml", "parse_spec", "validate"]

_MAX_REPORTED = 4


def field_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":
            out += "(key)"
        else:
            out += f".{part}" if out else str(part)
    return out or "(spec)"


def _message(error: Any) -> str:
    path = field_path(error["loc"])
    kind = error["type"]
    given = error.get("input")
    cause = (error.get("ctx") or {}).get("error")
    if kind == "value_error" and cause is not None:
        text = str(cause)
        if not error["loc"]:
            return text  # cross-field checks already name their own path
        if text.startswith(UNIT_PREFIX):
            return f"{path}: {text[len(UNIT_PREFIX):]}"
        return f"{path}: {given!r} {text}" if not isinstance(given, dict | list) else f"{path}: {text}"
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "extra_forbidden":
        return f"{path}: unknown field"
    form = _FORMS.get(kind)
    if form is not None:
        return f"{path}: {given!r} is not {form[0]}; give {form[1]}"
    if kind == "literal_error":
        return f"{path}: {given!r} is not accepted: {error['msg'].replace('Input should be', 'use')}"
    if isinstance(given, dict | list):
        return f"{path}: {error['msg']}"
    return f"{path}: {given!r} is not accepted ({error['msg']})"


# pydantic's error types in the words of a spec: what the field holds, and an example of the accepted form
_FORMS = {
    "tuple_type": ("a list", "a YAML list such as [Ethernet0, Ethernet4]"),
    "list_type": ("a list", "a YAML list such as [Ethernet0, Ethernet4]"),
    "dict_type": ("a mapping", "indented 'key: value' lines"),
    "model_type": ("a mapping", "indented 'key: value' lines"),
    "int_type": ("an integer", "a whole number such as 4"),
    "int_parsing": ("an integer", "a whole number such as 4"),
    "int_from_float": ("an integer", "a whole number such as 4"),
    "float_type": ("a number", "a number such as 0.5"),
    "float_parsing": ("a number", "a number such as 0.5"),
    "bool_type": ("true or false", "true or false"),
    "bool_parsing": ("true or false", "true or false"),
    "string_type": ("text", "a name such as leaf1 (quote it if it looks like a number)"),
}


def _line_of(root: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    node = root
    line = None if node is None else node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            nxt = node.value[part]
        else:
            nxt = None
        if nxt is None:
            break
        node = nxt
        line = node.start_mark.line + 1
    return line


def _cross_field_loc(text: str) -> list[int | str]:
    # Messages of the model-level checks start with a path such as "links[3].b: ..."; recover it for the line.
    head = text.split(":", 1)[0]
    loc: list[int | str] = []
    for piece in head.replace("]", "").split("."):
        name, _, index = piece.partition("[")
        if name:
            loc.append(name)
        if index.isdigit():
            loc.append(int(index))
    return loc


def validate(data: Any, *, source: str = "<spec>", text: str | None = None, base_dir: Path | None = None,
             ) -> FabricSpec:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ParseError(f"a spec must be a mapping with switches/hosts/links, got {type(data).__name__}",
                         source=source)
    try:
        # base_dir: where relative paths in the spec (asic.table) are read from -- the spec file's directory.
        return FabricSpec.model_validate(data, context={"base_dir": base_dir or Path.cwd()})
    except ValidationError as exc:
        errors = exc.errors()
        # A list whose only item failed also reports "too short" for the list itself: noise next to the real cause.
        errors = [e for e in errors if not (e["type"] == "too_short" and any(
            o is not e and tuple(o["loc"][:len(e["loc"])]) == tuple(e["loc"]) for o in errors))] or errors
        messages = [_message(e) for e in errors[:_MAX_REPORTED]]
        more = len(errors) - _MAX_REPORTED
        message = "; ".join(messages) + (f"; and {more} more" if more > 0 else "")
        first = errors[0]
        loc = first["loc"] or _cross_field_loc(messages[0])
        raise ParseError(message, source=source, line=_line_of(_compose(text), loc)) from None


def _compose(text: str | None) -> yaml.Node | None:
    # Only on the error path: the node tree exists to find the line of the offending field.
    if text is None:
        return None
    try:
        return yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError:
        return None


def load_text(text: str, *, source: str = "<spec>", base_dir: Path | None = None) -> FabricSpec:
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ParseError(f"malformed YAML: {problem}", source=source,
                         line=mark.line + 1 if mark is not None else None) from None
    return validate(data, source=source, text=text, base_dir=base_dir)


def load(path: str | Path) -> FabricSpec:
    target = Path(path)
    if not target.exists() and not target.is_symlink():
        raise InputError(f"spec: {str(target)!r} does not exist; give a YAML fabric spec file")
    data = read_input(target, "spec")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"spec: {str(target)!r} is not UTF-8 text (byte {exc.start}); give a YAML fabric spec "
                         "file") from None
    return load_text(text, source=str(target), base_dir=target.parent)


def parse_spec(data: Any, *, source: str = "<spec>") -> FabricSpec:
    """Validate already-loaded YAML/JSON data; errors name the field path."""
    return validate(data, source=source)


def load_spec(path: str | Path) -> FabricSpec:
    """Read and validate a YAML spec file; every problem becomes a ParseError/InputError naming the field path."""
    return load(path)
