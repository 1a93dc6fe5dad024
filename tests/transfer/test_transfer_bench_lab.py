"""`tensorfabric bench --lab`: one rank per network-namespace host over a shaped link (needs root)."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tensorfabric.cli.main import main

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root (CAP_NET_ADMIN)"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="iproute2's `ip` is not installed"),
]


@pytest.mark.timeout(120)
def test_bench_over_a_two_host_lab_checks_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "--lab", "2x1gbit", "--max", "64K", "--factor", "64", "--iters", "2", "--warmup", "1",
                 "--codec", "int8", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["nranks"] == 2 and doc["codec"] == "int8" and doc["backend"] == "gloo"
    assert [row["size"] for row in doc["rows"]] == [8, 512, 32768]
    assert all(row["wrong"] == 0 and row["wire_bytes"] > 0 for row in doc["rows"])
