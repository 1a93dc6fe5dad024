"""Render is linear in hosts: the topology is built at most once per spec, never once per host (no timing asserted
here; ``benchmarks/fabric_render.py`` measures 64 -> 4096 hosts)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tensorfabric import topology
from tensorfabric.fabric.renderers import render_all, render_fabric
from tensorfabric.fabric.starter import starter_spec
from tensorfabric.host.ncclenv import nccl_env_for_nics

_SPECS = Path(__file__).resolve().parents[1] / "fixtures" / "fabric" / "specs"


def test_topology_is_built_at_most_once_per_render(monkeypatch: pytest.MonkeyPatch) -> None:
    # Host plans read each host's NICs (FabricSpec.topology_nics); the whole topology is never built per host.
    built = []
    original = topology.Fabric.__init__

    def counting(self: topology.Fabric, *args: object, **kwargs: object) -> None:
        built.append(1)
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(topology.Fabric, "__init__", counting)
    spec = starter_spec(leaves=4, spines=2, hosts_per_leaf=16)
    items = render_fabric(spec, nccl_env_for_nics)
    assert len(items) == 6 + 64
    assert len(built) <= 1


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


@pytest.mark.parametrize("name", ["fabric.yaml", "fabric-reference.yaml", "fabric-dscp-mismatch.yaml", "mixed"])
def test_memoised_headroom_is_headroom_for_port_on_every_switch_port(name: str) -> None:
    # switch_plans computes headroom once per (equal ASIC records, speed, cable, MTU): it must be what each port
    # alone gives.
    from tensorfabric.fabric.headroom import headroom_for_port
    from tensorfabric.fabric.plan import switch_plans
    from tensorfabric.fabric.spec import load_spec

    spec = _mixed_spec() if name == "mixed" else load_spec(Path(__file__).resolve().parents[2] / "examples" / name)
    for plan in switch_plans(spec):
        for port in plan.ports:
            room = headroom_for_port(spec, f"{plan.name}:{port.name}")
            assert (port.xon_offset, port.dynamic_th) == ((room.xon_offset_bytes, room.dynamic_th or 0) if room
                                                          else (None, 0))
            if room is not None and port.headroom is not None:
                assert port.headroom.xon_bytes == room.xon_bytes
                assert port.headroom.xoff_bytes in (room.xoff_bytes, port.headroom.size_bytes - room.xon_bytes)


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


def _mixed_spec() -> Any:
    """A starter fabric whose hosts and leaves differ in the ways a shared render must keep apart."""
    import yaml

    from tensorfabric.fabric.spec import parse_spec
    from tensorfabric.fabric.starter import starter_yaml

    data = yaml.safe_load(starter_yaml(leaves=4, spines=2, hosts_per_leaf=4, speed_bps=400e9, nos="sonic",
                                       asic="spectrum4"))
    hosts, switches = data["hosts"], {s["name"]: s for s in data["switches"]}
    hosts[1]["nics"][0]["qos"] = {"dscp_map": {10: 5}}
    hosts[2]["nics"][0]["vendor"] = "intel"
    hosts[3]["nics"][0]["cable_length"] = "7m"
    hosts[4]["nics"][0]["rdma_device"] = "mlx5_4"
    hosts[5]["nccl"] = {"tc": 104}
    hosts[6]["nics"][0]["qos"] = {"ecn_enabled": False, "storm_prevention_ms": 200}
    switches["leaf2"]["qos"] = {"ecn": {"kmin": "100KB", "kmax": "1MB", "pmax": 20}, "pfc_priorities": [3, 4]}
    switches["leaf3"]["qos"] = {"watchdog": {"enabled": False}}
    switches["spine2"]["asic"] = "spectrum3"  # headroom is shared between switches with equal ASIC records only
    switches["leaf4"]["ports"][1] = {"name": switches["leaf4"]["ports"][1], "cable_length": "12m"}
    return parse_spec(data)


@pytest.mark.parametrize("which", ["mixed", "starter", *sorted(p.name for p in _SPECS.glob("*.yaml"))])
def test_shared_rendering_writes_what_each_device_alone_gives(which: str) -> None:
    # render_fabric lets alike hosts share one script body and alike SONiC switches their tables after PORT
    # (host_plans hands equal hosts the same records); every file must still be what its plan alone renders.
    from tensorfabric.fabric.plan import host_plans, switch_plans
    from tensorfabric.fabric.renderers import HOST_RENDERER, RENDERERS
    from tensorfabric.fabric.spec import load_spec

    spec = (_mixed_spec() if which == "mixed" else starter_spec(leaves=2, spines=1, hosts_per_leaf=3)
            if which == "starter" else load_spec(_SPECS / which))
    alone = [RENDERERS.get(p.nos).render(p) for p in switch_plans(spec)]
    alone += [HOST_RENDERER.render(p) for p in host_plans(spec, nccl_env_for_nics)]
    assert [item.text for item in render_fabric(spec, nccl_env_for_nics)] == alone
    if which == "mixed":
        texts = {item.device: item.text for item in render_fabric(spec, nccl_env_for_nics)}
        assert len({texts[f"h{i}"].split("\n", 3)[3] for i in range(1, 17)}) == 7  # six odd hosts + the alike rest
        assert len({texts[f"leaf{i}"].split('"DSCP_TO_TC_MAP"')[1] for i in range(1, 5)}) == 4


def test_alike_hosts_share_their_plan_records() -> None:
    from tensorfabric.fabric.plan import host_plans

    plans = {p.name: p for p in host_plans(_mixed_spec(), nccl_env_for_nics)}
    assert plans["h1"].nics is plans["h8"].nics and plans["h1"].nccl_env is plans["h12"].nccl_env
    assert plans["h2"].nics is not plans["h1"].nics and plans["h6"].nccl_env is not plans["h1"].nccl_env
    assert plans["h2"].nics[0].dscp_to_priority != plans["h1"].nics[0].dscp_to_priority
