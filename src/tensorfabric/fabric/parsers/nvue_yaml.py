"""Cumulus Linux NVUE configuration trees: ``/etc/nvue.d/startup.yaml``, ``nv config show`` (YAML) and
``nv config show -o json``.

Every form holds the tree the ``nv set`` commands build: ``- header:`` (model, ``nvue-api-version``, version) and
``- set:`` with ``qos: roce: mode: lossless``, ``qos: mapping: default-global: dscp: '26': switch-priority: 3``,
``interface: swp1-32: qos: pfc-watchdog: {}`` and so on; ``-o json`` prints the same as ``[{"header": {...}},
{"set": {...}}]`` or, on some releases, the bare tree. Each leaf is one ``nv set`` line (its path and value), read
by the one NVUE model (:class:`~tensorfabric.fabric.parsers.nvue.Model`): the same facts as the commands.

The tree is read line by line from its indentation (block YAML and pretty-printed JSON alike), so an excerpt cut
at any line keeps what its lines say: a leaf whose parents the cut lost cannot be placed and is skipped. A JSON
object printed on one line is read whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

from tensorfabric.fabric.deployed import Deployed
from tensorfabric.fabric.parsers._common import Where
from tensorfabric.fabric.parsers._read import Reading, markers
from tensorfabric.fabric.parsers.nvue import Model
from tensorfabric.jsonload import load_json

__all__ = ["EXPECTED", "FORMAT", "MARKERS", "NAME", "SUFFIXES", "read"]

FORMAT = "nvue-yaml"
NAME = "NVUE startup.yaml"
SUFFIXES = (".yaml", ".yml")
EXPECTED = ("an NVUE configuration tree: /etc/nvue.d/startup.yaml, 'nv config show' or 'nv config show -o json' "
            "('- set:' with 'qos:' and 'interface:' trees)")
_Q = r"""["']?"""
MARKERS = markers(
    ("nvue-api-version", rf"^{_Q}nvue-api-version{_Q}\s*:"),
    ("- set:", r"^-\s+set:\s*$|^\{?\s*\"set\"\s*:\s*\{"),
    ("roce:", rf"^{_Q}roce{_Q}\s*:"),
    ("pfc-watchdog:", rf"^{_Q}pfc-watchdog{_Q}\s*:"),
    ("congestion-control:", rf"^{_Q}congestion-control{_Q}\s*:"),
    ("egress-scheduler:", rf"^{_Q}egress-(?:scheduler|queue-mapping){_Q}\s*:"),
    ("default-global:", rf"^{_Q}default-global{_Q}\s*:"),
    ("switch-priority:", rf"^{_Q}switch-priority{_Q}\s*:"),
    ("one-line JSON qos tree", r'"qos": ?\{ ?"(?:roce|mapping|pfc|pfc-watchdog|congestion-control|egress-scheduler)"'),
)
# One line of a tree: indentation, an optional list dash, a key (quoted, or plain up to ": "), and the rest.
# The plain key is lazy but bounded, and ends at the first ':' followed by a blank or the line's end.
_LINE = re.compile(
    r"""^(?P<indent> {0,256})(?:- {1,8})?"""
    r"""(?P<key>"[^"\n]{1,256}"|'[^'\n]{1,256}'|[^\s"'#{}\[\],-][^\n]{0,255}?)"""
    r"""[ \t]*:(?:[ \t]+(?P<value>[^\n]{0,4096}))?$""")
_BRACKETS = frozenset("{}[], ")
_TOPS = frozenset({"qos", "interface", "system"})
_WRAPPERS = frozenset({"set"})
_IGNORED = frozenset({"header", "unset", "config"})
_ROOT_INDENT = 6
"""Deepest a tree's top keys sit: under ``- set:`` (4) or ``[{"set": {`` (6); an interface's own ``qos:`` is deeper."""


def _scalar(value: str) -> str:
    value = value.strip().removesuffix(",").strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _key(raw: str) -> str:
    raw = raw.strip()
    return raw[1:-1] if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'" else raw


def _walk(obj: Any, path: list[str], emit: Callable[[list[str]], None]) -> None:
    """The leaves of a parsed JSON value as ``set`` paths (one-line JSON). Iterative: no nesting limit to hit."""
    stack: list[tuple[Any, list[str]]] = [(obj, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, dict):
            if not node:
                emit(at)
            for key, value in reversed(list(node.items())):
                stack.append((value, [*at, str(key)]))
        elif isinstance(node, list):
            stack.extend((item, at) for item in reversed(node))
        elif node is None:
            emit(at)
        else:
            emit([*at, ("on" if node else "off") if isinstance(node, bool) else str(node)])


def read(r: Reading, *, device: str | None = None) -> Deployed:
    model = Model()
    stack: list[tuple[int, str, int]] = []  # (indent, key, line number) of the open containers
    version: str | None = None

    lines = [line for line in r.content() if line.text.strip()[:1] not in ("", "#")]
    # An excerpt may start inside an interface: its "qos:" must not pass for the global one, so a key with no
    # parent in the text is a top key only at the paste's least indentation, and only that shallow.
    top = min((m.start("key") for m in (_LINE.match(ln.text[:4096]) for ln in lines) if m is not None), default=0)

    def apply(path: list[str], number: int, ancestors: list[int], root: int) -> None:
        nonlocal version
        if root != top or root > _ROOT_INDENT:
            return  # a subtree whose parents the excerpt lost: cannot be placed
        while path and path[0] in _WRAPPERS:
            path = path[1:]
        if path[:1] == ["header"] and path[1:2] == ["version"] and len(path) > 2:
            version = path[2]
            r.use(number)
            return
        if not path or path[0] in _IGNORED or path[0] not in _TOPS:
            return
        text = "nv set " + " ".join(path)
        with r.statement(number):
            if model.set(path, Where(r.source, number, text[:200])):
                r.use(number)
                for line in ancestors:
                    r.use(line)
            elif path[0] == "qos":
                r.unknown(number)

    for line in lines:
        text = line.text.rstrip()
        stripped = text.strip()
        if not stripped or stripped.startswith("#") or set(stripped) <= _BRACKETS:
            continue
        if stripped[0] in "[{" and len(stripped) > 2:
            try:
                whole = load_json(stripped, what="NVUE JSON", source="")
            except (ValueError, RecursionError):
                whole = None
            if whole is not None:
                _walk(whole, [], partial(apply, number=line.number, ancestors=[], root=top))
                continue
        match = _LINE.match(text[:4096])
        if match is None:
            continue
        indent = match.start("key")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = _key(match.group("key"))
        raw = (match.group("value") or "").strip()
        value = _scalar(raw)
        path = [k for _, k, _ in stack] + [key]
        ancestors = [n for _, _, n in stack]
        root = stack[0][0] if stack else indent
        if raw in ("", "{", "["):
            stack.append((indent, key, line.number))
        elif value in ("{}", "[]", "null", "~", "{},", "[],"):
            apply(path, line.number, ancestors, root)
        else:
            apply([*path, value], line.number, ancestors, root)
    if version is not None:
        r.tally.version = version
    return model.deployed(r.source, device, FORMAT)
