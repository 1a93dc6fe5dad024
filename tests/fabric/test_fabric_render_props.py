"""Hypothesis: for random QoS plans, every switch and host rendering parses back to the plan it came from.

Watchdog times are drawn as multiples of the poll interval because Cumulus and NX-OS express them as
interval x multiplier; that limit of the targets is documented in their renderers.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.fabric.parsers import parse_text
from tensorfabric.fabric.plan import host_plans, switch_plans
from tensorfabric.fabric.renderers import render_fabric
from tensorfabric.fabric.spec import FabricSpec, load_spec

from .fabric_io_support import SPECS, host_mismatches, switch_mismatches


@lru_cache(maxsize=1)
def _base() -> dict[str, Any]:
    return load_spec(SPECS / "render-reference.yaml").model_dump(by_alias=True)


@st.composite
def _qos(draw: st.DrawFn) -> dict[str, Any]:
    roce_dscp = draw(st.integers(0, 63))
    cnp_dscp = draw(st.integers(0, 63).filter(lambda d: d != roce_dscp))
    roce_prio = draw(st.integers(0, 7))
    cnp_prio = draw(st.integers(0, 7).filter(lambda p: p != roce_prio))
    extra = draw(st.sampled_from([p for p in range(8) if p not in (roce_prio, cnp_prio)]))
    lossless = sorted({roce_prio, *([extra] if draw(st.booleans()) else [])})
    kmin = draw(st.integers(1_000, 5_000_000))
    poll = draw(st.sampled_from([50, 100, 200]))
    share = draw(st.integers(1, 99))
    return {
        "roce": {"dscp": [roce_dscp], "priority": roce_prio},
        "cnp": {"dscp": cnp_dscp, "priority": cnp_prio, "strict": draw(st.booleans())},
        "lossless_priorities": lossless,
        "trust": draw(st.sampled_from(["dscp", "pcp"])),
        "dscp_map": draw(st.dictionaries(st.integers(0, 63).filter(lambda d: d not in (roce_dscp, cnp_dscp)),
                                         st.integers(0, 7), max_size=4)),
        "ecn": [{"kmin": kmin, "kmax": kmin + draw(st.integers(1, 5_000_000)), "pmax": draw(st.integers(1, 100))}],
        "ets": {"weights": {0: share, roce_prio: 100 - share} if roce_prio != 0 else {0: 100}},
        "mtu": {"host": draw(st.integers(1500, 9000)), "switch": draw(st.integers(1500, 9216))},
        "watchdog": {"enabled": draw(st.booleans()), "poll_ms": poll, "detection_ms": poll * draw(st.integers(1, 5)),
                     "restoration_ms": poll * draw(st.integers(1, 5)), "action": "drop"},
        "nic_storm_prevention_ms": draw(st.sampled_from([None, 80, 100, 8000])),
        "classifier": {"kind": draw(st.sampled_from(["dscp", "acl"]))},
    }


# Each example renders and parses a whole seven-device fabric; 50 keep this file within the suite's time budget
# (600 examples were run by hand while developing).
@settings(max_examples=50)
@given(_qos())
def test_random_plans_round_trip(qos: dict[str, Any]) -> None:
    spec = FabricSpec.model_validate({**_base(), "qos": qos})
    texts = {item.device: item for item in render_fabric(spec)}
    problems: list[str] = []
    for plan in switch_plans(spec):
        item = texts[plan.name]
        problems += switch_mismatches(plan, parse_text(item.text, source=item.filename))
    for host in host_plans(spec):
        item = texts[host.name]
        problems += host_mismatches(host, parse_text(item.text, source=item.filename))
    assert problems == []
