"""UCX's lane report, classified: fixtures captured here (two local ranks, the 2x1gbit lab, UCX's peer error
mode) and one RoCE log written in the syntax of published UCX logs (openucx/ucx and parthenon#1260 threads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.errors import ParseError
from tensorfabric.host.ucx_log import classify, parse_ucx_log

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ucx"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_two_local_ranks_use_shared_memory() -> None:
    lines = parse_ucx_log(_read("shm_two_local_ranks.log"))
    assert [(e.scope, e.lanes[0][0]) for e in lines] == [("self", "rma"), ("intra-node", "rma")]
    found = classify(lines)
    assert found.kind == "shm" and not found.rdma
    assert found.label() == "nixl/shm(sysv/memory,posix/memory)"


def test_lab_ranks_cross_the_lab_interface_over_tcp() -> None:
    found = classify(parse_ucx_log(_read("lab_tcp_eth0.log")))
    assert found.kind == "tcp" and found.lanes == ("tcp/eth0",)
    assert found.label() == "nixl/tcp(tcp/eth0)"


def test_peer_error_mode_falls_back_to_tcp_loopback() -> None:
    # UCX's peer mode excludes the shared-memory lanes and emulates RMA over TCP active messages.
    found = classify(parse_ucx_log(_read("peer_mode_tcp_lo.log")))
    assert found.label() == "nixl/tcp(tcp/lo)"


def test_roce_lanes_are_rdma_and_worker_filter_applies() -> None:
    text = _read("roce_rc_mlx5.log")
    ours = parse_ucx_log(text, worker="world-r0-p48211")
    assert len(ours) == 2
    found = classify(ours)
    assert found.rdma and found.label() == "nixl/rdma(rc_mlx5/mlx5_0:1)"
    # A tag-only worker line (MPI style) is classified by its tag lanes.
    other = classify(parse_ucx_log(text, worker="ucp_context_0"))
    assert other.rdma and other.lanes == ("rc_mlx5/mlx5_3:1", "rc_mlx5/mlx5_0:1")


def test_no_lane_lines_is_unknown_not_a_guess() -> None:
    assert classify(parse_ucx_log("")).kind == "unknown"
    version_only = _read("shm_two_local_ranks.log").splitlines()[0]
    assert classify(parse_ucx_log(version_only)).label() == "nixl/unknown"


def test_a_broken_lane_group_is_a_parse_error_naming_the_line() -> None:
    bad = "[1.0] [vm:1:0] ucp_worker.c:1997 UCX  INFO    r0 intra-node cfg#1 rma(sysv/memory (posix)"
    with pytest.raises(ParseError, match=r"ucx log:2"):
        parse_ucx_log("first line\n" + bad)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_random_text_only_ever_raises_parse_error(text: str) -> None:
    try:
        classify(parse_ucx_log(text))
    except ParseError:
        pass


def test_a_10mb_line_is_linear() -> None:
    line = "[1.0] [vm:1:0] ucp_worker.c:1997 UCX  INFO    r0 intra-node cfg#1 " + "rma(tcp/lo) " * 900_000
    assert classify(parse_ucx_log(line)).kind in ("tcp", "unknown")
