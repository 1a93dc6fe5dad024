"""Rooms stay small enough to read: no module over 450 lines and no function over 80 (issue 30, acceptance 4),
except those docs/architecture.md lists in its allow-list table, each with a reason.

A listed entry that is no longer over its limit fails too, so the list only ever names real exceptions."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "tensorfabric"
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80
_ROW = re.compile(r"^\| `([^`]+)` \| (\d+) \| (.+) \|$")


def _allowed() -> dict[str, str]:
    """``path`` or ``path:qualname`` -> reason, from the table between the allow-list markers."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("<!-- sizes:allow-list -->", 1)[1].split("<!-- /sizes:allow-list -->", 1)[0]
    rows = {m[1]: m[3].strip() for line in block.splitlines() if (m := _ROW.match(line.strip()))}
    # No rows under the header is the goal reached (every exception split), not a malformed table.
    assert rows or "| item | lines | reason |" in block, "docs/architecture.md: the allow-list table is malformed"
    return rows


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            end = node.end_lineno or node.lineno
            out.append((prefix + node.name, end - node.lineno + 1))
            out += _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            out += _functions(node, f"{prefix}{node.name}.")
        else:
            out += _functions(node, prefix)
    return out


def _oversized() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found[rel] = lines
        for name, length in _functions(ast.parse(text, filename=rel)):
            if length > MAX_FUNCTION_LINES:
                found[f"{rel}:{name}"] = length
    return found


def test_no_module_or_function_over_the_limit_unless_listed_with_a_reason() -> None:
    allowed = _allowed()
    found = _oversized()
    unlisted = {k: v for k, v in found.items() if k not in allowed}
    assert not unlisted, (f"over {MAX_MODULE_LINES} lines (module) or {MAX_FUNCTION_LINES} (function): {unlisted}; "
                          "split along a real seam, or list it in docs/architecture.md with a reason")
    stale = sorted(k for k in allowed if k not in found)
    assert not stale, f"no longer over the limit, remove from docs/architecture.md's allow-list: {stale}"
    assert all(len(reason) > 20 for reason in allowed.values()), "every allow-list entry needs its reason"
