"""Acceptance: in a 2-host lab whose hosts' names map to 127.0.1.1 (Debian's /etc/hosts default), the doctor raises
the loopback finding, and ``eval "$(tensorfabric env)"`` then lets a real 2-node torchrun bench pass (needs root)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tensorfabric.lab import Lab
from tensorfabric.lab.netlink import privileges_missing

_MISSING = privileges_missing() or ""
pytestmark = [pytest.mark.root, pytest.mark.skipif(bool(_MISSING), reason=f"needs namespaces: {_MISSING}"),
              pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")]

# Per host, in private UTS and mount namespaces: name the host, map the name to 127.0.1.1, run the doctor, then
# the documented torchrun form with the environment `tensorfabric env` derives (the lab's own *_SOCKET_IFNAME
# variables are removed first, so only `tensorfabric env` can supply them).
_SCRIPT = """
set -e
hostname "$LAB_NAME"
printf '127.0.0.1 localhost\\n127.0.1.1 %s\\n' "$LAB_NAME" > "$OUT/hosts.$LAB_NAME"
mount --bind "$OUT/hosts.$LAB_NAME" /etc/hosts
"$PY" -m tensorfabric doctor --json > "$OUT/doctor.$LAB_NAME.json" || true
"$PY" -m tensorfabric env > "$OUT/env.$LAB_NAME.sh"
eval "$("$PY" -m tensorfabric env)"
exec "$TORCHRUN" --nnodes 2 --nproc-per-node 1 --node-rank "$RANK" --master-addr "$MASTER_ADDR" \\
    --master-port "$MASTER_PORT" -m tensorfabric -- bench --max 64K --iters 2 --warmup 1
"""


def test_hostname_on_loopback_is_found_and_tensorfabric_env_fixes_torchrun(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    if not os.path.exists(torchrun):
        pytest.skip("torchrun is not installed next to this Python")
    with Lab(hosts=2, rate="1gbit", name="thloop", state_dir=tmp_path / "state") as lab:
        procs = []
        for rank, (host, env) in enumerate(zip(lab.hosts, lab.rank_envs(), strict=True)):
            env = {k: v for k, v in env.items() if not k.endswith("_SOCKET_IFNAME") and not k.startswith("NCCL_")}
            env.update(LAB_NAME=f"labhost{rank}", OUT=str(tmp_path), PY=sys.executable, TORCHRUN=torchrun)
            procs.append(lab.popen(host, ["unshare", "--mount", "--uts", "sh", "-c", _SCRIPT], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        results = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-3000:] for _, err in results]
    for rank in range(2):
        doctor = json.loads((tmp_path / f"doctor.labhost{rank}.json").read_text())
        loop = [f for f in doctor["findings"] if f["rule"] == "net.hostname-loopback"]
        assert len(loop) == 1 and loop[0]["evidence"]["addresses"] == ["127.0.1.1"], doctor["findings"]
        assert "export GLOO_SOCKET_IFNAME=eth0" in (tmp_path / f"env.labhost{rank}.sh").read_text()
    assert "# Avg bus bandwidth" in results[0][0] and "Out of bounds values : 0 OK" in results[0][0]
