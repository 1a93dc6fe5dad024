"""Parsers and sources on fixture dumps built to the real formats; faults; Hypothesis fuzzing."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorfabric.errors import InputError, ParseError, TensorFabricError
from tensorfabric.telemetry.sources import SourceContext, open_source
from tensorfabric.telemetry.sources.ethtool import parse_ethtool_stats
from tensorfabric.telemetry.sources.netdev import link_samples, qdisc_samples
from tensorfabric.telemetry.sources.rdma import parse_rdma_json
from tensorfabric.telemetry.sources.replay import parse_lines
from tensorfabric.telemetry.sources.sonic_redis import port_samples
from tensorfabric.telemetry.sources.sysfs import parse_rate_file

from .telemetry_support import FIXTURES, ctx, find


def test_ethtool_mlx5_units_and_labels() -> None:
    reading = open_source(f"ethtool-file:{FIXTURES / 'ethtool_mlx5.txt'}@eth2", ctx()).read()
    assert reading.errors == ()
    s = reading.samples
    rx = find(s, "roce_pfc_paused_seconds_total", direction="rx", priority="3")
    tx = find(s, "roce_pfc_paused_seconds_total", direction="tx", priority="3")
    assert rx[0].value == pytest.approx(8134e-6) and tx[0].value == pytest.approx(2.914772)
    assert rx[0].labels == {"host": "h0", "device": "eth2", "port": "1", "priority": "3", "direction": "rx"}
    assert find(s, "roce_pfc_pause_frames_total", direction="tx", priority="3")[0].value == 1290418
    assert find(s, "roce_pfc_pause_transitions_total", priority="3")[0].value == 39218
    assert find(s, "roce_ecn_marked_packets_total", priority="3")[0].value == 52110
    assert find(s, "roce_link_down_events_total")[0].value == 4
    assert find(s, "roce_pci_stalled_ratio", direction="wr")[0].value == pytest.approx(0.12)
    assert {x.labels["reason"] for x in find(s, "roce_discards_total")} == {
        "no_buffer", "host_buffer", "wred", "phy_rx", "phy_tx", "pci_overflow"}
    # counters without a canonical name are exported generically under their raw name, never dropped
    assert find(s, "roce_nic_stat_total", name="tx_tso_packets")[0].value == 128
    assert find(s, "roce_eth_rx_out_of_buffer_total")[0].value == 0
    assert not [x for x in s if "tso" in x.metric or x.metric.startswith("rx_")]
    assert all(x.kind == "counter" for x in s if x.metric.endswith("_total"))


def test_ethtool_garbage_text_is_a_parse_error() -> None:
    source = open_source(f"ethtool-file:{FIXTURES / 'ethtool_garbage.txt'}", ctx())
    with pytest.raises(ParseError, match="ethtool -S"):
        source.read()


def test_ethtool_non_numeric_counters_are_reported_and_the_rest_kept() -> None:
    reading = open_source(f"ethtool-file:{FIXTURES / 'ethtool_partial.txt'}", ctx()).read()
    assert len(reading.errors) == 2
    assert any("not-a-number" in e for e in reading.errors) and any("garbage" in e for e in reading.errors)
    assert find(reading.samples, "roce_pfc_paused_seconds_total", direction="tx")[0].value == pytest.approx(2.5)
    assert not find(reading.samples, "roce_pfc_paused_seconds_total", direction="rx")


def test_sysfs_tree_words_to_bytes_and_na_is_absent() -> None:
    reading = open_source(f"sysfs:{FIXTURES / 'sysfs'}", ctx()).read()
    assert reading.errors == ()
    s = reading.samples
    assert find(s, "roce_bytes_total", device="mlx5_0", direction="tx")[0].value == 2880761508848 * 4
    assert find(s, "roce_link_speed_bytes_per_second", device="mlx5_0")[0].value == 400e9 / 8
    assert find(s, "roce_retransmissions_total", device="mlx5_0", kind="local_ack_timeout_err")[0].value == 131
    assert find(s, "roce_cnp_handled_total", device="mlx5_0")[0].value == 18231
    # the VF reads "N/A (no PMA)": absent, never zero; its link_downed is real
    assert not find(s, "roce_bytes_total", device="mlx5_1")
    assert find(s, "roce_link_down_events_total", device="mlx5_1")[0].value == 5
    # bnxt_re has no counters/ directory: only its rate, no error
    assert {x.metric for x in s if x.labels["device"] == "bnxt_re0"} == {"roce_link_speed_bytes_per_second"}


def test_sysfs_file_vanishing_mid_poll_is_an_error_not_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "sys"
    shutil.copytree(FIXTURES / "sysfs", root)
    counters = root / "class/infiniband/mlx5_0/ports/1/hw_counters"
    # a dangling entry: listed by the directory scan, gone when read -- what a driver unload looks like
    (counters / "np_cnp_sent").unlink()
    (counters / "np_cnp_sent").symlink_to(counters / "gone")
    (counters / "rp_cnp_handled").write_text("garbage\n")
    reading = open_source(f"sysfs:{root}", ctx()).read()
    assert any("np_cnp_sent: vanished" in e for e in reading.errors)
    assert any("rp_cnp_handled: not a counter value" in e for e in reading.errors)
    assert find(reading.samples, "roce_ecn_marked_packets_total", device="mlx5_0")[0].value == 40211


def test_rdma_json_flat_and_nested() -> None:
    reading = open_source(f"rdma-json:{FIXTURES / 'rdma_statistic.json'}", ctx()).read()
    assert reading.errors == ()
    s = reading.samples
    assert find(s, "roce_rq_out_of_buffer_total", device="mlx5_0")[0].value == 135
    assert find(s, "roce_cnp_ignored_total", device="mlx5_1")[0].value == 5
    assert find(s, "roce_retransmissions_total", device="mlx5_1", kind="out_of_sequence")[0].value == 17
    nested = json.dumps([{"ifname": "mlx5_2", "port": 1, "counters": {"np_cnp_sent": 9, "rp_cnp_handled": "x"}}])
    links, errors = parse_rdma_json(nested)
    assert links == [("mlx5_2", "1", {"np_cnp_sent": 9.0})] and len(errors) == 1


def test_replay_follows_a_growing_file(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    path.write_text('{"time": 1, "metric": "roce_cnp_sent_total", "value": 3, "labels": {"host": "h0"}}\n{"ti')
    source = open_source(f"replay:{path}", ctx())
    first = source.read()
    assert [x.value for x in first.samples] == [3.0] and first.errors == ()
    with path.open("a") as handle:
        handle.write('me": 2, "metric": "roce_cnp_sent_total", "value": 5}\nnot json\n')
    second = source.read()
    assert [x.time for x in second.samples] == [2.0]
    assert len(second.errors) == 1 and ":3:" in second.errors[0]


def test_source_spec_errors_name_the_value() -> None:
    for spec, pattern in (("nope", "KIND:ARG"), ("sysfs:/does/not/exist", "not a directory"),
                          ("ethtool-file:/nope.txt", "not a file"), ("sonic-redis:localhost", "HOST:PORT"),
                          ("rdma:x", "no argument"), ("replay:", "not a file")):
        with pytest.raises(InputError, match=pattern):
            open_source(spec, ctx())


def test_netdev_reads_real_iproute2_output() -> None:
    if shutil.which("ip") is None or shutil.which("tc") is None:
        pytest.skip("iproute2 (ip, tc) not installed")
    source = open_source("netdev:", SourceContext(host="here"))
    reading = source.read()
    assert reading.errors == ()
    assert all(x.labels["host"] == "here" for x in reading.samples)
    assert {x.metric for x in reading.samples} >= {"netdev_bytes_total", "netdev_packets_total"} or not reading.samples


def test_netdev_inside_a_network_namespace(tmp_path: Path) -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip("needs root to create a network namespace")
    ns = f"tftel{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        def run(cmd: list[str]) -> None:
            subprocess.run(["ip", "netns", "exec", ns, *cmd], check=True)

        run(["ip", "link", "add", "va", "type", "veth", "peer", "name", "vb"])
        run(["ip", "link", "set", "va", "up"])
        run(["ip", "link", "set", "vb", "up"])
        run(["tc", "qdisc", "add", "dev", "va", "root", "tbf", "rate", "10mbit", "burst", "32k", "latency", "50ms"])
        run(["ip", "addr", "add", "10.99.0.1/24", "dev", "va"])
        run(["ping", "-c", "3", "-i", "0.2", "-I", "va", "-b", "10.99.0.255"]) if shutil.which("ping") else None

        def in_ns(argv: object) -> str:
            return subprocess.run(["ip", "netns", "exec", ns, *list(argv)],  # type: ignore[call-overload]
                                  capture_output=True, text=True, check=True).stdout

        reading = open_source("netdev:va,vb", SourceContext(host="nshost", run=in_ns)).read()
        devices = {x.labels["device"] for x in reading.samples}
        assert devices == {"va", "vb"}
        qdisc = find(reading.samples, "netdev_qdisc_bytes_total", device="va")
        assert qdisc and qdisc[0].labels["queue"].startswith("tbf:")
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_parse_rate_file() -> None:
    assert parse_rate_file("400 Gb/sec (4X NDR)") == 400e9
    assert parse_rate_file("25 Gb/sec (1X EDR)\n") == 25e9
    assert parse_rate_file("N/A") is None


@given(st.text(max_size=400))
def test_fuzz_ethtool(text: str) -> None:
    try:
        values, errors = parse_ethtool_stats(text)
    except ParseError:
        return
    assert values and all(isinstance(v, float) for v in values.values())


@given(st.one_of(st.text(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20).map(json.dumps)))
def test_fuzz_rdma_json(text: str) -> None:
    try:
        links, _ = parse_rdma_json(text)
    except ParseError:
        return
    assert all(v >= 0 for _, _, values in links for v in values.values())


@given(st.text(max_size=300))
def test_fuzz_replay_and_iproute2_json(text: str) -> None:
    samples, _ = parse_lines(text, source="fuzz")
    assert all(s.metric for s in samples)
    for parse in (link_samples, qdisc_samples):
        try:
            parse(text, time=0.0, host="h", source="fuzz", errors=[])
        except ParseError:
            pass


@given(st.dictionaries(st.sampled_from(["SAI_PORT_STAT_PFC_3_RX_PKTS", "SAI_PORT_STAT_PFC_3_RX_PAUSE_DURATION",
                                        "SAI_PORT_STAT_PFC_3_ON2OFF_RX_PKTS", "SAI_PORT_STAT_IF_IN_OCTETS", "x"]),
                       st.text(max_size=12)))
def test_fuzz_sonic_port_hash(fields: dict[str, str]) -> None:
    errors: list[str] = []
    samples = port_samples(fields, time=0.0, labels={"host": "s", "port": "Ethernet0"}, source="fuzz",
                           speed_bps=100e9, errors=errors)
    assert all(s.value >= 0 for s in samples)


def test_a_source_that_cannot_run_its_command_raises_a_tensorfabric_error() -> None:
    source = open_source("ethtool:definitely-not-an-interface0", SourceContext(host="h"))
    with pytest.raises(TensorFabricError):
        source.read()


@given(st.text(max_size=60), st.sampled_from(["np_cnp_sent", "port_xmit_data", "rate", "out_of_sequence"]))
def test_fuzz_sysfs_file_contents(text: str, name: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ports = Path(tmp) / "class/infiniband/mlx5_9/ports/1"
        sub = {"np_cnp_sent": "hw_counters", "out_of_sequence": "hw_counters", "port_xmit_data": "counters"}
        target = ports / sub[name] / name if name in sub else ports / name
        target.parent.mkdir(parents=True)
        target.write_bytes(text.encode("utf-8", "surrogatepass"))
        reading = open_source(f"sysfs:{tmp}", ctx()).read()
    assert all(s.value >= 0 for s in reading.samples)


@given(st.dictionaries(st.sampled_from(["SAI_QUEUE_STAT_PACKETS", "SAI_QUEUE_ATTR_PAUSE_STATUS", "PFC_WD_STATUS",
                                        "PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED", "other"]), st.text(max_size=12)))
def test_fuzz_sonic_queue_hash(fields: dict[str, str]) -> None:
    from tensorfabric.telemetry.sources.sonic_redis import _QUEUE, queue_samples

    errors: list[str] = []
    samples = queue_samples(fields, _QUEUE, time=0.0, labels={"host": "s", "port": "Ethernet0", "queue": "3"},
                            source="fuzz", errors=errors)
    assert all(s.value >= 0 for s in samples)


def test_sysfs_root_may_be_the_sys_mount_or_the_filesystem_root(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "sysfs", tmp_path / "sys")
    as_root = open_source(f"sysfs:{tmp_path}", ctx()).read()  # "/" style: ROOT/sys/class/infiniband
    as_sys = open_source(f"sysfs:{tmp_path / 'sys'}", ctx()).read()  # "/sys" style
    assert len(as_root.samples) == len(as_sys.samples) > 0 and as_root.errors == as_sys.errors == ()
    with pytest.raises(InputError, match=r"holds no sys/class/ and no class/; accepted: '/'"):
        open_source(f"sysfs:{tmp_path / 'sys' / 'class'}", ctx())


@pytest.mark.parametrize("host", ["mlx5-roce", "bnxt-roce", "ib-host", "no-rdma"])
def test_sysfs_source_reads_both_spellings_of_a_host_alike(host: str, caplog: pytest.LogCaptureFixture) -> None:
    tree = FIXTURES.parent / "sysfs" / host
    caplog.set_level("INFO", logger="tensorfabric.telemetry.sources.sysfs")
    as_root, as_sys = (open_source(f"sysfs:{path}", ctx()).read() for path in (tree, tree / "sys"))
    strip = [(s.metric, s.value, s.labels) for s in as_root.samples]
    assert strip == [(s.metric, s.value, s.labels) for s in as_sys.samples]
    assert [e.replace(f"{tree}/sys read as the sys/ directory of {tree}", "")
            for e in as_sys.errors] == [e.replace(f"{tree} read as the tree holding sys/", "") for e in as_root.errors]
    assert (host == "no-rdma") == bool(as_root.errors)  # no class/infiniband: said, not a crash
    assert f"sysfs:{tree}: {tree} read as the tree holding sys/" in caplog.text
    assert f"{tree}/sys read as the sys/ directory of {tree}" in caplog.text
