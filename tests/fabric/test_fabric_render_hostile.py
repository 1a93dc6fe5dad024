"""Hostile free text: every spec field a person types may hold newlines, quotes, ``$()`` and backticks.

Either the spec (or the render) is refused with an InputError, or every rendered file is one printable line per
statement, every shell file passes ``bash -n``, and -- run as root in a throwaway network + mount namespace with
the NIC tools replaced by stubs that log their argv -- a host script / NVUE file executes exactly the tool
commands written in it, nothing else: no command substitution, no extra command, files only where we write.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from tensorfabric.errors import InputError
from tensorfabric.fabric.plan import host_plans
from tensorfabric.fabric.renderers import Rendered, render_fabric
from tensorfabric.fabric.spec import FabricSpec, parse_spec

from .fabric_core_paths import SPECS

TOOLS = ("ip", "ethtool", "mlnx_qos", "dcb", "nv")
NASTY = ["$(touch /tmp/tf-pwned)", "`touch /tmp/tf-pwned`", "a\nreboot", "x'; reboot; '", 'q"uote', "a b",
         "back\\slash", "semi;colon", "-rf", "\r", "tab\there", "dollar$HOME", "!bang", "question?", "é ü 中",
         "eth0", "mlx5_0", "ok-name", ""]
HOSTILE = st.one_of(st.sampled_from(NASTY),
                    st.text(alphabet=st.sampled_from(list("ab0_-.:/ $()`'\"\\;|&\n\r\t!?#*{}")), max_size=24),
                    st.text(max_size=12))


@lru_cache(maxsize=1)
def _base() -> dict[str, Any]:
    data = yaml.safe_load((SPECS / "render-reference.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _rename_port(data: dict[str, Any], device: str, old: str, new: str) -> None:
    for link in data["links"]:
        for side in ("a", "b"):
            if link[side] == f"{device}:{old}":
                link[side] = f"{device}:{new}"


def _rename_device(data: dict[str, Any], old: str, new: str) -> None:
    for link in data["links"]:
        for side in ("a", "b"):
            device, _, port = link[side].partition(":")
            if device == old:
                link[side] = f"{new}:{port}"


@st.composite
def _hostile_spec(draw: st.DrawFn) -> dict[str, Any]:
    data = copy.deepcopy(_base())

    def maybe(current: Any) -> Any:
        # Few fields per example, so that many examples get past validation and are rendered and run.
        return draw(HOSTILE) if draw(st.integers(0, 9)) == 0 else current

    data["name"] = maybe(data["name"])
    data["qos"]["classifier"] = {"kind": "acl", "acl_name": maybe("ROCE_ACL")}
    data["qos"]["nccl"] = {"ib_hca": maybe("=mlx5_0:1")}
    for sw in data["switches"]:
        if draw(st.integers(0, 9)) == 0:
            old, new = sw["ports"][-1], draw(HOSTILE)
            sw["ports"][-1] = new
            _rename_port(data, sw["name"], old, new)
    for device in [*data["switches"], *data["hosts"]]:
        if draw(st.integers(0, 19)) == 0:
            old, device["name"] = device["name"], draw(HOSTILE)
            _rename_device(data, old, device["name"])
    for host in data["hosts"]:
        for nic in host["nics"]:
            nic["vendor"] = maybe(nic.get("vendor", "nvidia"))
            nic["model"] = maybe(nic.get("model", ""))
            nic["rdma_device"] = maybe(nic["rdma_device"])
            if draw(st.integers(0, 9)) == 0:
                old = nic["netdev"]
                nic["netdev"] = draw(HOSTILE)
                _rename_port(data, host["name"], old, nic["netdev"])
    return data


def _render(data: dict[str, Any]) -> tuple[FabricSpec, list[Rendered]] | None:
    try:
        spec = parse_spec(data)
        return spec, render_fabric(spec)
    except InputError:
        return None


def _check_static(items: list[Rendered]) -> None:
    for item in items:
        for line in item.text.splitlines():
            assert line.isprintable(), (item.filename, line)
        if item.target == "sonic":
            json.loads(item.text)
        if item.target in ("host", "cumulus"):
            subprocess.run(["bash", "-n"], input=item.text, text=True, check=True, timeout=10)


def _expected_argv(text: str) -> list[list[str]]:
    # The tool commands as written: POSIX shell words (shlex.quote uses single quotes only, as bash reads them).
    out = []
    for line in text.splitlines():
        head = line.split(" ", 1)[0]
        if head in TOOLS:  # one command per line; comments and printf continuation lines start otherwise
            out.append(shlex.split(line))
    return out


_STUB = """#!{bash}
{{ printf '%s\\037' "${{0##*/}}" "$@"; printf '\\036'; }} >> "$TF_STUB_LOG"
"""

_SANDBOX = r"""
set -eu
T=$1; shift
mount --make-rprivate /
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$T/up,workdir=$T/wk" /etc
mount -t tmpfs tmpfs /sys
for dev in $NETDEVS; do
  for point in np rp; do mkdir -p "/sys/class/net/$dev/ecn/roce_$point/enable"; done
done
for rdma in $RDMA; do
  mkdir -p "/sys/class/infiniband/$rdma/tc/1"; : > "/sys/class/infiniband/$rdma/tc/1/traffic_class"
done
for script in "$@"; do
  : > "$T/stub.log"
  /usr/bin/env -i TF_STUB_LOG="$T/stub.log" PATH="$T/stubs" BASH_XTRACEFD=9 \
    "$BASH_BIN" -x "$script" 9> "$script.trace" > "$script.out" 2> "$script.err" \
    || { echo "exit $?" >> "$script.err"; }
  cp "$T/stub.log" "$script.log"
done
find /sys -type f -newer "$T/stamp" > "$T/sys-written" || true
"""


@lru_cache(maxsize=1)
def _sandbox_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root for a network + mount namespace"
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    with tempfile.TemporaryDirectory() as tmp:
        probe = subprocess.run(
            ["unshare", "--mount", "--net", "--fork", "bash", "-c",
             f"mkdir -p {tmp}/u {tmp}/w && mount --make-rprivate / && "
             f"mount -t overlay overlay -o lowerdir=/etc,upperdir={tmp}/u,workdir={tmp}/w /etc && "
             "mount -t tmpfs tmpfs /sys"], capture_output=True, text=True, timeout=20)
    if probe.returncode != 0:
        return f"cannot make a throwaway namespace with overlay /etc and tmpfs /sys: {probe.stderr.strip()}"
    return None


def _records(raw: bytes) -> Iterator[list[str]]:
    for record in raw.decode().split("\x1e"):
        if record:
            yield record.split("\x1f")[:-1]


def _run_in_sandbox(spec: FabricSpec, items: list[Rendered]) -> None:
    scripts = [i for i in items if i.target in ("host", "cumulus")]
    nics = [nic for plan in host_plans(spec) for nic in plan.nics]
    with tempfile.TemporaryDirectory(prefix="tf-hostile-") as tmp:
        root = Path(tmp)
        for sub in ("up", "wk", "stubs", "run"):
            (root / sub).mkdir()
        bash = shutil.which("bash") or "/bin/bash"
        for tool in TOOLS:
            stub = root / "stubs" / tool
            stub.write_text(_STUB.format(bash=bash))
            stub.chmod(0o755)
        paths = []
        for item in scripts:
            path = root / "run" / item.filename
            path.write_text(item.text)
            paths.append(str(path))
        (root / "stamp").touch()
        env = {"PATH": os.environ["PATH"], "BASH_BIN": bash,
               "NETDEVS": " ".join(n.netdev for n in nics),
               "RDMA": " ".join(n.rdma_device for n in nics if n.rdma_device)}
        subprocess.run(["unshare", "--mount", "--net", "--fork", bash, "-c", _SANDBOX, "sandbox", str(root), *paths],
                       env=env, check=True, timeout=60, capture_output=True)
        for item, path in zip(scripts, paths, strict=True):
            err = Path(path + ".err").read_text()
            assert err == "", (item.filename, err)
            trace = Path(path + ".trace").read_text().splitlines()
            # "++" = a command run inside a substitution or subshell: nothing of ours does that.
            assert not [t for t in trace if t.startswith("++")], (item.filename, trace)
            allowed = {*TOOLS, "set", "echo", "printf", "'['"}
            assert {t.split(" ", 2)[1] for t in trace if t.startswith("+ ")} <= allowed, (item.filename, trace)
            logged = list(_records(Path(path + ".log").read_bytes()))
            assert logged == _expected_argv(item.text), item.filename
        upper = sorted(str(p.relative_to(root / "up")) for p in (root / "up").rglob("*") if p.is_file())
        assert set(upper) <= {"nccl.conf", "profile.d/tensorfabric-env.sh"}, upper
        written = (root / "sys-written").read_text().split()
        assert all(w.startswith(("/sys/class/net/", "/sys/class/infiniband/")) for w in written), written
        assert not Path("/tmp/tf-pwned").exists()


# Static checks are cheap: many examples. Each sandboxed example starts a namespace and ~40 stub processes.
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile_spec())
def test_hostile_text_is_refused_or_rendered_inert(data: dict[str, Any]) -> None:
    rendered = _render(data)
    event("refused" if rendered is None else "rendered")
    if rendered is not None:
        _check_static(rendered[1])


def test_a_newline_in_a_free_text_field_is_an_input_error() -> None:
    data = copy.deepcopy(_base())
    data["hosts"][2]["nics"][0]["vendor"] = "broadcom\ntouch /tmp/tf-pwned"
    with pytest.raises(InputError, match=r"hosts\[2\]\.nics\[0\]\.vendor: .* newline or control character"):
        parse_spec(data)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(_hostile_spec())
def test_hostile_scripts_execute_only_our_commands(data: dict[str, Any]) -> None:
    reason = _sandbox_reason()
    if reason is not None:
        pytest.skip(reason)
    rendered = _render(data)
    assume(rendered is not None)  # refusals are covered above; here every counted example runs
    assert rendered is not None
    _run_in_sandbox(*rendered)


def test_the_sandbox_catches_an_injected_command() -> None:
    # The checker itself must fail on a script that runs something we did not write as a tool line.
    reason = _sandbox_reason()
    if reason is not None:
        pytest.skip(reason)
    spec, items = _render(copy.deepcopy(_base())) or pytest.fail("reference must render")
    host = next(i for i in items if i.target == "host")
    bad = Rendered(host.device, host.target, host.filename, host.text.replace(
        "set -euo pipefail", "set -euo pipefail\necho $(ip link show dev lo)"))
    with pytest.raises(AssertionError):
        _run_in_sandbox(spec, [bad])


def test_the_reference_scripts_run_in_the_sandbox() -> None:
    # The property above may draw few renderable specs; the untouched reference always renders and must run.
    reason = _sandbox_reason()
    if reason is not None:
        pytest.skip(reason)
    rendered = _render(copy.deepcopy(_base()))
    assert rendered is not None
    _run_in_sandbox(*rendered)


def test_shell_metacharacters_in_a_vendor_string_stay_inert() -> None:
    # Printable, so accepted: it lands in a '#' comment of the Broadcom NIC's dcb section and in nothing else.
    reason = _sandbox_reason()
    if reason is not None:
        pytest.skip(reason)
    data = copy.deepcopy(_base())
    data["hosts"][2]["nics"][0]["vendor"] = "broadcom $(touch /tmp/tf-pwned) `touch /tmp/tf-pwned`; reboot"
    rendered = _render(data)
    assert rendered is not None
    host = next(i for i in rendered[1] if i.device == "h3")
    assert "# ens5f0np0 (broadcom $(touch /tmp/tf-pwned)" in host.text
    _run_in_sandbox(*rendered)
