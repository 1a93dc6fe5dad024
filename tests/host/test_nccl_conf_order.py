"""The doctor and `env` read NCCL's configuration files in NCCL's order (initEnvFunc, src/misc/param.cc):
NCCL_CONF_FILE if set and not empty, else ~/.nccl.conf; then /etc/nccl.conf. No file overrides a variable already
set (setenv(name, value, 0)): the environment wins, then the first file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.findings import Finding
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.nccl_conf import ENVIRONMENT, ETC_NCCL_CONF, nccl_conf_paths, read_env_file

from .conftest import write

Clone = Callable[[str], Path]
HOME = "/home/ops"
USER_CONF = f"{HOME}/.nccl.conf"


def _doctor(root: Path, environ: Mapping[str, str]) -> list[Finding]:
    return list(run_doctor(discover(root, environ=environ, home=HOME), environ=environ).findings)


def _rules(findings: list[Finding]) -> set[str]:
    return {f.rule for f in findings}


@pytest.mark.parametrize(("environ", "home", "paths"), [
    ({"NCCL_CONF_FILE": "/opt/job/nccl.conf"}, HOME, ("/opt/job/nccl.conf", ETC_NCCL_CONF)),
    ({"NCCL_CONF_FILE": ""}, HOME, (USER_CONF, ETC_NCCL_CONF)),  # strlen(userFile) > 0 in NCCL
    ({}, HOME + "/", (USER_CONF, ETC_NCCL_CONF)),
    ({}, None, (ETC_NCCL_CONF,)),  # getpwuid found no home: no user file
    ({"NCCL_CONF_FILE": ETC_NCCL_CONF}, HOME, (ETC_NCCL_CONF,)),
])
def test_the_files_and_their_order_are_nccls(environ: dict[str, str], home: str | None,
                                             paths: tuple[str, ...]) -> None:
    assert nccl_conf_paths(environ, home) == paths


def test_nccl_conf_file_is_read_instead_of_the_users_file(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, "opt/job/nccl.conf", "NCCL_DEBUG=INFO")
    write(root, USER_CONF.lstrip("/"), "NCCL_IB_DISABLE=1")  # never read while NCCL_CONF_FILE is set
    write(root, "etc/nccl.conf", "NCCL_NET=Socket")
    env = {"NCCL_CONF_FILE": "/opt/job/nccl.conf"}
    inv = discover(root, environ=env, home=HOME)
    assert dict(inv.nccl_conf) == {"NCCL_DEBUG": "INFO", "NCCL_NET": "Socket"}
    assert dict(inv.nccl_conf_read.origin) == {"NCCL_DEBUG": "/opt/job/nccl.conf", "NCCL_NET": ETC_NCCL_CONF}
    assert _rules(_doctor(root, env)) >= {"env.net-socket"} and "env.ib-disabled" not in _rules(_doctor(root, env))


def test_a_relative_nccl_conf_file_is_read_from_the_working_directory(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, "work/run/job.conf", "NCCL_IB_DISABLE=1")
    inv = discover(root, environ={"NCCL_CONF_FILE": "job.conf"}, home=HOME, cwd="/work/run")
    assert dict(inv.nccl_conf) == {"NCCL_IB_DISABLE": "1"}


def test_the_users_file_alone_is_read_and_named(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, USER_CONF.lstrip("/"), "NCCL_IB_DISABLE=1")
    found = [f for f in _doctor(root, {}) if f.rule == "env.ib-disabled"]
    assert [f.severity for f in found] == ["error"]
    inv = discover(root, environ={}, home=HOME)
    assert dict(inv.nccl_conf_read.origin) == {"NCCL_IB_DISABLE": USER_CONF}
    assert [(f.path, f.read is not None) for f in inv.nccl_conf_read.files] == [(USER_CONF, True),
                                                                               (ETC_NCCL_CONF, False)]
    assert dict(discover(root).nccl_conf) == {}  # without a home, only /etc/nccl.conf: as before


def test_the_users_file_beats_etc_and_the_shadowed_line_is_named(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, USER_CONF.lstrip("/"), "NCCL_IB_DISABLE=0")
    write(root, "etc/nccl.conf", "NCCL_DEBUG=WARN\nNCCL_IB_DISABLE=1")
    findings = _doctor(root, {})
    assert "env.ib-disabled" not in _rules(findings)
    shadowed = [f for f in findings if f.rule == "env.nccl-conf-shadowed"]
    assert [(f.severity, f.subject) for f in shadowed] == [("info", "/etc/nccl.conf line 2")]
    assert USER_CONF in shadowed[0].message and shadowed[0].evidence["kept"] == "0"
    inv = discover(root, environ={}, home=HOME)
    assert dict(inv.nccl_conf_read.origin) == {"NCCL_IB_DISABLE": USER_CONF, "NCCL_DEBUG": ETC_NCCL_CONF}


def test_the_environment_overrides_every_file(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, USER_CONF.lstrip("/"), "NCCL_IB_DISABLE=1")
    write(root, "etc/nccl.conf", "NCCL_NET=Socket")
    env = {"NCCL_IB_DISABLE": "0", "NCCL_NET": "IB"}
    assert not _rules(_doctor(root, env)) & {"env.ib-disabled", "env.net-socket"}
    conf = discover(root, environ=env, home=HOME).nccl_conf_read
    assert conf.environment(env) == {"NCCL_IB_DISABLE": "0", "NCCL_NET": "IB"}
    assert conf.origins(env, ["NCCL_IB_DISABLE", "NCCL_NET"]) == dict.fromkeys(["NCCL_IB_DISABLE", "NCCL_NET"],
                                                                               ENVIRONMENT)


def test_problems_are_named_with_their_file(clone: Clone) -> None:
    root = clone("mlx5-roce")
    write(root, USER_CONF.lstrip("/"), "export NCCL_IB_TC=106")
    found = [f for f in _doctor(root, {}) if f.rule == "env.nccl-conf-line"]
    assert [f.subject for f in found] == [f"{USER_CONF} line 1"] and "without 'export'" in found[0].message


def test_doctor_json_says_where_each_value_came_from(clone: Clone, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = clone("mlx5-roce")
    write(root, USER_CONF.lstrip("/"), "NCCL_IB_GID_INDEX=3")
    write(root, "etc/nccl.conf", "NCCL_IB_GID_INDEX=5\nNCCL_DEBUG=WARN")
    monkeypatch.setattr("tensorfabric.cli.doctor.user_home", lambda: HOME)
    for name in ("NCCL_CONF_FILE", "NCCL_IB_GID_INDEX", "NCCL_DEBUG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NCCL_IB_TC", "106")
    main(["doctor", "--sysfs-root", str(root), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["nccl_conf"]["origin"] == {"NCCL_IB_GID_INDEX": USER_CONF, "NCCL_DEBUG": ETC_NCCL_CONF,
                                           "NCCL_IB_TC": ENVIRONMENT}
    assert data["environment"]["NCCL_IB_GID_INDEX"] == "3"
    assert [s["line"] for s in data["nccl_conf"]["shadowed"]] == [1]
    main(["doctor", "--sysfs-root", str(root)])
    assert f"{USER_CONF}: NCCL_IB_GID_INDEX=3; /etc/nccl.conf: NCCL_IB_GID_INDEX=5, NCCL_DEBUG=WARN" \
        in capsys.readouterr().out


def test_env_keeps_what_a_file_sets_and_names_the_file(clone: Clone, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = clone("mlx5-roce")
    write(root, USER_CONF.lstrip("/"), "NCCL_IB_TC=0")
    monkeypatch.setattr("tensorfabric.cli.env.user_home", lambda: HOME)
    monkeypatch.delenv("NCCL_IB_TC", raising=False)
    monkeypatch.delenv("NCCL_CONF_FILE", raising=False)
    assert main(["env", "--sysfs-root", str(root)]) == 0
    captured = capsys.readouterr()
    assert f"# NCCL_IB_TC kept as set in {USER_CONF}: '0'" in captured.out and "export NCCL_IB_TC" not in captured.out
    assert f"warning: NCCL_IB_TC='0' is set in {USER_CONF}; the derived '106' was not applied; remove NCCL_IB_TC " \
        f"from {USER_CONF}" in captured.err
    assert main(["env", "--sysfs-root", str(root), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kept"] == {"NCCL_IB_TC": "0"} and data["kept_from"] == {"NCCL_IB_TC": USER_CONF}
    assert data["findings"][0]["evidence"]["file"] == USER_CONF


def test_shell_export_may_set_several_variables() -> None:
    text = "export NCCL_IB_TC=106 'NCCL_SOCKET_IFNAME==ens1 ' NCCL_DEBUG\nexport NCCL_NET=\"$NET\" NCCL_X=1\n"
    env = read_env_file(enumerate(text.split("\n"), 1), "shell")
    assert dict(env.values) == {"NCCL_IB_TC": "106", "NCCL_SOCKET_IFNAME": "=ens1 "}
    assert [a.line for a in env.assignments if a.problem] == [2] and "shell expansion" in env.assignments[-1].problem
