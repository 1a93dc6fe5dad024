"""Renderer golden tests, file writing, and the round trip render -> parse -> same intent."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tensorfabric.errors import InputError
from tensorfabric.fabric.parsers import parse_deployed, parse_text
from tensorfabric.fabric.plan import HostPlan, SwitchPlan, host_plans, switch_plans
from tensorfabric.fabric.renderers import RENDERERS, render_all, render_fabric
from tensorfabric.fabric.spec import FabricSpec, load_spec

from .fabric_io_support import GOLDEN, GOLDEN_SPECS, SPECS, host_mismatches, switch_mismatches

# Set UPDATE_GOLDEN=1 to rewrite the golden files after an intended change (then review the diff).
_UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def _spec(name: str) -> FabricSpec:
    return load_spec(SPECS / f"{name}.yaml")


def _golden_cases() -> list[tuple[str, str, str]]:
    cases = []
    for spec_name in GOLDEN_SPECS:
        for item in render_fabric(_spec(spec_name)):
            cases.append((spec_name, item.target, item.filename))
    return cases


@pytest.mark.parametrize(("spec_name", "target", "filename"), _golden_cases())
def test_golden(spec_name: str, target: str, filename: str) -> None:
    rendered = {item.filename: item.text for item in render_fabric(_spec(spec_name))}[filename]
    golden = GOLDEN / target / spec_name / filename
    if _UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(rendered)
    assert golden.exists(), f"missing golden file {golden}; run with UPDATE_GOLDEN=1 and review it"
    assert rendered == golden.read_text(), f"{filename} differs from {golden}"


def test_every_nos_of_the_spec_has_a_renderer() -> None:
    from tensorfabric.fabric.spec import NOS_NAMES

    assert set(RENDERERS) == set(NOS_NAMES)


@pytest.mark.parametrize("spec_name", GOLDEN_SPECS)
def test_round_trip_switches(spec_name: str) -> None:
    spec = _spec(spec_name)
    texts = {item.device: item for item in render_fabric(spec)}
    problems: list[str] = []
    for plan in switch_plans(spec):
        item = texts[plan.name]
        problems += switch_mismatches(plan, parse_text(item.text, source=item.filename))
    assert problems == []


@pytest.mark.parametrize("spec_name", GOLDEN_SPECS)
def test_round_trip_hosts(spec_name: str) -> None:
    spec = _spec(spec_name)
    texts = {item.device: item for item in render_fabric(spec)}
    problems: list[str] = []
    for plan in host_plans(spec):
        item = texts[plan.name]
        problems += host_mismatches(plan, parse_text(item.text, source=item.filename))
    assert problems == []


def test_round_trip_detects_a_difference() -> None:
    """The comparison itself must notice a changed value, or the round-trip tests prove nothing."""
    spec = _spec("reference")
    plan = switch_plans(spec)[0]
    text = next(i.text for i in render_fabric(spec) if i.device == plan.name)
    broken = text.replace('"26": "3"', '"26": "1"').replace('"pfc_enable": "3"', '"pfc_enable": "4"', 1)
    problems = switch_mismatches(plan, parse_text(broken, source="leaf1.json"))
    assert any("dscp map" in p for p in problems) and any("pfc" in p for p in problems)


def test_render_all_writes_one_file_per_device(tmp_path: Path) -> None:
    spec = _spec("reference")
    paths = render_all(spec, tmp_path / "out")
    assert [p.name for p in paths] == ["leaf1.json", "leaf2.nvue", "spine1.eos", "spine2.nxos",
                                       "h1.sh", "h2.sh", "h3.sh", "h4.sh"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in paths)
    for path in paths:
        executable = bool(path.stat().st_mode & stat.S_IXUSR)
        assert executable == (path.suffix == ".sh")
        assert parse_deployed(path).device == path.stem


def test_render_all_refuses_a_file_as_out_dir(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        render_all(_spec("reference"), target)


def test_render_all_overwrites_atomically(tmp_path: Path) -> None:
    spec = _spec("reference")
    first = render_all(spec, tmp_path)
    inode_before = first[0].stat().st_ino
    with pytest.raises(InputError, match="pass --force to replace them"):
        render_all(spec, tmp_path)  # same-named files are the user's until --force
    second = render_all(spec, tmp_path, force=True)
    assert first == second
    assert second[0].stat().st_ino != inode_before  # replaced by rename, never rewritten in place
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_nccl_env_for_is_used_and_the_spec_keeps_the_traffic_class() -> None:
    from tensorfabric.host.ncclenv import nccl_env_for_nics

    spec = _spec("reference")
    plans = host_plans(spec, nccl_env_for_nics)
    env = dict(plans[0].nccl_env)
    # The host doctor derives HCA/socket/GID-selection variables; the spec's tc: 106 is the plan of record.
    assert env["NCCL_IB_TC"] == "106"
    assert env["NCCL_IB_HCA"].startswith("=mlx5_0")
    assert "NCCL_IB_ROCE_VERSION_NUM" in env
    text = next(i.text for i in render_fabric(spec, nccl_env_for_nics) if i.device == "h1")
    assert parse_text(text, source="h1.sh").nccl_env == env


def test_nccl_env_for_receives_the_host_nics_and_roce_dscp() -> None:
    seen: list[tuple[list[str], int]] = []

    def derive(nics: object, *, roce_dscp: int) -> dict[str, str]:
        seen.append(([n.netdev for n in nics], roce_dscp))  # type: ignore[attr-defined]
        return {"NCCL_SOCKET_IFNAME": "=eth0"}

    host_plans(_spec("render-reference"), derive)
    assert seen[0] == (["eth0", "eth1"], 26)


def test_host_script_is_valid_bash() -> None:
    for item in render_fabric(_spec("render-reference")):
        if item.target == "host":
            subprocess.run(["bash", "-n"], input=item.text, text=True, check=True, timeout=10)


def _host(plan: HostPlan, **changes: object) -> HostPlan:
    from dataclasses import replace

    return replace(plan, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("netdev", ["eth0;reboot", "$(id)", "a b", "averyverylongname0", "", "eth0\n", "-f", "a/b"])
def test_host_script_refuses_bad_interface_names(netdev: str) -> None:
    from dataclasses import replace

    from tensorfabric.fabric.renderers import host

    plan = host_plans(_spec("reference"))[0]
    bad = _host(plan, nics=(replace(plan.nics[0], netdev=netdev),))
    with pytest.raises(InputError, match="not a valid name|newline or control character"):
        host.render(bad)


@pytest.mark.parametrize(("field", "value"), [("mtu", 70000), ("cnp_dscp", 64), ("cnp_priority", -1),
                                              ("storm_prevention_ms", 9000)])
def test_host_script_refuses_out_of_range_numbers(field: str, value: int) -> None:
    from dataclasses import replace

    from tensorfabric.fabric.renderers import host

    plan = host_plans(_spec("reference"))[0]
    with pytest.raises(InputError, match="must be an integer"):
        host.render(_host(plan, nics=(replace(plan.nics[0], **{field: value}),)))


def test_host_script_quotes_nccl_values(tmp_path: Path) -> None:
    """A hostile value reaches the file literally and runs nothing."""
    from tensorfabric.fabric.renderers import host

    plan = host_plans(_spec("reference"))[0]
    # The canary is relative to the script's working directory: the value stays under NCCL's 255-character cap
    # however long the temporary directory's path is (xdist workers add a level).
    value = "$(touch pwned) `touch pwned`; touch pwned 'q\""
    text = host.render(_host(plan, nccl_env={"NCCL_DEBUG": value}))
    block = text[text.index("printf"):].replace("/etc/nccl.conf", str(tmp_path / "nccl.conf"))
    subprocess.run(["bash", "-c", block], check=True, timeout=10, cwd=tmp_path)
    assert not (tmp_path / "pwned").exists()
    assert (tmp_path / "nccl.conf").read_text() == f"NCCL_DEBUG={value}\n"
    assert parse_text(text, source="h1.sh").nccl_env["NCCL_DEBUG"] == value


@pytest.mark.parametrize("value", ["a\nb", "x\x00"])
def test_host_script_refuses_control_characters(value: str) -> None:
    from tensorfabric.fabric.renderers import host

    plan = host_plans(_spec("reference"))[0]
    with pytest.raises(InputError, match="newline or control character"):
        host.render(_host(plan, nccl_env={"NCCL_DEBUG": value}))


def test_switch_port_names_are_checked() -> None:
    spec = _spec("reference")
    data = spec.model_dump(by_alias=True)
    data["switches"][0]["ports"] = [{"name": "Ethernet0;reload"}]
    data["links"] = []
    bad = FabricSpec.model_validate(data)
    with pytest.raises(InputError, match="may hold only"):
        switch_plans(bad)


def test_plans_apply_device_overrides() -> None:
    spec = _spec("reference")
    data = spec.model_dump(by_alias=True)
    data["switches"][0]["qos"] = {"dscp_map": {26: 1}, "pfc_priorities": [3, 4], "mtu": 9100}
    plan = switch_plans(FabricSpec.model_validate(data))[0]
    assert isinstance(plan, SwitchPlan)
    assert plan.dscp_to_priority[26] == 1 and plan.lossless == (3, 4) and plan.mtu == 9100


def test_issue_snippet_rendered_for_nxos_with_what_it_lacks() -> None:
    """Issue 6 point 4: cos/priority 3 -> queue 3, PFC on 1/1-1/48 and the RoCE ACL, plus ECN, CNP and watchdog."""
    spec = _spec("nxos_snippet")
    text = next(i.text for i in render_fabric(spec) if i.device == "tor1")
    lines = [line.strip() for line in text.splitlines()]
    # What the snippet says: the RoCE class (ACL on UDP 4791) lands in qos-group 3, served by queue 3, with PFC.
    assert "ip access-list roce-acl" in lines and "10 permit udp any any eq 4791" in lines
    assert "match access-group name roce-acl" in lines
    assert lines[lines.index("class ROCE") + 1] == "set qos-group 3"
    assert "pause pfc-cos 3" in lines and "interface Ethernet1/5-48" in lines
    assert lines.count("priority-flow-control mode on") == 5  # 1/1..1/4 cabled, 1/5-48 as one range
    # What it lacks: ECN on queue 3, CNP DSCP 48 in a strict queue, the watchdog, MTU and headroom.
    queue3 = lines.index("class type queuing c-out-8q-q3")
    assert lines[queue3 + 2].startswith("random-detect minimum-threshold 150000 bytes maximum-threshold 1500000 bytes")
    assert lines[queue3 + 2].endswith(" ecn")
    assert lines[lines.index("class CNP") + 1] == "set qos-group 6" and "match dscp 48" in lines
    assert lines[lines.index("class type queuing c-out-8q-q6") + 1] == "priority level 1"
    assert "priority-flow-control watch-dog-interval on" in lines and "mtu 9216" in lines
    assert any(line.startswith("pause buffer-size ") for line in lines)
    parsed = parse_text(text, source="tor1.nxos")
    port = parsed.port("Ethernet1/48")
    assert port.pfc_priorities == frozenset({3}) and port.strict_queues == frozenset({6})
    assert port.watchdog is not None and port.watchdog.enabled and port.ecn is not None and 3 in port.ecn


def test_every_nccl_variable_the_spec_pins_reaches_the_host_script() -> None:
    # Rendered scripts and the linter's view of the spec share one definition (QosPlan.nccl_env): a pinned
    # service level once reached the linter but not the script, so a PCP-trust fabric linted dirty as rendered.
    spec = _spec("reference")
    qos = spec.qos.model_copy(update={"nccl": spec.qos.nccl.model_copy(update={"sl": 3, "cross_nic": 1})})
    spec = spec.model_copy(update={"qos": qos})
    env = dict(host_plans(spec)[0].nccl_env)
    assert (env["NCCL_IB_SL"], env["NCCL_CROSS_NIC"], env["NCCL_IB_TC"]) == ("3", "1", "106")
    text = next(i.text for i in render_fabric(spec) if i.device == "h1")
    assert parse_text(text, source="h1.sh").nccl_env == env
