"""run_distributed, run_ranks and real Gloo ranks across the lab's shaped links (needs root)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tensorfabric.errors import InputError, LabError
from tensorfabric.lab import Lab, run_distributed
from tensorfabric.lab.launch import run_ranks
from tensorfabric.lab.netlink import Netlink

from .lab_support import NEEDS_NAMESPACES

pytestmark = NEEDS_NAMESPACES

_GLOO_RANK = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://", timeout=__import__("datetime").timedelta(seconds=60))
t = torch.full((1 << 20,), float(dist.get_rank() + 1))
dist.all_reduce(t)
print(f"rank {dist.get_rank()} sum {t[0].item():.0f} via {os.environ['GLOO_SOCKET_IFNAME']}")
dist.destroy_process_group()
"""


def _lab_namespaces() -> set[str]:
    return {ns for ns in Netlink().list_netns() if ns.startswith("tf-")}


def test_run_distributed_returns_rank0_stdout(tmp_path: Path) -> None:
    before = _lab_namespaces()
    out = run_distributed("2x1gbit", ["--version"], timeout_s=60, state_dir=tmp_path)
    assert out == "tensorfabric, version 0.1.0\n"
    assert _lab_namespaces() - before == set()


def test_run_distributed_failure_carries_every_rank(tmp_path: Path) -> None:
    with pytest.raises(LabError) as info:
        run_distributed("2x100mbit", ["no-such-verb"], timeout_s=60, state_dir=tmp_path)
    text = str(info.value)
    assert "--- rank 0 (exit status 2) ---" in text and "--- rank 1 (exit status 2) ---" in text
    assert text.count("No such command 'no-such-verb'") == 2
    assert list(tmp_path.glob("*.json")) == []


def test_run_ranks_runs_any_command_and_names_it_on_failure(tmp_path: Path) -> None:
    out = run_ranks("2x1gbit", ["sh", "-c", "echo rank $RANK of $WORLD_SIZE"], timeout_s=60, state_dir=tmp_path)
    assert out == "rank 0 of 2\n"
    with pytest.raises(LabError) as info:
        run_ranks("2x1gbit", ["sh", "-c", "echo boom >&2; exit $((3 + RANK))"], timeout_s=60, grace_s=1,
                  state_dir=tmp_path)
    text = str(info.value)
    assert text.startswith("lab 2x1gbit: 'sh -c echo boom >&2; exit $((3 + RANK))' failed")
    assert "--- rank 0 (exit status 3) ---\nboom" in text and "--- rank 1 (exit status 4) ---\nboom" in text


def test_run_distributed_bad_spec_creates_nothing(tmp_path: Path) -> None:
    before = _lab_namespaces()
    for spec in ("2x1zbit", "0x1gbit", "two"):
        with pytest.raises(InputError):
            run_distributed(spec, ["--version"], state_dir=tmp_path)
    assert _lab_namespaces() == before


def test_gloo_all_reduce_crosses_the_lab(tmp_path: Path) -> None:
    with Lab(hosts=2, rate="1gbit", name="tgloo", state_dir=tmp_path) as lab:
        procs = lab.spawn([sys.executable, "-c", _GLOO_RANK], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
        results = [p.communicate(timeout=120) for p in procs]
        status = lab.status().to_dict()
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in results]
    assert [out.strip() for out, _ in results] == ["rank 0 sum 3 via eth0", "rank 1 sum 3 via eth0"]
    # 4 MiB of float32 went each way across the shaped links, not over loopback.
    sent = [link["ends"][0]["tx_bytes"] for link in status["links"]]
    assert all(s >= 2 * 1024 * 1024 for s in sent), sent


def test_run_distributed_is_bounded_by_its_timeout(tmp_path: Path) -> None:
    hang = tmp_path / "hang.sh"
    hang.write_text("#!/bin/sh\necho 'rank started' >&2\nexec sleep 600\n")
    hang.chmod(0o755)
    before = _lab_namespaces()
    with pytest.raises(LabError) as info:
        run_distributed("2x1gbit", ["bench"], timeout_s=2, python=str(hang), state_dir=tmp_path / "state")
    text = str(info.value)
    assert text.count("still running after 2s or the first failure, killed") == 2
    assert text.count("rank started") == 2
    assert _lab_namespaces() - before == set()
