"""The simulator's engines: one registry holds them and their names; ``auto`` takes the first that applies."""

from __future__ import annotations

import dataclasses
from typing import get_args

import pytest

from tensorfabric.errors import InputError
from tensorfabric.sim import EcnConfig, SimConfig, compile_network, single_switch
from tensorfabric.sim.config import CongestionControl, EngineName
from tensorfabric.sim.engine import AUTO, ENGINE_NAMES, ENGINES, run
from tensorfabric.sim.reaction import REACTION_POINTS
from tensorfabric.sim.workloads import incast

PFC_ONLY = SimConfig(step_s=1e-6, duration_s=2e-3, dcqcn="none", ecn=EcnConfig(enabled=False), header_bytes=0)


def test_names_are_written_once() -> None:
    from tensorfabric.cli.simulate import cli as simulate

    assert ENGINE_NAMES == (AUTO, *ENGINES.names()) == (AUTO, "events", "stepped")
    assert set(get_args(EngineName)) == set(ENGINE_NAMES)
    assert set(get_args(CongestionControl)) == set(REACTION_POINTS.names())
    engine_option = next(p for p in simulate.params if p.name == "engine")
    assert tuple(engine_option.type.choices) == ENGINE_NAMES  # type: ignore[attr-defined]


def test_auto_takes_the_first_engine_that_applies() -> None:
    fabric = single_switch(5, 100e9)
    hosts = [h.name for h in fabric.hosts]
    net = compile_network(fabric, incast(hosts[1:], hosts[0], 2e5), PFC_ONLY)
    assert run(net, PFC_ONLY).engine == "events"
    with_cc = dataclasses.replace(PFC_ONLY, dcqcn="firmware", ecn=EcnConfig())
    assert run(compile_network(fabric, incast(hosts[1:], hosts[0], 2e5), with_cc), with_cc).engine == "stepped"
    forced = dataclasses.replace(with_cc, engine="events")
    with pytest.raises(InputError, match="engine events: does not apply here"):
        run(compile_network(fabric, incast(hosts[1:], hosts[0], 2e5), forced), forced)


def test_unknown_names_list_the_accepted_ones() -> None:
    with pytest.raises(InputError, match="auto, events, stepped"):
        SimConfig(engine="warp")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="paper, firmware, none"):
        SimConfig(dcqcn="hpcc")  # type: ignore[arg-type]
