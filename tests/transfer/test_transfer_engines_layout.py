"""The engine layout holds: only ``transfer/engines/`` knows which engine a group runs, and Group stays small.

A branch on an engine anywhere else (``if group.nixl is not None``, ``engine == "torch"``,
``isinstance(comm, NixlCommunicator)``) is how the seven ``if``s this package replaced crept in; the scan
below finds them by syntax, so it needs no engine installed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tensorfabric
from tensorfabric.transfer.engines import ENGINES
from tensorfabric.transfer.group import Group

SRC = Path(tensorfabric.__file__).parent
ENGINES_DIR = SRC / "transfer" / "engines"
NAMES = frozenset(ENGINES.names())


def _engine_classes() -> frozenset[str]:
    """Every class defined in transfer/engines/ (communicators, routers, the NIXL engine itself)."""
    found = set()
    for path in ENGINES_DIR.glob("*.py"):
        found |= {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)}
    return frozenset(found)


def _names_an_engine(node: ast.AST, classes: frozenset[str]) -> bool:
    """A string that is an engine's name, an identifier that carries one (``use_nixl``, ``group.nixl``;
    the ``torch`` module itself excepted), or an engine class."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and sub.value in NAMES:
            return True
        ident = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else None
        if ident is None:
            continue
        if ident in classes or (ident != "torch" and NAMES & set(ident.lower().split("_"))):
            return True
    return False


def engine_branches(source: str, classes: frozenset[str]) -> list[int]:
    """Line numbers of comparisons, ``isinstance``/``issubclass`` calls and ``if``/``while``/conditional
    tests in ``source`` that ask which engine is in use."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            asked: list[ast.AST] = [node]
        elif isinstance(node, (ast.If, ast.IfExp, ast.While, ast.Assert)):
            asked = [node.test]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
            asked = [node.args[1]]
        else:
            continue
        if any(_names_an_engine(a, classes) for a in asked):
            hits.append(node.lineno)
    return sorted(set(hits))


def test_the_scan_finds_the_branches_it_is_for() -> None:
    source = ("if group.nixl is not None:\n    pass\n"
              "x = 1 if engine == 'torch' else 2\n"
              "ok = isinstance(comm, NixlCommunicator)\n"
              "if use_nixl:\n    pass\n"
              "fine = t.dtype != torch.bool and t.device.type == 'cpu'\n")
    assert engine_branches(source, frozenset({"NixlCommunicator"})) == [1, 3, 4, 5]


def test_no_engine_branching_outside_transfer_engines() -> None:
    classes = _engine_classes()
    assert {"Communicator", "Router"} <= classes
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        if ENGINES_DIR in path.parents:
            continue
        lines = engine_branches(path.read_text(), classes)
        if lines:
            found[str(path.relative_to(SRC))] = lines
    assert not found, f"engine-type branching outside transfer/engines/ (ask the communicator instead): {found}"


def test_group_has_at_most_15_public_methods() -> None:
    public = [n for n, v in vars(Group).items() if not n.startswith("_") and (callable(v) or isinstance(v, property))]
    assert len(public) <= 15, public
