"""Render is linear in hosts: the topology is built once per spec, not once per host (no timing asserted here;
``benchmarks/fabric_render.py`` measures 64 -> 4096 hosts)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tensorfabric import topology
from tensorfabric.fabric.renderers import render_all, render_fabric
from tensorfabric.fabric.starter import starter_spec
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


_DOCUMENTS = (
    "a: 1\nb: [1, 2.5, true, null, ~, 2001-12-14, '3', 0x1F, .inf, off]\n", "x: &a {k: v}\ny: *a\n",
    "<<: {a: 1}\nb: 2\n", "base: &b {a: 1}\nd:\n  <<: *b\n  c: 2\n", "? [1, 2]\n: x\n", "!!binary aGVsbG8=", "",
    "a: !!str 12\nb: !!int '7'\n", "a: &r [*r]\n", "k: 1\nk: 2\n", "a: &x 5\nb: *x\n", "a: *x\n",
    "---\na: 1\n---\nb: 2\n", "--- 3\n...\n", "!!map {a: 1}", "!!set {a, b}", "!!omap [a: 1]", "a: !foo x\n",
    "k: [unclosed", "\u00e9: \u00fc\n", "{[1]: 2}", "a: &m {x: 1}\n*m : 2\n", "- &s [1, 2]\n- *s\n", "a: 1\n  b: 2\n",
    "a:\n", "[]", "{}", "- - - 1\n", "= : 1\n", "[" * 64 + "]" * 64,
)


@pytest.mark.parametrize("document", _DOCUMENTS)
def test_the_quick_yaml_loader_builds_what_safe_load_builds(document: str) -> None:
    # Built from libyaml's events, with PyYAML's own construction for the unusual: same values, same errors
    # (up to the depth cap, tests/test_yamlload.py).
    import yaml

    from tensorfabric.yamlload import SAFE_LOADER, load_yaml

    def outcome(load: Callable[[str], Any]) -> Any:
        try:
            return repr(load(document))
        except yaml.YAMLError as exc:
            return type(exc).__name__, str(exc)

    assert outcome(load_yaml) == outcome(lambda text: yaml.load(text, Loader=SAFE_LOADER))  # noqa: S506


def test_a_starter_spec_loads_as_safe_load_reads_it() -> None:
    import yaml

    from tensorfabric.fabric.spec.load import load_yaml
    from tensorfabric.fabric.starter import starter_yaml

    text = starter_yaml(leaves=3, spines=2, hosts_per_leaf=4, speed_bps=400e9, nos="sonic", asic="spectrum4")
    assert load_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize("name", ["fabric.yaml", "fabric-reference.yaml", "fabric-dscp-mismatch.yaml"])
def test_memoised_headroom_is_headroom_for_port_on_every_switch_port(name: str) -> None:
    # switch_plans computes headroom once per (ASIC, speed, cable, MTU): it must be what each port alone gives.
    from tensorfabric.fabric.headroom import headroom_for_port
    from tensorfabric.fabric.plan import switch_plans
    from tensorfabric.fabric.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "examples" / name)
    for plan in switch_plans(spec):
        for port in plan.ports:
            room = headroom_for_port(spec, f"{plan.name}:{port.name}")
            assert (port.xon_offset, port.dynamic_th) == ((room.xon_offset_bytes, room.dynamic_th or 0) if room
                                                          else (None, 0))
            if room is not None and port.headroom is not None:
                assert port.headroom.xon_bytes == room.xon_bytes


def test_sonic_json_encoder_writes_what_json_dumps_writes() -> None:
    import json

    from tensorfabric.fabric.renderers.sonic import _dumps

    table = {"A": {}, "B": {"k\u00e9y": "v\"al\\ue\n", "n": {"x": "1", "y": {}}}, "C": {"z": {"w": "\u2028"}}}
    assert _dumps(table) == json.dumps(table, indent=2)
    assert _dumps({}) == json.dumps({}, indent=2)
    with pytest.raises(TypeError):
        _dumps({"a": 1})


def test_one_listing_still_finds_every_same_named_entry_before_writing(tmp_path: Path) -> None:
    from tensorfabric.errors import InputError

    spec = starter_spec(leaves=1, spines=1, hosts_per_leaf=2)
    (tmp_path / "h2.sh").symlink_to(tmp_path / "nowhere")  # a dangling symlink is an entry the render would replace
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match=r"already holds h2\.sh \(1 file"):
        render_all(spec, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h2.sh", "notes.txt"]
    assert len(render_all(spec, tmp_path / "new" / "dir")) == 4
