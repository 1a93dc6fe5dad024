"""The dependency rule of ARCHITECTURE.md, checked by walking imports in the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "tensorfabric"
BASE = {"errors", "units", "findings", "topology", "samples", "fsutil", "registry", "roce", "signals", "intake"}
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
