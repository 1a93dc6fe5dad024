"""``tensorfabric fabric`` in-process: init, schema, headroom, lint, rules, render and bad input (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tensorfabric.cli.main import main

from .fabric_core_paths import SPECS


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_init_writes_a_spec_that_lints_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "fabric.yaml"
    code, _, err = _run(capsys, "fabric", "init", "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "4",
                        "--speed", "400G", "-o", str(target))
    assert code == 0 and "wrote" in err
    data = yaml.safe_load(target.read_text())
    assert len(data["switches"]) == 4 and len(data["hosts"]) == 8 and len(data["links"]) == 8 + 4
    code, out, _ = _run(capsys, "fabric", "lint", "--fabric", str(target), "--json")
    assert code == 0 and json.loads(out)["findings"] == []


def test_init_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "fabric", "init", "--nos", "nxos", "--leaves", "1", "--spines", "0",
                        "--hosts-per-leaf", "2", "--speed", "100G")
    assert code == 0 and out.startswith("# tensorfabric fabric spec")
    assert "Ethernet1/1" in out and "nos: nxos" in out


def test_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "fabric", "schema")
    schema = json.loads(out)
    assert code == 0 and schema["title"] == "FabricSpec"
    assert {"switches", "hosts", "links", "qos"} <= set(schema["properties"])
    assert "cable_length" in schema["$defs"]["LinkSpec"]["properties"]


def test_headroom_json_and_explain(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "fabric", "headroom", "--speed", "400G", "--cable", "5m", "--mtu", "9100",
                        "--model", "sonic", "--json")
    data = json.loads(out)
    assert code == 0
    assert (data["xoff_bytes"], data["xon_bytes"], data["size_bytes"]) == (211_968, 19_456, 231_424)
    assert {t["name"] for t in data["terms"]} >= {"peer_response", "bytes_on_cable", "cell_occupancy"}
    code, out, _ = _run(capsys, "fabric", "headroom", "--speed", "100G", "--cable", "30m", "--mtu", "4200",
                        "--model", "mlx5-nic", "--explain")
    assert code == 0 and "xoff 47924 B" in out and "on_wire" in out
    code, out, _ = _run(capsys, "fabric", "headroom", "--speed", "100gbit", "--cable", "0.1km", "--mtu", "9216",
                        "--model", "ieee", "--asic", "spectrum2", "--json")
    assert code == 0 and json.loads(out)["xoff_bytes"] == 87_277


def test_headroom_per_port_of_a_spec(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "fabric", "headroom", "--fabric", str(SPECS / "reference.yaml"), "--json")
    rows = {r["port"]: r for r in json.loads(out)["ports"]}
    assert code == 0 and len(rows) == 16
    assert rows["leaf1:Ethernet0"]["model"] == "vendor:spectrum4" and rows["h1:eth0"]["model"] == "mlx5-nic"
    assert rows["leaf2:swp3"]["cable_m"] == 100 and rows["leaf2:swp3"]["xoff_bytes"] >= rows["leaf2:swp1"]["xoff_bytes"]
    assert all(r["xoff_bytes"] == r["needed_xoff_bytes"] for r in rows.values())
    code, out, _ = _run(capsys, "fabric", "headroom", "--fabric", str(SPECS / "reference.yaml"))
    assert code == 0 and "leaf1:Ethernet0" in out


@pytest.mark.parametrize("args", [
    ["--speed", "400Q", "--cable", "5m"], ["--speed", "400G", "--cable", "-5m"],
    ["--speed", "400G", "--cable", "5m", "--model", "x"], ["--speed", "400G"],
    ["--speed", "400G", "--cable", "5m", "--asic", "jericho2"],
    ["--speed", "100G", "--cable", "5m", "--asic", "tomahawk", "--model", "sonic"],  # the Lua is Mellanox's
    ["--speed", "400G", "--cable", "5m", "--asic", "tomahawk"],  # not calibrated at 400G
])
def test_headroom_bad_input(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, _, err = _run(capsys, "fabric", "headroom", *args)
    assert code == 2 and err.count("\n") == 1


def test_lint_findings_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((SPECS / "reference.yaml").read_text())
    data["switches"][0]["qos"] = {"dscp_map": {26: 1}}
    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump(data))
    code, out, _ = _run(capsys, "fabric", "lint", "--fabric", str(spec), "--json")
    findings = json.loads(out)["findings"]
    assert code == 1 and findings and {f["rule"] for f in findings} == {"roce.dscp-not-lossless"}
    assert set(findings[0]) == {"rule", "severity", "subject", "message", "evidence", "fix"}
    code, out, _ = _run(capsys, "fabric", "lint", "--fabric", str(spec))
    assert code == 1 and "roce.dscp" in out  # the table may wrap the id in an 80-column capture
    code, out, _ = _run(capsys, "fabric", "lint", "--fabric", str(spec), "--rule", "mtu.mismatch", "--json")
    assert code == 0 and json.loads(out)["findings"] == []


def test_lint_warnings_exit_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((SPECS / "reference.yaml").read_text())
    data["qos"]["nccl"] = {"tc": 106, "gid_index": 3}
    spec = tmp_path / "warn.yaml"
    spec.write_text(yaml.safe_dump(data))
    code, out, _ = _run(capsys, "fabric", "lint", "--fabric", str(spec), "--json")
    assert code == 0 and {f["severity"] for f in json.loads(out)["findings"]} == {"warning"}


def _bad(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


REFERENCE = (SPECS / "reference.yaml").read_text()
BAD_SPECS = [
    ("malformed-yaml", REFERENCE + "\n  - [unclosed\n", "malformed YAML"),
    ("unknown-nos", _bad(REFERENCE, "nos: cumulus", "nos: junos"), "switches[1].nos: 'junos'"),
    ("speed-400Q", _bad(REFERENCE, "b: h4:eth0, cable_length: 5m", "b: h4:eth0, speed: 400Q, cable_length: 5m"),
     "links[3].speed: unknown unit in '400Q'"),
    ("speed-bare-string", _bad(REFERENCE, "b: h4:eth0, cable_length: 5m", "b: h4:eth0, speed: '400', cable_length: 5m"),
     "links[3].speed: '400' has no unit (a unit is never guessed); use a form such as '400G'"),
    ("speed-bare-number", _bad(REFERENCE, "speed: 400G", "speed: 400"), "switches[0].speed: 400 has no unit"),
    ("cable-bare-number", _bad(REFERENCE, "b: h4:eth0, cable_length: 5m", "b: h4:eth0, cable_length: 5"),
     "links[3].cable_length: 5 has no unit (a unit is never guessed); use a form such as '5m'"),
    ("negative-cable", _bad(REFERENCE, "b: h4:eth0, cable_length: 5m", "b: h4:eth0, cable_length: -5m"),
     "links[3].cable_length: '-5m' must be a positive length"),
    ("duplicate-switch", _bad(REFERENCE, "name: leaf2", "name: leaf1"), "switches[1].name: 'leaf1' is used twice"),
    ("unknown-port", _bad(REFERENCE, "b: h4:eth0, cable_length: 5m", "b: h4:eth7, cable_length: 5m"),
     "links[3].b: 'h4:eth7' names unknown port 'eth7'"),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in BAD_SPECS], ids=[n for n, _, _ in BAD_SPECS])
@pytest.mark.parametrize("verb", ["lint", "render"])
def test_bad_spec_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str, text: str,
                         expected: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    args = ["fabric", verb, "--fabric", str(spec)] + (["--out", str(tmp_path / "out")] if verb == "render" else [])
    code, out, err = _run(capsys, *args)
    assert code == 2 and out == ""
    assert expected in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "expected"), [
    (["headroom", "--speed", "400", "--cable", "5m"], "'400' has no unit (a unit is never guessed); use a form such as "
                                                      "'400G', '100gbit', '25Gbps' or '200mbit'"),
    (["headroom", "--speed", "400G", "--cable", "5"], "'5' has no unit (a unit is never guessed); use a form such as "
                                                      "'5m', '300m' or '2km'"),
    (["init", "--speed", "100"], "'100' has no unit"),
])
def test_unitless_flags_exit_2_with_the_accepted_forms(capsys: pytest.CaptureFixture[str], args: list[str],
                                                       expected: str) -> None:
    code, out, err = _run(capsys, "fabric", *args)
    assert code == 2 and out == ""
    assert expected in err and err.count("\n") == 1


def test_lint_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "fabric", "lint")[0] == 2
    assert _run(capsys, "fabric", "lint", "--fabric", str(tmp_path / "missing.yaml"))[0] == 2
    code, _, err = _run(capsys, "fabric", "lint", "--fabric", str(SPECS / "reference.yaml"), "--rule", "nope")
    assert code == 2 and "not a rule id" in err
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\n")
    assert _run(capsys, "fabric", "lint", "--deployed", str(junk))[0] == 2


def test_rules_listing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "fabric", "rules", "--json")
    rows = json.loads(out)["rules"]
    assert code == 0 and len(rows) >= 12
    assert {r["checklist"] for r in rows} >= {f"R{i}" for i in range(1, 13) if i != 8} | {"R8"}


def test_render_and_lint_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "out"
    code, out, _ = _run(capsys, "fabric", "render", "--fabric", str(SPECS / "reference.yaml"), "--out", str(out_dir),
                        "--json")
    written = json.loads(out)["written"]
    assert code == 0 and len(written) == 8
    args = ["fabric", "lint", "--fabric", str(SPECS / "reference.yaml"), "--json"]
    for path in written:
        args += ["--deployed", path]
    code, out, _ = _run(capsys, *args)
    assert code == 0 and json.loads(out)["findings"] == []


def test_nxos_snippet_rendered_with_what_it_lacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = _run(capsys, "fabric", "render", "--fabric", str(SPECS / "nxos_snippet.yaml"), "--out", str(tmp_path))
    text = (tmp_path / "tor1.nxos").read_text()
    assert code == 0
    assert "pause pfc-cos 3" in text and "priority-flow-control mode on" in text and "roce-acl" in text
    assert "ecn" in text and "random-detect" in text  # ECN the snippet lacks
    assert "match dscp 48" in text and "priority level 1" in text  # strict CNP class
    assert "watch-dog" in text  # PFC watchdog
    assert "interface Ethernet1/1" in text


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_shipped_example_specs_lint_as_the_docs_say(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/fabric.md tells users to run these: two clean specs and two with error findings."""
    assert _run(capsys, "fabric", "lint", "--fabric", str(EXAMPLES / "fabric.yaml"))[0] == 0
    assert _run(capsys, "fabric", "lint", "--fabric", str(EXAMPLES / "fabric-reference.yaml"))[0] == 0
    code, out, _ = _run(capsys, "fabric", "lint", "--fabric", str(EXAMPLES / "fabric-dscp-mismatch.yaml"), "--json")
    assert code == 1 and {f["rule"] for f in json.loads(out)["findings"]} >= {"roce.dscp-not-lossless"}
    assert (EXAMPLES / "fabric-reference.yaml").read_text() == (SPECS / "reference.yaml").read_text()
    code, out, _ = _run(capsys, "fabric", "lint", "--fabric", str(EXAMPLES / "fabric-broken.yaml"), "--json")
    rules = [f["rule"] for f in json.loads(out)["findings"]]
    assert code == 1 and sorted(set(rules)) == ["mtu.roce-too-small", "nccl.tc-not-lossless", "roce.dscp-not-lossless"]
    assert rules.count("roce.dscp-not-lossless") == 12  # leaf1's 8 declared ports and its 4 links, as documented


@pytest.mark.parametrize("verb", ["lint", "render"])
def test_a_positional_spec_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str) -> None:
    extra = ["--out", str(tmp_path / "o")] if verb == "render" else []
    args = ["fabric", verb, str(EXAMPLES / "fabric.yaml"), *extra]
    code, out, err = _run(capsys, *args)
    # render's required --fabric is reported first; lint (spec optional next to --deployed) names the stray argument
    expected = "Missing option '--fabric'" if verb == "render" else "unexpected extra argument"
    assert code == 2 and out == "" and expected in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_render_refuses_to_replace_files_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    spec = str(SPECS / "reference.yaml")
    assert _run(capsys, "fabric", "render", "--fabric", spec, "--out", str(out))[0] == 0
    first = sorted(p.name for p in out.iterdir())
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / first[0]).unlink()
    (out / first[0]).symlink_to(victim)
    code, _, err = _run(capsys, "fabric", "render", "--fabric", spec, "--out", str(out))
    assert code == 2 and "already holds" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert _run(capsys, "fabric", "render", "--fabric", spec, "--out", str(out), "--force")[0] == 0
    assert victim.read_text() == "keep me" and not (out / first[0]).is_symlink()
