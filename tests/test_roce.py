"""The RoCE recipe constants and their arithmetic (lossless-config.md §1, §2, §5.1)."""

from __future__ import annotations

import pytest

from tensorfabric import roce


def test_recipe_numbers() -> None:
    assert (roce.ROCE_DSCP, roce.CNP_DSCP, roce.LOSSLESS_PRIORITY, roce.CNP_PRIORITY) == (26, 48, 3, 6)
    assert roce.TRAFFIC_CLASS == 106 and roce.traffic_class(26, 0) == 104
    assert roce.dscp_of_traffic_class(106) == 26 and roce.default_priority(26) == 3
    assert roce.default_priority(roce.CNP_DSCP) == roce.CNP_PRIORITY
    assert roce.SONIC_LOSSLESS_PRIORITIES == (3, 4) and roce.ROCE_UDP_PORT == 4791 and roce.PAUSE_QUANTUM_BITS == 512


def test_the_recipe_is_defined_once() -> None:
    from tensorfabric.fabric import headroom
    from tensorfabric.fabric.spec import qos as spec_qos
    from tensorfabric.host.checks.base import DoctorContext
    from tensorfabric.sim.pfc import PfcConfig
    from tensorfabric.telemetry.detectors.base import Thresholds

    assert headroom.PAUSE_QUANTA is roce.PAUSE_QUANTA
    plan = spec_qos.QosPlan()
    assert (plan.roce.dscp, plan.roce.priority, plan.cnp.dscp, plan.cnp.priority) == ((26,), 3, 48, 6)
    assert plan.nccl_tc() == roce.TRAFFIC_CLASS and plan.lossless_priorities == (roce.LOSSLESS_PRIORITY,)
    assert PfcConfig().priority == roce.LOSSLESS_PRIORITY
    assert Thresholds().lossless_priorities == ("3", "4")
    assert DoctorContext.__dataclass_fields__["roce_dscp"].default == roce.ROCE_DSCP


def test_pause_quanta_per_speed() -> None:
    assert roce.pause_quanta(100e9) == 394 and roce.pause_quanta(400e9) == 905 and roce.pause_quanta(100e6) == 1
    assert roce.pause_quanta(300e9) is None and roce.pause_quanta(2.5e9) is None


@pytest.mark.parametrize(("dscp", "ecn"), [(-1, 0), (64, 0), (26, 4)])
def test_traffic_class_refuses_out_of_range(dscp: int, ecn: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        roce.traffic_class(dscp, ecn)
