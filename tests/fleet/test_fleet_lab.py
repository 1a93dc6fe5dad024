"""Acceptance 1 in an 8-host lab (root): one `tensorfabric fleet --lab-name NAME` names the host whose link is shaped
to a tenth of the others', the host whose data interface has MTU 1500 and the host whose environment pins another
NCCL_IB_GID_INDEX, and nothing else; the same lab without the faults exits 0 with no finding.

Each run costs about 35 s on a 2-core machine, almost all of it eight Python processes importing torch at once; the
timing breakdown is in benchmarks/results/fleet_lab.json (benchmarks/fleet_check.py --lab).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tensorfabric.cli.main import main
from tensorfabric.lab.netlink import privileges_missing

_MISSING = privileges_missing() or ""
pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(bool(_MISSING), reason=f"the fleet lab test needs namespaces: {_MISSING}")]
RUN = ["--bytes", "2MiB", "--timeout", "60s", "--engine", "torch", "--json"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    from tensorfabric.lab import Lab

    state = tmp_path_factory.mktemp("labstate")
    name = f"fl{os.getpid() % 100000}"
    with Lab(hosts=8, rate="1gbit", name=name, state_dir=state):
        yield name, str(state)


@pytest.fixture
def lab(built: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("TENSORFABRIC_LAB_DIR", built[1])  # where --lab-name finds it (the env is reset per test)
    return built[0]


def _faults(name: str, on: bool) -> None:
    rate, mtu = ("100mbit", "1500") if on else ("1gbit", "9000")
    for ns, dev in ((f"tf-{name}-h2", "eth0"), (f"tf-{name}-sw0", "h2")):
        subprocess.run(["tc", "-n", ns, "qdisc", "change", "dev", dev, "root", "tbf", "rate", rate, "burst", "74536",
                        "latency", "25ms"], check=True)
    subprocess.run(["ip", "-n", f"tf-{name}-h4", "link", "set", "eth0", "mtu", mtu], check=True)


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(argv)
    out = capsys.readouterr()
    assert out.out.startswith("{"), f"exit {code}: {out.err[-3000:]}"
    return code, json.loads(out.out)


def test_the_three_faulty_hosts_are_named_and_nothing_else(lab: str, capsys: pytest.CaptureFixture[str]) -> None:
    _faults(lab, True)
    try:
        code, doc = _run(["fleet", "--lab-name", lab, "--host-env", "h6:NCCL_IB_GID_INDEX=5", *RUN], capsys)
    finally:
        _faults(lab, False)
    findings: list[dict[str, Any]] = doc["findings"]
    hosts = {(f["subject"], f["rule"]) for f in findings if f["evidence"]["kind"] == "host"}
    assert code == 1
    assert hosts == {("host h2", "fleet.datapath"), ("host h4 eth0", "fleet.mtu"),
                     ("host h6 env NCCL_IB_GID_INDEX", "fleet.gid-index")}, findings
    slow = next(f for f in findings if f["subject"] == "host h2")
    assert "every pair of this host is slow (7 pairs)" in slow["message"]
    # A link finding may only touch a faulty host: at MTU 1500 this sandbox's user-space network stack spends six
    # times the CPU per byte, so on two shared cores a pair with h4 can fall under the floor. No healthy pair may.
    links = [f for f in findings if f["evidence"]["kind"] == "link"]
    assert all({"h2", "h4", "h6"} & set(f["evidence"]["hosts"]) for f in links), links
    assert len(doc["pairs"]) == 28 and len(doc["schedule"]["rounds"]) == 7


def test_the_same_lab_without_faults_has_no_finding(lab: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _run(["fleet", "--lab-name", lab, *RUN], capsys)
    assert (code, doc["findings"], doc["missing"]) == (0, [], []), doc["findings"]
    assert [h["host"] for h in doc["hosts"]] == [f"h{i}" for i in range(8)]
