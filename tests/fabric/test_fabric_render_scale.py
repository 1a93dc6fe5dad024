"""Render is linear in hosts: the topology is built once per spec, not once per host (no timing asserted here;
``benchmarks/fabric_render.py`` measures 64 -> 4096 hosts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorfabric import topology
from tensorfabric.fabric.init import starter_spec
from tensorfabric.fabric.renderers import render_all, render_fabric
from tensorfabric.host.ncclenv import nccl_env_for_nics


def test_topology_is_built_once_per_render(monkeypatch: pytest.MonkeyPatch) -> None:
    built = []
    original = topology.Fabric.__init__

    def counting(self: topology.Fabric, *args: object, **kwargs: object) -> None:
        built.append(1)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(topology.Fabric, "__init__", counting)
    spec = starter_spec(leaves=4, spines=2, hosts_per_leaf=16)
    items = render_fabric(spec, nccl_env_for_nics)
    assert len(items) == 6 + 64
    assert len(built) == 1


def test_render_all_writes_every_file_or_none(tmp_path: Path) -> None:
    spec = starter_spec(leaves=2, spines=1, hosts_per_leaf=3)
    paths = render_all(spec, tmp_path / "out")
    assert sorted(p.name for p in paths) == sorted(p.name for p in (tmp_path / "out").iterdir())
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temporary left behind
    assert all((p.stat().st_mode & 0o777) == (0o755 if p.suffix == ".sh" else 0o644) for p in paths)
