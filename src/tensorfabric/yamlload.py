"""The one YAML loader: fabric specs, sweep specs and link maps all come through :func:`load_yaml`.

Safe loading only (libyaml's parser where PyYAML was built with it), with two caps a user's file cannot get past:
nesting depth (:data:`MAX_DEPTH`: PyYAML's pure-Python composer and constructor recurse once per level, so
``[[[[…`` ends in RecursionError long before any memory limit) and size (:data:`MAX_CHARS`). Both are ordinary
``yaml.YAMLError``\\ s with a line, so a reader that already reports malformed YAML reports them too.
:func:`read_yaml` is the file form for the CLI's readers: the file gate of :func:`~tensorfabric.fsutil.read_input`,
UTF-8, the caps, and the root kind, each refused in one line that names the option and the accepted form.
"""

from __future__ import annotations

from typing import Any

import yaml

from tensorfabric.errors import InputError
from tensorfabric.fsutil import read_input

__all__ = ["LOADER", "MAX_CHARS", "MAX_DEPTH", "SAFE_LOADER", "TooDeep", "TooLarge", "check_depth", "load_yaml",
           "read_yaml"]

MAX_DEPTH = 64
"""Deepest nesting of lists and mappings taken. A fabric spec is about six levels deep; 64 leaves room for any
hand-written file and stays far below the ~300 levels where the pure-Python loader runs out of stack."""

MAX_CHARS = 64 * 1024 * 1024
"""Largest YAML text taken: a 4096-host fabric spec is a few MB, and the built objects take ~10x the text."""

SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it (about 10x faster), else the pure-Python one."""


class TooDeep(yaml.MarkedYAMLError):
    """Lists and mappings nested deeper than :data:`MAX_DEPTH`."""

    def __init__(self, mark: Any) -> None:
        super().__init__(problem=f"nested deeper than {MAX_DEPTH} levels", problem_mark=mark)


class TooLarge(yaml.YAMLError):
    """Text over :data:`MAX_CHARS`."""

    def __init__(self, size: int) -> None:
        super().__init__(f"{size} characters; at most {MAX_CHARS} are read")
        self.problem = str(self)


class _Loader(SAFE_LOADER):  # type: ignore[misc]
    """The safe loader with its implicit-tag resolution memoised: a fabric spec repeats the same few scalars
    (``eth0``, ``400G``, ``copper``) thousands of times, and each was matched against the resolver's regexes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._tags: dict[tuple[Any, Any, Any], str] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if self.yaml_path_resolvers:  # a path resolver makes the tag depend on where the node is
            return str(super().resolve(kind, value, implicit))
        key = (kind, value, implicit)
        tag = self._tags.get(key)
        if tag is None:
            tag = self._tags[key] = super().resolve(kind, value, implicit)
        return tag


LOADER: Any = _Loader
"""The loader class (for ``yaml.compose`` when a reader wants node marks for its messages)."""

_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
# Scalars whose value depends only on tag and text (so one construction serves every repeat).
_SCALARS = frozenset(f"tag:yaml.org,2002:{kind}" for kind in ("null", "bool", "int", "float", "timestamp"))
_NONE = object()


class _Unusual(Exception):
    """A document the quick construction leaves to PyYAML's own (merge keys, other tags, recursive aliases,
    collections as keys, several documents, errors)."""


def _scalar(loader: Any, event: yaml.ScalarEvent, tag: str, built: dict[tuple[str, str], Any]) -> Any:
    key = (tag, event.value)
    value = built.get(key, _NONE)
    if value is _NONE:
        if tag not in _SCALARS:
            raise _Unusual
        value = built[key] = loader.yaml_constructors[tag](loader, yaml.ScalarNode(tag, event.value))
    return value


def _from_events(loader: Any) -> Any:
    """The document built straight from the parser's events, as PyYAML's safe constructor builds it from nodes.

    Composing a node tree (a node and two marks per scalar) and walking it with a generator per collection was
    nearly all of a large spec's load; the events alone are a fifth of it. Only plain maps, lists and the safe
    scalar tags are built here; anything else raises :class:`_Unusual`, and nesting past the cap :class:`TooDeep`.
    """
    built: dict[tuple[str, str], Any] = {}
    anchors: dict[str, Any] = {}
    unfinished: set[str] = set()
    stack: list[list[Any]] = []  # per open collection: [container, key awaiting its value, anchor]
    if loader.yaml_path_resolvers:
        raise _Unusual
    loader.get_event()  # stream start
    if loader.check_event(yaml.StreamEndEvent):
        return None
    loader.get_event()  # document start
    result: Any = None
    get_event, resolve, scalar_event, scalar_node = loader.get_event, loader.resolve, yaml.ScalarEvent, yaml.ScalarNode
    while True:
        event = get_event()
        kind = event.__class__
        value: Any
        if kind is scalar_event:
            tag = event.tag
            if tag is None or tag == "!":
                tag = resolve(scalar_node, event.value, event.implicit)
            value = event.value if tag == _STR else _scalar(loader, event, tag, built)
        elif kind is yaml.AliasEvent:
            if event.anchor not in anchors or event.anchor in unfinished:
                raise _Unusual
            value = anchors[event.anchor]
        elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
            mapping = kind is yaml.MappingStartEvent
            if len(stack) >= MAX_DEPTH:
                raise TooDeep(event.start_mark)
            if event.tag not in (None, "!", _MAP if mapping else _SEQ):
                raise _Unusual
            container: Any = {} if mapping else []
            if event.anchor is not None:
                anchors[event.anchor] = container
                unfinished.add(event.anchor)
            stack.append([container, _NONE, event.anchor])
            continue
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            value, _, anchor = stack.pop()
            unfinished.discard(anchor)
        elif kind is yaml.DocumentEndEvent and not stack:
            break
        else:
            raise _Unusual
        if kind is scalar_event and event.anchor is not None:
            anchors[event.anchor] = value
        if not stack:
            result = value
            continue
        frame = stack[-1]
        if frame[0].__class__ is list:
            frame[0].append(value)
        elif frame[1] is _NONE:
            if value.__class__ is dict or value.__class__ is list:
                raise _Unusual  # PyYAML says "found unhashable key" with the line
            frame[1] = value
        else:
            frame[0][frame[1]] = value
            frame[1] = _NONE
    if not loader.check_event(yaml.StreamEndEvent):
        raise _Unusual  # PyYAML says "expected a single document"
    return result


def check_depth(text: str) -> None:
    """TooDeep for text nested past the cap, from the events alone (no recursion), before PyYAML builds it (or a
    reader composes it for node lines)."""
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise TooDeep(event.start_mark)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)`` with libyaml's parser where available, a quicker construction, and the depth and
    size caps. Raises :class:`yaml.YAMLError` as ``safe_load`` does (:class:`TooDeep` and :class:`TooLarge`
    among them)."""
    if len(text) > MAX_CHARS:
        raise TooLarge(len(text))
    loader = _Loader(text)
    try:
        return _from_events(loader)
    except TooDeep:
        raise
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" in str(exc.problem):  # libyaml's own cap (1000 flow levels), met first
            raise TooDeep(exc.problem_mark) from None
    except Exception:  # noqa: BLE001, S110 - PyYAML's own construction decides, with its own messages
        pass
    finally:
        loader.dispose()
    check_depth(text)
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader (libyaml's when available)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (an empty document)"
    names: dict[type, str] = {dict: "a mapping", list: "a list", str: "a single string"}
    return names.get(type(value), f"a {type(value).__name__}")


def read_yaml(path: str, what: str, *, root: type[dict[Any, Any]] | type[list[Any]], example: str) -> Any:
    """The YAML (or JSON) file ``path`` given for ``what`` (an option or argument name, e.g. ``--links``), whose
    top level must be a ``root`` (dict or list); InputError in one line otherwise, ending with ``example``, the
    accepted form in words ("a list of links such as 'leaf0:Ethernet0 h0:1'")."""
    raw = read_input(path, what)
    try:
        data = load_yaml(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path!r}: not UTF-8 text (byte {exc.start}); give {example}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        if not isinstance(exc, TooDeep | TooLarge):
            problem = f"not valid YAML ({problem})"
        raise InputError(f"{what} {path!r}: {problem}{where}; give {example}") from None
    if not isinstance(data, root):
        raise InputError(f"{what} {path!r}: the file holds {_kind(data)}; give {example}")
    return data
