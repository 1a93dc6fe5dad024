"""Fixture trees for the host doctor: the captured-layout hosts and writable copies to vary one fact at a time."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SYSFS = FIXTURES / "sysfs"
LOGS = FIXTURES / "nccl_logs"
GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "host"


@pytest.fixture
def clone(tmp_path: Path) -> Callable[[str], Path]:
    """Copy a fixture host (symlinks kept as links) into tmp_path so a test can change one file."""

    def make(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(SYSFS / name, target, symlinks=True)
        return target

    return make


def write(root: Path, rel: str, text: str) -> None:
    """Write through the tree's own symlinks, the way the kernel's attribute would change."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
