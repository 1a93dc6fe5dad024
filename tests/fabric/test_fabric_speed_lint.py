"""speed.mismatch: the two ends of a link disagree on speed, from a spec or from a deployed config."""

from __future__ import annotations

import json

from tensorfabric.fabric.lint import lint
from tensorfabric.fabric.parsers import parse_text
from tensorfabric.fabric.renderers import render_fabric
from tensorfabric.fabric.spec import load_spec

from .fabric_core_paths import SPECS


def test_deployed_port_speed_disagreeing_with_the_host_is_an_error() -> None:
    spec = load_spec(SPECS / "reference.yaml")
    leaf1 = next(r for r in render_fabric(spec) if r.device == "leaf1")
    db = json.loads(leaf1.text)
    db["PORT"]["Ethernet0"]["speed"] = "100000"  # the switch port runs 100G, h1's NIC 400G
    record = parse_text(json.dumps(db), source="leaf1.json")
    findings = [f for f in lint(spec, [record]) if f.rule == "speed.mismatch"]
    assert [f.subject for f in findings] == ["link leaf1:Ethernet0—h1:eth0"]
    assert findings[0].severity == "error"
    assert "100Gbit/s" in findings[0].message and "400Gbit/s" in findings[0].message


def test_the_rendered_config_agrees_with_the_spec() -> None:
    spec = load_spec(SPECS / "reference.yaml")
    records = [parse_text(r.text, source=r.filename) for r in render_fabric(spec) if r.target == "sonic"]
    assert [f for f in lint(spec, records) if f.rule == "speed.mismatch"] == []
