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
    from tensorfabric.fabric.starter import starter_spec

    spec = starter_spec(leaves=2, spines=2, hosts_per_leaf=2, speed_bps=100e9, nos=nos)
    render_all(spec, tmp_path, nccl_env_for=nccl_env_for_nics)
    records = _records(tmp_path)
    assert {r.format for r in records if r.kind == "switch"} != set()
    assert lint(spec, records) == []
    assert lint(None, records) == []


# ---- configs as operators paste them (issue 27): read for what they hold, never refused over one line ----

DEPLOYED = Path(__file__).resolve().parents[1] / "fixtures" / "fabric" / "deployed"

# fixture -> (format, error/warning rules it must fire, rule that must be checked). Each failed before the change
# (exit 2, or linted as another dialect); the forms are the ones studied in docs/formats.md.
PASTED: dict[str, tuple[str, set[str], str]] = {
    "nxos-guide-hash-comments.nxos": ("nxos", set(), "cnp.not-strict"),  # '#' comments, '! ...' after commands
    "nxos-placeholder-interfaces.nxos": ("nxos", {"trust.mismatch"}, "ecn.disabled"),  # Ethernet1/*, EthernetN/1
    "nxos-config-transcript.nxos": ("nxos", set(), "roce.dscp-not-lossless"),  # leaf3(config-pmap-c-qos)# ...
    "eos-placeholder-ports.eos": ("eos", set(), "pfc.priority-mismatch"),  # interface EthernetN/1
    "eos-leaf-transcript.eos": ("eos", set(), "ecn.thresholds"),  # Leaf(config-qos-profile-X-uc-txq-3)# ...
    "sonic-pfc-json-after-prompt.json": ("sonic", set(), "pfc.priority-mismatch"),  # $ sudo cat pfc.json
    "sonic-table-without-braces.json": ("sonic", set(), "ecn.thresholds"),  # "WRED_PROFILE": {...}, pasted bare
    "cumulus-nclu-undefined-group.traffic_conf": ("cumulus-datapath", {"config.undefined-reference"},
                                                  "config.undefined-reference"),  # NVIDIA's own RoCE page
    "junos-cos-children-only.junos": ("junos", set(), "cnp.weighted"),  # [edit class-of-service] children
    "host-roce-setup-sudo.sh": ("host-script", set(), "ecn.disabled"),  # no #!, sudo, echo 1 | sudo tee
    "dell-sonic-cli-flat.dellsonic": ("dell-sonic", set(), "cnp.weighted"),  # sonic-cli, indentation lost
}


@pytest.mark.parametrize("name", sorted(PASTED))
def test_pasted_configs_lint_for_what_they_hold(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tensorfabric.cli.main import main

    fmt, rules, checked = PASTED[name]
    code = main(["fabric", "lint", "--deployed", str(DEPLOYED / name), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code in (0, 1) and out["format"] == fmt
    assert {f["rule"] for f in out["findings"] if f["severity"] != "info"} == rules, out["findings"]
    assert code == (1 if any(f["severity"] == "error" for f in out["findings"]) else 0)
    assert out["read"]["used"] > 0 and out["read"]["summary"].startswith("read ")
    status = {s["rule"]: s for s in out["rules"]}
    assert status[checked]["status"] == "checked" and set(status) >= {"roce.dscp-not-lossless", "pfcwd.off"}
    assert out["deployed"][0]["detection"]["format"] == fmt


def test_human_output_starts_with_what_was_read(capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main

    code = main(["fabric", "lint", "--deployed", str(DEPLOYED / "cumulus-nclu-undefined-group.traffic_conf")])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    assert out[0].startswith("read ") and "as Cumulus traffic.conf" in out[0] and "shell prompts" in out[0]
    assert "elisions" in out[0] and "lines used" in out[0]
    assert "markers" in out[1]
    assert any(line.startswith("rules: ") and "checked" in line and "undeterminable" in line for line in out)


def test_a_fragment_is_linted_for_what_it_holds_and_says_what_it_could_not_judge() -> None:
    from tensorfabric.fabric.lint import lint_context, rule_status
    from tensorfabric.fabric.lint.view import build_context
    from tensorfabric.fabric.parsers import parse_text

    # Only the maps: DSCP 26 lands in TC 1 (lossy on AZURE), but without PORT_QOS_MAP nothing says which TC pauses.
    text = ('{"DSCP_TO_TC_MAP": {"AZURE": {' + ", ".join(f'"{d}": "{3 if d == 3 else 6 if d == 48 else 1}"'
                                                        for d in range(64)) + '}}, '
            '"TC_TO_QUEUE_MAP": {"AZURE": {"1": "1", "3": "3", "6": "6"}}}')
    record = parse_text(text, source="maps.json")
    ctx = build_context(None, [record])
    findings = lint_context(ctx)
    status = {s.rule: s for s in rule_status(ctx, findings)}
    assert not [f for f in findings if f.severity == "error"]
    assert status["cnp.no-class"].status == "checked"
    assert status["roce.dscp-not-lossless"].status == "undeterminable"
    assert status["roce.dscp-not-lossless"].missing == ("the PFC priorities",)
    assert status["ecn.disabled"].status == "undeterminable" and status["pfcwd.off"].status == "undeterminable"
    assert status["nccl.tc-not-lossless"].status == "not applicable"
    assert status["routing.not-up-down"].status == "not applicable"


def test_detection_says_what_it_chose_and_why(tmp_path: Path) -> None:
    from tensorfabric.fabric.parsers import detect, parse_deployed

    # Named .cfg, so the content decides. The unindented Dell block used to be linted as EOS, clean by accident.
    flat = tmp_path / "leaf.cfg"
    flat.write_text((DEPLOYED / "dell-sonic-cli-flat.dellsonic").read_text())
    found = detect(flat.read_text(), str(flat))
    assert found.format == "dell-sonic" and found.how == "content" and found.score >= 10
    assert found.summary().startswith("detected as Dell Enterprise SONiC CLI: ")
    assert found.runner_up_score < found.score
    record = parse_deployed(flat)
    assert record.detection is not None and record.detection.format == "dell-sonic"
    assert record.port("Eth1/9").pfc_priorities == frozenset({3})


def test_format_that_understands_nothing_is_an_error_never_a_clean_lint(capsys: pytest.CaptureFixture[str]) -> None:
    from tensorfabric.cli.main import main

    path = DEPLOYED / "nxos-guide-hash-comments.nxos"
    assert main(["fabric", "lint", "--deployed", str(path), "--format", "eos", "--json"]) == 2
    err = capsys.readouterr().err
    assert "not one EOS statement" in err and "looks like NX-OS" in err and "--format nxos" in err
    assert main(["fabric", "lint", "--deployed", str(DEPLOYED / "qos_config.json.j2")]) == 2
    err = capsys.readouterr().err
    assert "Jinja template" in err and "render it first" in err and len(err.strip().splitlines()) == 1
