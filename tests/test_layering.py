"""The dependency rule of ARCHITECTURE.md, checked by walking imports in the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tensorfabric"
BASE = {"errors", "units", "findings", "topology", "samples", "fsutil", "registry", "roce", "signals", "intake",
        "metrics_catalogue", "jsonable", "yamlload", "jsonload"}
NO_TORCH = {"fabric", "sim", "host", "telemetry", "lab"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_dependency_rule(path: Path) -> None:
    rel = path.relative_to(SRC)
    top = rel.parts[0].removesuffix(".py")
    imports = _imports(path)
    project = {m.split(".")[1] for m in imports if m.startswith("tensorfabric.") and m.count(".") >= 1}
    if top not in {"cli", "__main__"}:
        assert "cli" not in project, f"{rel} imports tensorfabric.cli; nothing may import the CLI"
    if top in BASE:
        assert project <= BASE, f"base module {rel} imports {project - BASE}"
    if top in NO_TORCH:
        assert not any(m == "torch" or m.startswith("torch.") for m in imports), f"{rel} imports torch"
    if top == "sim":
        assert "telemetry" not in project, f"{rel}: the simulator never imports telemetry"


# Edges between the subsystems that ARCHITECTURE.md allows; any other cross-subsystem import is a layering bug.
SUBSYSTEMS = {"host", "fabric", "sim", "telemetry", "transfer", "lab", "inference", "fleet"}
ALLOWED = {
    ("fabric", "host"),  # one parser per host artefact (mlnx_qos, nccl.conf), one set of NCCL checks
    ("transfer", "host"),
    ("inference", "transfer"),
    ("telemetry", "lab"),
    ("fleet", "host"),  # the doctor each rank runs, the records it reads
    ("fleet", "transfer"),  # the launcher and the process group the reports and pairs travel over
    ("fleet", "lab"),  # one rank per lab host
}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_subsystem_edges(path: Path) -> None:
    rel = path.relative_to(SRC)
    top = rel.parts[0].removesuffix(".py")
    if top not in SUBSYSTEMS:
        return
    project = {m.split(".")[1] for m in _imports(path) if m.startswith("tensorfabric.") and m.count(".") >= 1}
    for other in sorted(project & SUBSYSTEMS - {top}):
        assert (top, other) in ALLOWED, f"{rel} imports tensorfabric.{other}; allowed edges: {sorted(ALLOWED)}"


# --- import cycles -----------------------------------------------------------------------------------------------

def _module_names() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in _modules():
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _edges(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, wherever in it the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]))
                continue
            if isinstance(child, ast.Import):
                out.update(m for a in child.names if (m := owner(a.name)))
            elif isinstance(child, ast.ImportFrom):
                base = package
                for _ in range(child.level - 1):
                    base = base.rpartition(".")[0]
                module = (f"{base}.{child.module}" if child.module else base) if child.level else child.module or ""
                subs = {f"{module}.{a.name}" for a in child.names} & known.keys()
                out.update(subs or ({m} if (m := owner(module)) else set()))
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    out.discard(name)
    return out


def _cycles() -> list[tuple[str, ...]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    known = _module_names()
    graph = {name: sorted(_edges(name, path, known)) for name, path in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[tuple[str, ...]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(tuple(sorted(component)))
    return sorted(found)


# Cycles in rooms other helpers are rebuilding at the time of writing; each entry goes when its room is done.
KNOWN_CYCLES: dict[tuple[str, ...], str] = {}


def test_no_import_cycles() -> None:
    """No two modules of src/tensorfabric import each other, directly or around a circle.

    The graph: one node per module (a package is its ``__init__``); an edge for every ``import x`` and ``from x
    import y`` naming a project module (``from pkg import sub`` counts as importing ``pkg.sub`` when ``sub`` is a
    module), relative imports resolved. Imports under ``if TYPE_CHECKING:`` are left out: they never run. Imports
    inside functions are counted: a late import that exists to dodge a circle is still the circle, only moved to
    the first call. The implicit import of a parent package (``import a.b`` runs ``a/__init__``) is not an edge:
    every package would otherwise form a circle with any submodule its ``__init__`` re-exports.
    """
    cycles = _cycles()
    unexpected = [c for c in cycles if c not in KNOWN_CYCLES]
    assert not unexpected, f"import cycles (strongly connected components): {unexpected}"
    gone = [c for c in KNOWN_CYCLES if c not in cycles]
    assert not gone, f"these listed cycles are broken now; remove them from KNOWN_CYCLES: {gone}"
