"""`tensorfabric bench --lab`: one rank per network-namespace host over a shaped link (needs root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.lab import Lab
from tensorfabric.transfer.engines.nixl_engine import available

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
    assert doc["transport"] in ("gloo/tcp", "nixl/tcp(tcp/eth0)+gloo/tcp")
    assert [row["size"] for row in doc["rows"]] == [8, 512, 32768]
    assert all(row["wrong"] == 0 and row["wire_bytes"] > 0 for row in doc["rows"])


_NIXL_RANK = """
import json, torch
from tensorfabric.transfer import init
g = init(timeout_s=60, engine="nixl")
t = torch.full((16384,), float(g.rank + 1))  # 64 KiB, through NIXL
for _ in range(100):
    g.all_reduce(t)
g.barrier()
print(json.dumps({"transport": g.transport, "nixl_calls": g.stats.get("all_reduce").nixl_calls,
                  "value": t[0].item()}))
g.destroy()
"""


@pytest.mark.timeout(120)
@pytest.mark.skipif(not available(), reason="nixl-cu12 is not installed (pip install 'tensorfabric[nixl]')")
def test_nixl_bytes_cross_the_shaped_link_over_tcp(tmp_path: Path) -> None:
    with Lab(hosts=2, rate="1gbit", state_dir=tmp_path) as lab:
        before = [link["ends"][0]["tx_bytes"] for link in lab.status().to_dict()["links"]]
        procs = lab.spawn([sys.executable, "-c", _NIXL_RANK], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
        outs = [p.communicate(timeout=100) for p in procs]
        after = [link["ends"][0]["tx_bytes"] for link in lab.status().to_dict()["links"]]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    docs = [json.loads(out) for out, _ in outs]
    # UCX held to TCP on the lab interface (lab.rank_env sets UCX_TLS/UCX_NET_DEVICES), and says so itself.
    assert all(d["transport"] == "nixl/tcp(tcp/eth0)+gloo/tcp" and d["nixl_calls"] == 100 for d in docs)
    assert docs[0]["value"] == 3.0 * 2**99  # 3, doubled by each of the other 99 sums
    # 100 x 64 KiB went out of each host through its shaped link (not by shared memory around it).
    sent = [a - b for a, b in zip(after, before, strict=True)]
    assert all(s >= 100 * 65536 for s in sent), sent


@pytest.mark.timeout(120)
@pytest.mark.skipif(not available(), reason="nixl-cu12 is not installed (pip install 'tensorfabric[nixl]')")
def test_require_rdma_in_the_lab_names_the_tcp_lanes_ucx_chose(capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # An RDMA host as far as the pre-check sees (a captured tree): the ranks' own check names what UCX chose.
    monkeypatch.setenv("TENSORFABRIC_SYSFS_ROOT", str(Path(__file__).parents[1] / "fixtures/sysfs/mlx5-roce"))
    code = main(["bench", "--lab", "2x1gbit", "--engine", "nixl", "--require-rdma", "--max", "1K", "--iters", "1"])
    err = capsys.readouterr().err
    assert code != 0 and "--require-rdma" in err and "UCX chose nixl/tcp(tcp/eth0)" in err
