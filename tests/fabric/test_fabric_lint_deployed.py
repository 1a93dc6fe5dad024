"""Linter over deployed configs: rendered files read back through fabric-io's parsers lint clean, and a minimal
edit to one deployed file fires exactly the rule it breaks -- with the spec, and with only the deployed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorfabric.fabric.lint import lint
from tensorfabric.fabric.parsers import parse_deployed
from tensorfabric.fabric.renderers import render_all
from tensorfabric.fabric.spec import FabricSpec, load_spec
from tensorfabric.host.ncclenv import nccl_env_for_nics

from .fabric_core_paths import SPECS

# (file, text to replace, replacement, rule it must fire)
EDITS: list[tuple[str, str, str, str]] = [
    ("h1.sh", "NCCL_IB_TC=106", "NCCL_IB_TC=0", "nccl.tc-not-lossless"),
    ("h1.sh", "NCCL_IB_HCA==mlx5_0:1", "NCCL_IB_HCA=mlx5_0:1", "nccl.hca-prefix-match"),
    ("h1.sh", "--trust dscp", "--trust pcp", "trust.mismatch"),
    ("h1.sh", "--pfc 0,0,0,1,0,0,0,0", "--pfc 0,0,0,1,1,0,0,0", "pfc.priority-mismatch"),
    ("h1.sh", "--cable_len 3", "--cable_len 1", "headroom.too-small"),
    ("h1.sh", "echo 6 > /sys/class/net/eth0/ecn/roce_np/cnp_802p_prio",
     "echo 7 > /sys/class/net/eth0/ecn/roce_np/cnp_802p_prio", "cnp.class-mismatch"),
    ("leaf1.json", '"pfc_enable": "3"', '"pfc_enable": "3,4"', "pfc.priority-mismatch"),
    ("leaf1.json", '"26": "3"', '"26": "1"', "roce.dscp-not-lossless"),
    ("leaf1.json", '"ecn": "ecn_all"', '"ecn": "ecn_none"', "ecn.disabled"),
    ("leaf2.nvue", "traffic-class 3 ecn enable", "traffic-class 3 ecn disable", "ecn.disabled"),
    ("leaf2.nvue", "trust l3", "trust l2", "trust.mismatch"),
    ("leaf2.nvue", "nv set interface swp3 link mtu 9216", "nv set interface swp3 link mtu 9100", "mtu.mismatch"),
    ("spine1.eos", "qos map dscp 26 to traffic-class 3", "qos map dscp 26 to traffic-class 1",
     "roce.dscp-not-lossless"),
    ("spine1.eos", "      priority strict\n", "", "cnp.not-strict"),
    ("spine1.eos", "maximum-threshold 1500000 bytes", "maximum-threshold 100000 bytes", "ecn.thresholds"),
    ("spine1.eos", "   priority-flow-control pause watchdog\n", "", "pfcwd.off"),
    ("spine1.eos", "watchdog action drop", "watchdog action notify-only", "pfcwd.settings"),
    ("spine2.nxos", "    priority level 1\n", "", "cnp.not-strict"),
]
# Rules that need the cabling or the real cable length, which only a spec knows.
SPEC_ONLY = {"headroom.too-small", "mtu.mismatch"}


@pytest.fixture(scope="module")
def spec() -> FabricSpec:
    return load_spec(SPECS / "reference.yaml")


@pytest.fixture(scope="module")
def rendered(spec: FabricSpec, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("rendered")
    render_all(spec, out, nccl_env_for=nccl_env_for_nics)
    return out


def _records(folder: Path) -> list:  # type: ignore[type-arg]
    return [parse_deployed(p) for p in sorted(folder.iterdir())]


def test_rendered_configs_lint_clean(spec: FabricSpec, rendered: Path) -> None:
    assert len(list(rendered.iterdir())) == 8
    assert lint(spec, _records(rendered)) == []


def test_deployed_only_lints_clean(rendered: Path) -> None:
    assert lint(None, _records(rendered)) == []


@pytest.mark.parametrize(("name", "old", "new", "rule"), EDITS, ids=[f"{e[3]}-{i}" for i, e in enumerate(EDITS)])
def test_edit_fires_exactly_one_rule(spec: FabricSpec, rendered: Path, tmp_path: Path, name: str, old: str,
                                     new: str, rule: str) -> None:
    for path in rendered.iterdir():
        text = path.read_text()
        if path.name == name:
            assert old in text, f"{old!r} not in rendered {name}"
            text = text.replace(old, new, 1)
        (tmp_path / path.name).write_text(text)
    records = _records(tmp_path)
    with_spec = lint(spec, records)
    assert {f.rule for f in with_spec} == {rule}, [(f.rule, f.subject, f.message) for f in with_spec]
    assert all(name.split(".")[0] in f.subject for f in with_spec)
    if rule not in SPEC_ONLY:
        alone = lint(None, records)
        assert {f.rule for f in alone} == {rule}, [(f.rule, f.subject, f.message) for f in alone]


@pytest.mark.parametrize("nos", ["sonic", "cumulus", "eos", "nxos"])
def test_starter_spec_renders_and_lints_clean_per_nos(tmp_path: Path, nos: str) -> None:
    from tensorfabric.fabric.init import starter_spec

    spec = starter_spec(leaves=2, spines=2, hosts_per_leaf=2, speed_bps=100e9, nos=nos)
    render_all(spec, tmp_path, nccl_env_for=nccl_env_for_nics)
    records = _records(tmp_path)
    assert {r.format for r in records if r.kind == "switch"} != set()
    assert lint(spec, records) == []
    assert lint(None, records) == []
