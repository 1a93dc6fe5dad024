"""The simulate verb: bad input exits 2 with one line; human output names the outcome."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorfabric.cli.main import main
from tensorfabric.errors import InputError
from tensorfabric.sim.scenarios import SCENARIOS, Overrides, plan


@pytest.mark.parametrize("argv, needle", [
    (["simulate", "tornado"], "not one of"),
    (["simulate", "incast", "--kmin", "300KB", "--kmax", "200KB"], "Kmin"),
    (["simulate", "incast", "--rate", "-5G"], "positive rate"),
    (["simulate", "incast", "--step", "50us"], "too coarse"),
    (["simulate", "incast", "--rate", "400G", "--step", "5us"], "KiB per step"),
    (["simulate", "incast", "--pmax", "2"], "pmax"),
    (["simulate", "deadlock", "--flows", "0"], "1<=x"),
    (["simulate", "incast", "--dcqcn", "magic"], "magic"),
])
def test_bad_input_exits_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert len(err.strip().splitlines()) == 1


def test_human_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "deadlock", "--duration", "1ms"]) == 0
    out = capsys.readouterr().out
    assert "deadlock" in out and "most paused ports" in out and "'deadlocked': True" in out


@settings(max_examples=60, deadline=None)
@given(name=st.one_of(st.sampled_from(sorted(SCENARIOS)), st.text(max_size=12)),
       rate=st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True)),
       kmin=st.one_of(st.none(), st.floats(-1e7, 1e7)), kmax=st.one_of(st.none(), st.floats(-1e7, 1e7)),
       pmax=st.one_of(st.none(), st.floats(-2, 2)), step=st.one_of(st.none(), st.floats(-1e-3, 1e-3)),
       flows=st.one_of(st.none(), st.integers(-3, 12)))
def test_planning_random_input_raises_only_input_errors(name: str, rate: float | None, kmin: float | None,
                                                       kmax: float | None, pmax: float | None, step: float | None,
                                                       flows: int | None) -> None:
    try:
        p = plan(name, Overrides(flows=flows, rate_bps=rate, kmin_bytes=kmin, kmax_bytes=kmax, pmax=pmax,
                                 step_s=step))
        from tensorfabric.sim import compile_network

        compile_network(p.fabric, p.flows, p.config)
    except InputError:
        pass


def test_fabric_spec_is_simulated_with_its_ecn_profile(capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    spec = Path(__file__).resolve().parents[1] / "fixtures" / "fabric" / "specs" / "reference.yaml"
    if not spec.exists():
        pytest.skip("the fabric helper's reference spec is not in this checkout")
    assert main(["simulate", "incast", "--fabric", str(spec), "--flows", "2", "--duration", "300us", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["params"]["fabric"] == str(spec)
    assert doc["params"]["kmin_bytes"] == 150_000 and doc["params"]["pmax"] == 1.0  # from the spec's qos.ecn
    assert len(doc["flows"]) == 2
    assert main(["simulate", "deadlock", "--fabric", str(spec)]) == 2  # builds its own ring
    assert main(["simulate", "incast", "--fabric", str(spec), "--rate", "10G"]) == 2
