"""The shared NCCL-variable judgements read values the way NCCL does (strtoll base 0, empty = 0)."""

from __future__ import annotations

from tensorfabric.host.nccl_judge import exact_list, judge_gid_index, judge_ib_tc, split_nccl_list


def test_ib_tc() -> None:
    assert judge_ib_tc("106", (26,)).lossless and judge_ib_tc("104", (26,)).lossless
    assert judge_ib_tc("0x6a", (26,)).value == 106
    assert judge_ib_tc("96", (26,)).dscp == 24 and not judge_ib_tc("96", (26,)).lossless
    assert judge_ib_tc("96", (24, 26)).lossless
    for bad in ("abc", "300", "-4", "1e2"):
        assert judge_ib_tc(bad, (26,)).value is None and not judge_ib_tc(bad, (26,)).lossless
    assert judge_ib_tc("", (0,)).value == 0  # an empty value leaves NCCL_IB_TC at its default 0


def test_gid_index() -> None:
    assert judge_gid_index("3").pinned and judge_gid_index("").index == 0 and judge_gid_index("").pinned
    assert not judge_gid_index("-1").pinned  # NCCL's automatic selection
    assert judge_gid_index("x").index is None and not judge_gid_index("x").pinned


def test_lists() -> None:
    hca = split_nccl_list("^mlx5_0:1,mlx5_1")
    assert hca.exclude and not hca.exact and hca.names == ("mlx5_0", "mlx5_1") and hca.prefixes == hca.names
    assert split_nccl_list("=mlx5_0").prefixes == ()
    assert exact_list("^mlx5_1") == "^=mlx5_1" and exact_list("mlx5_1") == "=mlx5_1"
    assert exact_list("^=mlx5_1") == "^=mlx5_1"
