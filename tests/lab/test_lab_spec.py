"""Spec validation, the address plan, state files and the rank waiter: pure code, no namespaces needed."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.errors import InputError, LabError
from tensorfabric.lab import LabSpec, parse_short_spec, plan_lab
from tensorfabric.lab.launch import wait_ranks
from tensorfabric.lab.netlink import check_privileges, privileges_missing
from tensorfabric.lab.state import LabState, Owner, StateStore, default_state_dir


def test_short_spec() -> None:
    assert parse_short_spec("2x1gbit") == (2, 1e9)
    assert parse_short_spec(" 4X200mbit ") == (4, 2e8)
    for bad in ("2x1zbit", "0x1gbit", "500x1gbit", "x1gbit", "2x", "2*1gbit", ""):
        with pytest.raises(InputError):
            parse_short_spec(bad)


@given(st.text(max_size=30))
def test_short_spec_fuzz(text: str) -> None:
    try:
        hosts, rate = parse_short_spec(text)
    except InputError:
        return
    assert 1 <= hosts <= 64 and rate > 0


@pytest.mark.parametrize("kwargs, message", [
    ({"hosts": 0}, "hosts: 0 is out of range"),
    ({"hosts": 500}, "hosts: 500 is out of range"),
    ({"rate": "1zbit"}, "unknown unit in '1zbit'"),
    ({"rate": "10tbit"}, "out of range"),
    ({"name": "Bad-Name"}, "lowercase letters"),
    ({"topology": "ring"}, "not one of star, leafspine"),
    ({"leaves": 2}, "only apply to --topology leafspine"),
    ({"mtu": 20000}, "mtu: 20000 is out of range"),
    ({"subnet": "10.0.0.0/30"}, "too small"),
    ({"subnet": "fd00::/64"}, "must be IPv4"),
    ({"subnet": "nonsense"}, "not an IPv4 network"),
    ({"topology": "leafspine", "leaves": 3, "hosts": 2}, "need at least 3 hosts"),
])
def test_spec_rejects(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"name": "t", "hosts": 2, "rate": "1gbit", **kwargs}
    with pytest.raises(InputError, match=message):
        LabSpec.create(**args)  # type: ignore[arg-type]


def test_star_plan() -> None:
    plan = plan_lab(LabSpec.create(name="s", hosts=3, rate="1gbit"))
    assert plan.hosts == ("h0", "h1", "h2")
    assert plan.namespaces == ("tf-s-h0", "tf-s-h1", "tf-s-h2", "tf-s-sw0")
    assert [plan.host_address(h) for h in plan.hosts] == ["198.18.0.1", "198.18.0.2", "198.18.0.3"]
    assert [(str(link.a), str(link.b)) for link in plan.links] == [
        ("h0:eth0", "sw0:h0"), ("h1:eth0", "sw0:h1"), ("h2:eth0", "sw0:h2")]
    assert plan.routes == ()


def test_leafspine_plan_is_routed_and_complete() -> None:
    spec = LabSpec.create(name="ls", hosts=5, rate="1gbit", topology="leafspine", leaves=2, spines=3,
                          uplink_rate="2gbit", subnet="10.8.0.0/16")
    plan = plan_lab(spec)
    assert [plan.leaf_of(h) for h in plan.hosts] == ["leaf0", "leaf0", "leaf0", "leaf1", "leaf1"]
    uplinks = [link for link in plan.links if link.a.device.startswith("leaf")]
    assert len(uplinks) == 6 and all(link.rate_bps == 2e9 for link in uplinks)
    # Only host ports are bridged: a bridge spanning two spines would be a loop.
    assert all(not n.bridge_ports for n in plan.nodes if n.role == "spine")
    assert all(port.startswith("h") for n in plan.nodes for port in n.bridge_ports)
    net = ipaddress.ip_network("10.8.0.0/16")
    addrs = [ipaddress.ip_interface(a.cidr) for a in plan.addresses]
    assert all(a.ip in net for a in addrs)
    assert len({a.ip for a in addrs}) == len(addrs)
    leaf0_route = next(r for r in plan.routes if r.node == "leaf0")
    assert leaf0_route.dst == "10.8.0.0/16" and len(leaf0_route.via) == 3
    assert plan.host_address("h3") == "10.8.1.1"


def test_state_roundtrip_and_claim(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    spec = LabSpec.create(name="st", hosts=2, rate="1gbit")
    state = LabState(spec, owner=Owner.current()).with_namespace("tf-st-h0")
    store.claim(state)
    with pytest.raises(InputError, match="already in use"):
        store.claim(state)
    loaded = store.load("st")
    assert loaded == state and loaded.owner is not None and loaded.owner.alive()
    assert store.names() == ["st"]
    with pytest.raises(InputError, match="does not exist"):
        store.load("other")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(LabError, match="unreadable"):
        store.load("bad")
    assert default_state_dir({"TENSORFABRIC_LAB_DIR": "/x"}) == Path("/x")
    assert default_state_dir({}) == Path("/run/tensorfabric/lab")
    assert not Owner(pid=2**22 + 1, start_ticks=5).alive()


def test_no_capability_is_a_clear_lab_error(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nCapEff:\t0000000000000000\n")
    with pytest.raises(LabError, match="root or CAP_NET_ADMIN"):
        check_privileges(str(status))
    status.write_text("CapEff:\t0000000000001000\n")
    with pytest.raises(LabError, match="missing: CAP_SYS_ADMIN"):
        check_privileges(str(status))
    assert "missing: CAP_SYS_ADMIN" in (privileges_missing(str(status)) or "")
    status.write_text("CapEff:\t0000000000201000\n")
    check_privileges(str(status))
    assert privileges_missing(str(status)) is None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_wait_ranks_grace_after_first_failure() -> None:
    clock = _Clock()
    codes = wait_ranks([lambda: 1 if clock.now > 1 else None, lambda: None], timeout_s=100, grace_s=2,
                       clock=clock, sleep=clock.sleep)
    assert codes == [1, None]
    assert 3.0 <= clock.now < 3.2


def test_wait_ranks_timeout_and_success() -> None:
    clock = _Clock()
    assert wait_ranks([lambda: None], timeout_s=1, grace_s=5, clock=clock, sleep=clock.sleep) == [None]
    assert wait_ranks([lambda: 0, lambda: 0], timeout_s=1, grace_s=5, clock=clock, sleep=clock.sleep) == [0, 0]


@given(name=st.text(max_size=25), rate=st.one_of(st.text(max_size=12), st.floats(allow_nan=True)),
       hosts=st.integers(-5, 600), mtu=st.integers(0, 70000), subnet=st.text(max_size=20))
def test_spec_fuzz_raises_only_input_error(name: str, rate: str | float, hosts: int, mtu: int, subnet: str) -> None:
    try:
        spec = LabSpec.create(name=name, hosts=hosts, rate=rate, mtu=mtu, subnet=subnet)
    except InputError:
        return
    assert plan_lab(spec).hosts == tuple(f"h{i}" for i in range(hosts))


def test_public_api() -> None:
    import tensorfabric.lab as lab

    assert sorted(lab.__all__) == sorted(n for n in dir(lab) if not n.startswith("_") and n not in {
        "annotations", "lab", "launch", "netlink", "plan", "spec", "state", "status"})


@given(st.one_of(st.text(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
        ["spec", "namespaces", "phase", "owner", "created_at", "name", "hosts", "pid", "start_ticks"]),
        inner, max_size=6), max_leaves=12).map(json.dumps)))
def test_state_file_fuzz_raises_only_lab_error(text: str) -> None:
    try:
        LabState.from_json(text, "fuzz.json")
    except LabError:
        pass


def test_state_file_may_only_name_its_own_namespaces() -> None:
    good = LabState(LabSpec.create(name="own", hosts=1, rate="1gbit")).with_namespace("tf-own-h0")
    assert LabState.from_json(good.to_json(), "s") == good
    evil = json.loads(good.to_json())
    evil["namespaces"] = ["tf-own-h0", "tf-other-h0"]
    with pytest.raises(LabError, match="must be a list of names starting with 'tf-own-'"):
        LabState.from_json(json.dumps(evil), "s")


def test_leaves_and_spines_left_out_are_the_topologys_own() -> None:
    assert (LabSpec.create(name="d", hosts=4, rate="1gbit", topology="leafspine").leaves,
            LabSpec.create(name="d", hosts=4, rate="1gbit", topology="leafspine").spines) == (2, 2)
    star = LabSpec.create(name="d", hosts=4, rate="1gbit", leaves=1)
    assert (star.leaves, star.spines) == (1, 1)
