"""Hypothesis over the sysfs/proc readers: whatever the files hold, discovery and the doctor never crash."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tensorfabric.host.discovery import discover, parse_memlock, parse_nccl_conf, parse_route
from tensorfabric.host.doctor import run_doctor
from tensorfabric.host.ncclenv import derive_env

from .conftest import SYSFS, write

_FILES = [
    "sys/class/infiniband/mlx5_0/ports/1/state", "sys/class/infiniband/mlx5_0/ports/1/link_layer",
    "sys/class/infiniband/mlx5_0/ports/1/gids/3", "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3",
    "sys/class/infiniband/mlx5_1/ports/1/gids/2", "sys/class/infiniband/mlx5_0/tc/1/traffic_class",
    "sys/class/net/ens1f0np0/mtu", "sys/class/net/ens1f0np0/ecn/roce_np/enable/3",
    "sys/bus/pci/devices/0000:03:00.0/class", "sys/bus/pci/devices/0000:03:00.0/numa_node",
    "proc/self/limits", "proc/net/route", "etc/nccl.conf",
]
_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=120)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.sampled_from(_FILES), _text), min_size=1, max_size=6),
       environ=st.dictionaries(st.sampled_from(["NCCL_IB_HCA", "NCCL_IB_TC", "NCCL_IB_GID_INDEX",
                                                "NCCL_NET_GDR_LEVEL", "NCCL_SOCKET_IFNAME", "NCCL_NET"]), _text))
def test_garbage_in_sysfs_never_crashes_discovery_or_doctor(tmp_path: Path, edits: list[tuple[str, str]],
                                                            environ: dict[str, str]) -> None:
    # One copy per test, shared by all examples: every example overwrites files, and any state is valid input.
    root = tmp_path / "host"
    if not root.exists():
        shutil.copytree(SYSFS / "mlx5-roce", root, symlinks=True)
    for rel, text in edits:
        write(root, rel, text)
    inv = discover(root)
    derive_env(inv, environ=environ)
    run_doctor(inv, environ=environ)


@example("Max locked memory         \u00b2   \u00b2   bytes")  # isdigit() but not int()-able
@given(st.text(max_size=600))
def test_proc_parsers_take_any_text(text: str) -> None:
    parse_memlock(text)
    parse_route(text)
    parse_nccl_conf(text)
