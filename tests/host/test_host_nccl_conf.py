"""The one NAME=value reader reads /etc/nccl.conf as NCCL's setEnvFile does, and a shell .env as the shell does."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.fabric.parsers import parse_text
from tensorfabric.host.discovery import discover
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.nccl_conf import NCCL_VALUE_MAX, Dialect, parse_nccl_conf, read_env_file

SYSFS = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"

# Shapes seen in published nccl.conf files and issue threads (docs/formats.md); values changed.
CONF = """\
# written by the provisioning role
NCCL_DEBUG=WARN
NCCL_SOCKET_IFNAME==ens21f0
NCCL_IB_HCA="mlx5_2,mlx5_3"
NCCL_IB_TC = 106
export NCCL_IB_GID_INDEX=3
NCCL_NET_GDR_LEVEL=PHB # nearest bridge
NCCL_DEBUG=INFO
NCCL_IB_SL=3\r
"""


def test_nccl_reads_names_and_values_verbatim_and_the_first_wins() -> None:
    env = read_env_file(enumerate(CONF.split("\n"), 1), "nccl")
    assert dict(env.values) == {"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "=ens21f0",
                                "NCCL_IB_HCA": '"mlx5_2,mlx5_3"', "NCCL_NET_GDR_LEVEL": "PHB # nearest bridge",
                                "NCCL_IB_SL": "3\r"}
    problems = {a.line: a.problem for a in env.assignments if a.problem}
    assert set(problems) == {4, 5, 6, 7, 8, 9}
    assert "quotes are part of" in problems[4] and "'NCCL_IB_TC '" in problems[5]
    assert "without 'export'" in problems[6] and "'#'" in problems[7]
    assert "keeps the first value (line 2" in problems[8] and "CR" in problems[9]


def test_values_are_cut_where_nccl_cuts_them() -> None:
    assert len(parse_nccl_conf("NCCL_ALGO=" + "x" * 5000)["NCCL_ALGO"]) == NCCL_VALUE_MAX


def test_shell_env_unquotes_and_the_last_wins() -> None:
    text = ("export NCCL_IB_HCA='=mlx5_0:1'\nNCCL_IB_TC=104 # DSCP 26\nNCCL_IB_TC=106\nNCCL_NET=a b\n"
            "export NCCL_IB_GID_INDEX=${NCCL_IB_GID_INDEX:-3}\nexport NCCL_NET='$literal'\n")
    env = read_env_file(enumerate(text.split("\n"), 1), "shell")
    assert dict(env.values) == {"NCCL_IB_HCA": "=mlx5_0:1", "NCCL_IB_TC": "106", "NCCL_NET": "$literal"}
    assert [a.line for a in env.assignments if a.problem] == [4, 5]
    assert "shell expansion" in env.assignments[4].problem


@pytest.mark.parametrize(("text", "env", "warned"), [
    ('NCCL_IB_TC="106"\n', {"NCCL_IB_TC": '"106"'}, "quotes are part of"),
    ("NCCL_IB_TC=106\nNCCL_IB_TC=0\n", {"NCCL_IB_TC": "106"}, "keeps the first value"),
    ("NCCL_IB_TC=106\nNCCL_IB_GID_INDEX = 3\n", {"NCCL_IB_TC": "106"}, "without spaces around '='"),
])
def test_fabric_reads_a_conf_as_nccl_and_warns_naming_the_line(text: str, env: dict[str, str], warned: str) -> None:
    d = parse_text(text, source="n.conf")
    assert dict(d.nccl_env) == env
    assert d.read is not None
    assert any(warned in w for w in d.read.warnings), d.read.warnings


def test_doctor_names_the_nccl_conf_lines_nccl_would_not_read_as_meant(tmp_path: Path) -> None:
    root = tmp_path / "host"
    shutil.copytree(SYSFS / "mlx5-roce", root, symlinks=True)
    (root / "etc").mkdir()
    (root / "etc" / "nccl.conf").write_text("NCCL_IB_TC=106\nNCCL_IB_GID_INDEX = 3\nNCCL_IB_TC=0\n")
    inv = discover(root)
    assert dict(inv.nccl_conf) == {"NCCL_IB_TC": "106"}
    found = [f for f in run_doctor(inv, environ={}).findings if f.rule == "env.nccl-conf-line"]
    assert [(f.subject, f.severity) for f in found] == [("/etc/nccl.conf line 2", "warning"),
                                                        ("/etc/nccl.conf line 3", "warning")]
    assert "'NCCL_IB_GID_INDEX '" in found[0].message and "keeps the first value" in found[1].message


@settings(max_examples=25, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("NCL_IBTx=\"' #$\\t\\r\\nexport{}:-0123"), max_size=200),
       dialect=st.sampled_from(["nccl", "shell"]))
def test_any_text_is_read_or_listed_never_raises(text: str, dialect: Dialect) -> None:
    env = read_env_file(enumerate(text.split("\n"), 1), dialect)
    assert set(env.values) <= {a.name for a in env.assignments if a.effective}


def test_a_ten_megabyte_line_is_read_in_linear_time() -> None:
    line = "NCCL_ALGO=" + "ab #'\"" * 1_750_000
    for dialect in ("nccl", "shell"):
        read_env_file([(1, line), (2, "NCCL_IB_TC=106")], dialect)  # 10 MB: seconds if anything were quadratic
