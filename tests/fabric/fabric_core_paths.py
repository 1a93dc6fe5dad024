"""Paths shared by the fabric-core tests."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "fabric"
SPECS = FIXTURES / "specs"
