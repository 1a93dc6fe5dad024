"""The lab on the real kernel: namespaces, veth links, tbf, teardown and rollback (needs root)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tensorfabric.errors import InputError, LabError
from tensorfabric.lab import Lab, down_all
from tensorfabric.lab.netlink import Netlink

from .lab_support import NEEDS_NAMESPACES

pytestmark = NEEDS_NAMESPACES

BULK = [sys.executable, "-m", "tensorfabric.lab.tcpbulk"]


class Leftovers:
    """What the root namespace and the netns list look like, to prove a lab left nothing behind."""

    def __init__(self, nl: Netlink) -> None:
        self.nl = nl
        self.links = sorted(nl.root_links())
        self.qdiscs = sorted(nl.root_qdisc_indices())

    def assert_clean(self, lab_name: str) -> None:
        assert [ns for ns in self.nl.list_netns() if ns.startswith(f"tf-{lab_name}-")] == []
        # Other helpers' labs never touch the root namespace either, so it must be exactly as before.
        assert sorted(self.nl.root_links()) == self.links
        assert sorted(self.nl.root_qdisc_indices()) == self.qdiscs


@pytest.fixture()
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture()
def leftovers() -> Iterator[Leftovers]:
    yield Leftovers(Netlink())


def _bulk(lab: Lab, src: str, dst: str, nbytes: int, port: int = 5201) -> dict[str, float]:
    recv = lab.popen(dst, [*BULK, "recv", "--port", str(port), "--bytes", str(nbytes), "--timeout", "30"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sent = lab.exec(src, [*BULK, "send", "--to", lab.address(dst), "--port", str(port), "--bytes", str(nbytes),
                          "--timeout", "30"], timeout_s=60)
    out, err = recv.communicate(timeout=60)
    assert sent.returncode == 0 and recv.returncode == 0, (sent.stderr, err)
    result: dict[str, float] = json.loads(out)
    return result


def test_up_down_leaves_nothing(state_dir: Path, leftovers: Leftovers) -> None:
    lab = Lab(hosts=3, rate="1gbit", name="tupdown", state_dir=state_dir)
    with lab:
        names = Netlink().list_netns()
        assert {"tf-tupdown-h0", "tf-tupdown-h1", "tf-tupdown-h2", "tf-tupdown-sw0"} <= set(names)
        ifaces = Netlink().interfaces("tf-tupdown-h1")
        assert ifaces["eth0"]["qdisc"]["kind"] == "tbf" and ifaces["eth0"]["state"] == "UP"
        assert (state_dir / "tupdown.json").exists()
        assert sorted(Netlink().root_links()) == leftovers.links  # nothing in the root namespace, even while up
    leftovers.assert_clean("tupdown")
    assert not (state_dir / "tupdown.json").exists()


def test_exception_inside_context_manager_cleans_up(state_dir: Path, leftovers: Leftovers) -> None:
    with pytest.raises(RuntimeError, match="boom"), Lab(hosts=2, rate="100mbit", name="texc", state_dir=state_dir):
        raise RuntimeError("boom")
    leftovers.assert_clean("texc")


def test_failure_halfway_through_up_rolls_back(state_dir: Path, leftovers: Leftovers) -> None:
    seen: list[str] = []

    def fail_at_second_link(step: str) -> None:
        seen.append(step)
        if step.startswith("link h1"):
            raise LabError("injected failure")

    lab = Lab(hosts=3, rate="1gbit", name="thalf", state_dir=state_dir, on_step=fail_at_second_link)
    with pytest.raises(LabError, match="injected"):
        lab.up()
    assert any(s.startswith("link h0") for s in seen)  # the first link really was built
    leftovers.assert_clean("thalf")
    assert list(state_dir.glob("*.json")) == []


def test_leafspine_hosts_reach_each_other(state_dir: Path, leftovers: Leftovers) -> None:
    with Lab(hosts=4, rate="1gbit", name="tls", topology="leafspine", leaves=2, spines=2,
             state_dir=state_dir) as lab:
        assert lab.plan.leaf_of("h0") != lab.plan.leaf_of("h3")
        for port, (src, dst) in enumerate([("h0", "h3"), ("h3", "h1"), ("h2", "h0"), ("h0", "h1")], start=5300):
            assert _bulk(lab, src, dst, 200_000, port=port)["bytes"] == 200_000
        status = lab.status().to_dict()
        uplinks = [link for link in status["links"] if link["a"].startswith("leaf")]
        assert len(uplinks) == 4
        assert sum(end["tx_bytes"] for link in uplinks for end in link["ends"]) > 3 * 200_000
    leftovers.assert_clean("tls")


def test_bulk_tcp_is_held_to_the_shaped_rate_and_counters_agree(state_dir: Path) -> None:
    nbytes = 40_000_000  # 1.6 s at 200 Mbit/s
    with Lab(hosts=2, rate="200mbit", name="trate", state_dir=state_dir) as lab:
        before = lab.status().to_dict()["links"][0]["ends"][0]["tx_bytes"]
        result = _bulk(lab, "h0", "h1", nbytes)
        status = lab.status().to_dict()
    print(f"bulk TCP at 200mbit: {result['bps'] / 1e6:.1f} Mbit/s goodput")
    # The shaper is a ceiling: whatever the CPUs manage, tbf must not let more than the rate through
    # (goodput is below the wire rate, so 10 % covers any measurement slack). The lower side, "within 10 %
    # of the rate", depends on free CPU and lives in benchmarks/lab_line_rate.py.
    assert result["bps"] <= 1.10 * 200e6
    h0 = status["links"][0]["ends"][0]
    moved = h0["tx_bytes"] - before
    assert nbytes <= moved <= 1.05 * nbytes
    assert h0["qdisc"]["kind"] == "tbf" and h0["qdisc"]["packets"] > 0


def test_spawn_gives_each_rank_a_torchrun_environment(state_dir: Path) -> None:
    probe = ("import json, os, socket; keys = ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT',"
             " 'GLOO_SOCKET_IFNAME', 'NCCL_SOCKET_IFNAME']; print(json.dumps({k: os.environ[k] for k in keys}))")
    with Lab(hosts=3, rate="1gbit", name="tspawn", state_dir=state_dir) as lab:
        procs = lab.spawn([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True)
        envs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    for rank, env in enumerate(envs):
        assert env == {"RANK": str(rank), "WORLD_SIZE": "3", "LOCAL_RANK": "0", "MASTER_ADDR": "198.18.0.1",
                       "MASTER_PORT": "29500", "GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0"}


def test_down_all_removes_stale_labs_and_keeps_owned_ones(state_dir: Path, leftovers: Leftovers) -> None:
    Lab(hosts=1, rate="1gbit", name="tstale", state_dir=state_dir).up(persistent=True)
    with Lab(hosts=1, rate="1gbit", name="towned", state_dir=state_dir):
        removed = down_all(state_dir=state_dir, orphans=False)
        assert sorted(removed) == ["tf-tstale-h0", "tf-tstale-sw0"]
        assert "tf-towned-h0" in Netlink().list_netns()
    leftovers.assert_clean("tstale")
    leftovers.assert_clean("towned")


def test_down_stops_processes_left_in_hosts(state_dir: Path, leftovers: Leftovers) -> None:
    lab = Lab(hosts=2, rate="1gbit", name="tprocs", state_dir=state_dir).up(persistent=True)
    # Started outside the lab's own bookkeeping, as `tensorfabric lab exec ... &` would be.
    stray = subprocess.Popen(lab.command("h1", ["sleep", "600"]))
    # Popen returns before `ip netns exec` has entered the namespace: wait (bounded) until it has.
    deadline = time.monotonic() + 10
    while Netlink().netns_pids(["tf-tprocs-h1"])["tf-tprocs-h1"] != [stray.pid] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert Netlink().netns_pids(["tf-tprocs-h1"])["tf-tprocs-h1"] == [stray.pid]
    Lab.attach("tprocs", state_dir=state_dir).down()
    assert stray.wait(timeout=10) == -9
    leftovers.assert_clean("tprocs")


def test_status_of_a_removed_lab_does_not_resurrect_it(state_dir: Path, leftovers: Leftovers) -> None:
    lab = Lab(hosts=1, rate="1gbit", name="tghost", state_dir=state_dir).up(persistent=True)
    Netlink().remove_netns("tf-tghost-h0")
    with pytest.raises(LabError, match="'tf-tghost-h0' does not exist"):
        lab.status().to_dict()
    assert "tf-tghost-h0" not in Netlink().list_netns()
    lab.down()
    leftovers.assert_clean("tghost")


def test_down_all_removes_orphans_and_unreadable_labs_by_prefix(state_dir: Path, leftovers: Leftovers) -> None:
    nl = Netlink()
    nl.create_netns("tf-torphx-h0")  # a namespace no state file knows, as after a lost /run
    Lab(hosts=1, rate="1gbit", name="torphy", state_dir=state_dir).up(persistent=True)
    (state_dir / "torphy.json").write_text("{ not json")  # its state file got corrupted
    young = down_all(state_dir=state_dir, prefix="torph")
    assert young == [] and {"tf-torphx-h0", "tf-torphy-h0"} <= set(nl.list_netns())  # under a minute old
    later = down_all(state_dir=state_dir, prefix="torph", clock=lambda: time.time() + 120)
    assert sorted(later) == ["tf-torphx-h0", "tf-torphy-h0", "tf-torphy-sw0"]
    assert list(state_dir.glob("*.json")) == []
    leftovers.assert_clean("torphx")
    leftovers.assert_clean("torphy")


def test_generated_name_steps_over_a_dead_process_leftover(state_dir: Path, leftovers: Leftovers) -> None:
    lab = Lab(hosts=1, rate="1gbit", state_dir=state_dir)
    stale = lab.name
    state_dir.mkdir(parents=True)
    (state_dir / f"{stale}.json").write_text("{}")  # as a SIGKILLed process with the same pid would leave
    with lab:
        assert lab.name != stale and lab.address("h0") == "198.18.0.1"
        assert f"tf-{lab.name}-h0" in Netlink().list_netns()
    leftovers.assert_clean(lab.name)
    with pytest.raises(InputError, match="already in use"):  # a name the user chose is never changed
        Lab(hosts=1, rate="1gbit", name=stale, state_dir=state_dir).up()
