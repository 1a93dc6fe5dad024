from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tensorfabric
from tensorfabric.errors import InputError, ParseError, TransferError
from tensorfabric.findings import Finding, exit_code_for, worst_severity
from tensorfabric.fsutil import atomic_write_text
from tensorfabric.samples import Sample
from tensorfabric.topology import Endpoint, Fabric, Host, Link, Nic, Switch


def test_public_api_is_curated() -> None:
    assert sorted(tensorfabric.__all__) == sorted(
        ["Alert", "DiscoveryError", "Finding", "InputError", "LabError", "ParseError", "Sample",
         "SimulationError", "TensorFabricError", "TransferError", "__version__"])
    for name in tensorfabric.__all__:
        assert hasattr(tensorfabric, name)


def test_error_tree_and_messages() -> None:
    assert issubclass(ParseError, InputError)
    err = ParseError("bad counter", source="ethtool.txt", line=3, excerpt="rx_x: zz")
    assert str(err) == "ethtool.txt:3: bad counter (near 'rx_x: zz')"
    t = TransferError("peer did not answer", op="all_reduce", group="tp", peer=1)
    assert (t.op, t.group, t.peer) == ("all_reduce", "tp", 1)
    assert "peer=1" in str(t)


def test_findings_roundtrip_and_exit_code() -> None:
    f = Finding("roce.tc-not-lossless", "error", "host h1", "TC 0", {"tc": 0}, "set NCCL_IB_TC=104")
    assert Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f
    w = Finding("x.y", "warning", "s", "m")
    assert worst_severity([w, f]) == "error"
    assert exit_code_for([w]) == 0 and exit_code_for([w, f]) == 1
    with pytest.raises(ValueError):
        Finding("r", "fatal", "s", "m")  # type: ignore[arg-type]


def test_sample_json_roundtrip() -> None:
    s = Sample(1.5, "roce_pfc_pause_frames_total", "counter", 42.0, {"host": "h1", "priority": "3"}, "sim")
    assert Sample.from_json(s.to_json()) == s
    assert s.series == ("roce_pfc_pause_frames_total", (("host", "h1"), ("priority", "3")))


@given(st.text(max_size=200))
def test_sample_from_json_only_parse_error(text: str) -> None:
    try:
        Sample.from_json(text)
    except ParseError:
        pass


def test_topology_validation() -> None:
    h = Host("h1", (Nic("eth2", 400e9, "mlx5_0"),))
    s = Switch("leaf1", "leaf")
    fab = Fabric((h,), (s,), (Link(Endpoint("leaf1", "Ethernet0"), Endpoint.parse("h1:eth2"), 400e9),))
    assert fab.neighbours("h1") == ["leaf1"] and fab.is_switch("leaf1")
    with pytest.raises(InputError, match="unknown device 'h9'"):
        Fabric((h,), (s,), (Link(Endpoint("leaf1", "E0"), Endpoint("h9", "eth0"), 1e9),))
    with pytest.raises(InputError, match="used twice"):
        Fabric((h, h), ())
    with pytest.raises(InputError, match="device:port"):
        Endpoint.parse("leaf1")


def test_atomic_write(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = atomic_write_text(tmp_path / "a" / "f.txt", "hello")
    assert p.read_text() == "hello"
    assert [x.name for x in p.parent.iterdir()] == ["f.txt"]
