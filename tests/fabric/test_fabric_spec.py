"""Fabric spec: loading, defaults, conversions and bad input that names the field path."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.errors import InputError, ParseError
from tensorfabric.fabric.lint import lint
from tensorfabric.fabric.spec import FabricSpec, load_spec, parse_spec
from tensorfabric.fabric.spec.load import field_path, load_text

from .fabric_core_paths import SPECS


def _reference() -> dict[str, Any]:
    data = yaml.safe_load((SPECS / "reference.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_reference_loads() -> None:
    spec = load_spec(SPECS / "reference.yaml")
    assert [s.nos for s in spec.switches] == ["sonic", "cumulus", "eos", "nxos"]
    leaf1 = spec.switch("leaf1")
    assert leaf1 is not None and [p.name for p in leaf1.ports][:3] == ["Ethernet0", "Ethernet4", "Ethernet8"]
    assert len(leaf1.ports) == 8
    assert spec.links[6].cable_length_m == 100.0 and spec.links[6].medium == "fiber"
    assert spec.link_speed(spec.links[0]) == 400e9
    assert spec.qos.dscp_to_priority() == {26: 3, 48: 6}
    assert spec.qos.nccl_tc() == 106
    assert spec.port_mtu("leaf1:Ethernet0") == 9216 and spec.port_mtu("h1:eth0") == 9000
    assert spec.peer_of("h1:eth0") == "leaf1:Ethernet0"
    assert spec.qos.ecn_for(100e9).speed_bps == 100e9 and spec.qos.ecn_for(400e9).speed_bps is None
    # frozen
    with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError on frozen assignment
        spec.switches[0].nos = "eos"  # type: ignore[misc]


def test_defaults_follow_the_recipe() -> None:
    plan = FabricSpec().qos
    assert plan.roce.dscp == (26,) and plan.roce.priority == 3
    assert (plan.cnp.dscp, plan.cnp.priority, plan.cnp.strict) == (48, 6, True)
    assert plan.lossless_priorities == (3,) and plan.trust == "dscp"
    assert (plan.ecn[0].kmin, plan.ecn[0].kmax, plan.ecn[0].pmax) == (150_000, 1_500_000, 100)
    assert plan.watchdog.enabled and plan.watchdog.action == "drop"


def test_to_topology() -> None:
    fabric = load_spec(SPECS / "reference.yaml").to_topology()
    assert {s.name for s in fabric.switches} == {"leaf1", "leaf2", "spine1", "spine2"}
    assert fabric.device("spine1").tier == 1  # type: ignore[union-attr]
    assert sorted(fabric.neighbours("leaf2")) == ["h3", "h4", "spine1", "spine2"]
    link = fabric.links[0]
    assert (str(link.a), str(link.b), link.speed_bps, link.cable_length_m) == ("leaf1:Ethernet0", "h1:eth0", 400e9, 3)
    assert fabric.device("h1").nics[0].mtu == 9000  # type: ignore[union-attr]


def test_nxos_snippet_is_expressible() -> None:
    spec = load_spec(SPECS / "nxos_snippet.yaml")
    tor = spec.switch("tor1")
    assert tor is not None and tor.nos == "nxos" and len(tor.ports) == 48
    assert tor.ports[0].name == "Ethernet1/1" and tor.ports[-1].name == "Ethernet1/48"
    assert spec.qos.classifier.kind == "acl" and spec.qos.classifier.acl_name == "roce-acl"
    assert spec.qos.lossless_priorities == (3,)


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(data)
    node: Any = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    last = parts[-1]
    node[int(last) if last.isdigit() else last] = value
    return out


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("switches.1.nos", "junos", "switches[1].nos: 'junos'"),
    ("links.3.speed", "400Q", "links[3].speed: unknown unit in '400Q'"),
    ("links.3.cable_length", "-5m", "links[3].cable_length: '-5m' must be a positive length such as '5m'"),
    ("switches.1.name", "leaf1", "switches[1].name: 'leaf1' is used twice"),
    ("links.3.b", "h4:eth9", "links[3].b: 'h4:eth9' names unknown port 'eth9'"),
    ("links.3.b", "h9:eth0", "links[3].b: 'h9:eth0' names unknown device 'h9'"),
    ("links.3.b", "h4", "links[3].b: 'h4' must be 'device:port'"),
    ("links.1.b", "h1:eth0", "links[1].b: 'h1:eth0' is already cabled by links[0]"),
    ("qos.roce.priority", 9, "qos.roce.priority: 9"),
    ("qos.ets.weights", {0: 50, 3: 40}, "add up to 90"),
    ("switches.0.asic", "jericho2", "switches[0].asic.model: 'jericho2' is not one of spectrum1"),
    ("hosts.0.nics.0.speed", "fast", "hosts[0].nics[0].speed: 'fast' is not a valid value"),
    ("switches.0.colour", "red", "switches[0].colour: unknown field"),
])
def test_bad_values_name_the_field(path: str, value: Any, expected: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_spec(_set(_reference(), path, value), source="ref.yaml")
    assert expected in str(info.value)


def test_bad_file_reports_line(tmp_path: Path) -> None:
    text = (SPECS / "reference.yaml").read_text()
    text = text.replace("b: h4:eth0, cable_length: 5m", "b: h4:eth0, cable_length: -5m")
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ParseError) as info:
        load_spec(bad)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "-5m" in ln)
    assert info.value.line == line
    assert str(info.value).startswith(f"{bad}:{line}: links[3].cable_length: '-5m'")


def test_malformed_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("switches: [\n  {name: a, nos: sonic\n")
    with pytest.raises(ParseError, match="malformed YAML"):
        load_spec(bad)
    with pytest.raises(InputError, match="does not exist"):
        load_spec(tmp_path / "none.yaml")
    with pytest.raises(ParseError, match="must be a mapping"):
        load_text("- a\n- b\n")


def test_field_path() -> None:
    assert field_path(("links", 3, "cable_length")) == "links[3].cable_length"
    assert field_path(("qos", "dscp_map", 70, "[key]")) == "qos.dscp_map[70](key)"
    assert field_path(()) == "(spec)"


def test_schema_has_aliases() -> None:
    schema = FabricSpec.model_json_schema(by_alias=True)
    link = schema["$defs"]["LinkSpec"]["properties"]
    assert "cable_length" in link and "speed" in link


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=True),
                     st.text(max_size=12))


@given(st.text(max_size=300))
def test_fuzz_text(text: str) -> None:
    try:
        load_text(text)
    except (ParseError, InputError):
        pass


@settings(max_examples=60)  # each example also lints the whole reference fabric
@given(st.sampled_from(["switches.0.nos", "switches.0.speed", "switches.0.ports", "hosts.1.nics.0.mtu",
                        "links.2.cable_length", "links.2.a", "qos.ecn", "qos.roce.dscp", "qos.watchdog",
                        "switches.0.asic", "qos.dscp_map", "hosts.0.name", "name", "links.0.speed",
                        "hosts.0.nics.0.cable_length", "qos.lossless_priorities", "qos.cnp.dscp"]),
       st.one_of(_scalars, st.lists(_scalars, max_size=3), st.dictionaries(st.text(max_size=5), _scalars, max_size=3)))
def test_fuzz_fields(path: str, value: Any) -> None:
    try:
        spec = parse_spec(_set(_reference(), path, value))
    except (ParseError, InputError):
        return
    # whatever validates must also lint without crashing
    for finding in lint(spec):
        assert finding.rule and finding.subject


_KEYS = st.sampled_from(["name", "nos", "speed", "ports", "nics", "netdev", "a", "b", "cable_length", "qos", "roce",
                         "dscp", "priority", "asic", "model", "mtu", "ecn", "kmin", "kmax", "switches", "hosts"])
_trees = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_KEYS, kids, max_size=4),
                      max_leaves=12)


@settings(max_examples=80)
@given(st.dictionaries(st.sampled_from(["switches", "hosts", "links", "qos", "name"]), _trees, max_size=5))
def test_fuzz_structures(data: dict[str, Any]) -> None:
    try:
        spec = parse_spec(data)
    except (ParseError, InputError):
        return
    lint(spec)


def test_a_repeated_port_or_nic_is_named_at_its_first_repeat() -> None:
    data = _reference()
    ports = ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet4", "Ethernet0"]
    with pytest.raises(ParseError, match=r"switches\[0\]\.ports: 'Ethernet4' is listed twice"):
        parse_spec(_set(data, "switches.0.ports", ports))
    nic = data["hosts"][0]["nics"][0]
    with pytest.raises(ParseError, match=rf"hosts\[0\]\.nics: '{nic['netdev']}' is listed twice"):
        parse_spec(_set(data, "hosts.0.nics", [nic, nic]))
