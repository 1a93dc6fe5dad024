"""Every counter of every fixture is exported: canonical names (value in base units, catalogue unit) where the
meaning is known, the generic family with the raw name and value otherwise. Fixtures are written to the exact
`ethtool -S` formats of six drivers and the four rdma text forms."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tensorfabric.samples import Sample
from tensorfabric.telemetry.engine import Monitor
from tensorfabric.telemetry.metrics import GENERIC, METRICS
from tensorfabric.telemetry.sources import SourceContext, open_source
from tensorfabric.telemetry.sources.base import CounterFilter

from .telemetry_support import FIXTURES, ctx, find

DRIVERS = FIXTURES / "drivers"
RDMA = FIXTURES / "rdma"

# (raw key) -> (metric, labels the sample must carry, value in base units, unit)
Expect = dict[str, tuple[str, dict[str, str], float, str]]

MLX5: Expect = {
    "rx_xdp_drop": ("roce_xdp_drops_total", {"reason": "drop"}, 12, "packets"),
    "rx_xdp_tx_err": ("roce_xdp_drops_total", {"reason": "tx_err"}, 0, "packets"),
    "rx_out_of_buffer": ("roce_eth_rx_out_of_buffer_total", {}, 7713, "events"),
    "rx_vport_rdma_unicast_packets": ("roce_rdma_packets_total", {"direction": "rx", "kind": "unicast"}, 5120331,
                                      "packets"),
    "rx_vport_rdma_unicast_bytes": ("roce_rdma_bytes_total", {"direction": "rx", "kind": "unicast"}, 20972871680,
                                    "bytes"),
    "tx_vport_rdma_unicast_packets": ("roce_rdma_packets_total", {"direction": "tx"}, 4981220, "packets"),
    "tx_vport_rdma_unicast_bytes": ("roce_rdma_bytes_total", {"direction": "tx"}, 20403077120, "bytes"),
    "rx_packets_phy": ("roce_packets_total", {"direction": "rx", "priority": ""}, 53331264, "packets"),
    "rx_bytes_phy": ("roce_bytes_total", {"direction": "rx", "priority": ""}, 82206789900, "bytes"),
    "tx_packets_phy": ("roce_packets_total", {"direction": "tx", "priority": ""}, 43992672, "packets"),
    "tx_bytes_phy": ("roce_bytes_total", {"direction": "tx", "priority": ""}, 70505365461, "bytes"),
    "rx_pause_ctrl_phy": ("roce_pause_ctrl_frames_total", {"direction": "rx"}, 880412, "frames"),
    "tx_pause_ctrl_phy": ("roce_pause_ctrl_frames_total", {"direction": "tx"}, 2, "frames"),
    "rx_global_pause": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "global"}, 880412, "frames"),
    "rx_global_pause_duration": ("roce_pfc_paused_seconds_total", {"direction": "rx", "priority": "global"},
                                 42.118813, "seconds"),
    "tx_global_pause": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "global"}, 2, "frames"),
    "tx_global_pause_duration": ("roce_pfc_paused_seconds_total", {"direction": "tx", "priority": "global"},
                                 91e-6, "seconds"),
    "rx_global_pause_transition": ("roce_pfc_pause_transitions_total", {"direction": "rx", "priority": "global"},
                                   880001, "events"),
    "rx_discards_phy": ("roce_discards_total", {"reason": "phy_rx"}, 0, "packets"),
    "tx_discards_phy": ("roce_discards_total", {"reason": "phy_tx"}, 0, "packets"),
    "rx_prio0_bytes": ("roce_bytes_total", {"direction": "rx", "priority": "0"}, 82206789900, "bytes"),
    "rx_prio0_packets": ("roce_packets_total", {"direction": "rx", "priority": "0"}, 53331264, "packets"),
    "tx_prio0_bytes": ("roce_bytes_total", {"direction": "tx", "priority": "0"}, 70505365461, "bytes"),
    "tx_prio0_packets": ("roce_packets_total", {"direction": "tx", "priority": "0"}, 43992672, "packets"),
    "outbound_pci_stalled_rd_events": ("roce_pci_stalled_seconds_total", {"direction": "rd"}, 4, "seconds"),
    "outbound_pci_stalled_wr_events": ("roce_pci_stalled_seconds_total", {"direction": "wr"}, 0, "seconds"),
}
MLX5_GREP: Expect = {
    "rx_prio3_pause": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "3"}, 1180, "frames"),
    "rx_prio3_pause_duration": ("roce_pfc_paused_seconds_total", {"direction": "rx", "priority": "3"}, 0.098512,
                                "seconds"),
    "tx_prio3_pause": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "3"}, 93, "frames"),
    "tx_prio3_pause_duration": ("roce_pfc_paused_seconds_total", {"direction": "tx", "priority": "3"}, 0.00441,
                                "seconds"),
    "rx_prio3_pause_transition": ("roce_pfc_pause_transitions_total", {"direction": "rx", "priority": "3"}, 1178,
                                  "events"),
}
BNXT: Expect = {
    "rx_fcs_err_frames": ("roce_phy_crc_errors_total", {}, 3, "packets"),
    "rx_pause_frames": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "global"}, 0, "frames"),
    "tx_pause_frames": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "global"}, 0, "frames"),
    "rx_pfc_frames": ("roce_pause_ctrl_frames_total", {"direction": "rx"}, 5511, "frames"),
    "tx_pfc_frames": ("roce_pause_ctrl_frames_total", {"direction": "tx"}, 207, "frames"),
    "rx_pfc_ena_frames_pri3": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "3"}, 5511, "frames"),
    "tx_pfc_ena_frames_pri3": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "3"}, 207, "frames"),
    "link_down_events": ("roce_link_down_events_total", {}, 1, "events"),
    "rx_bytes_pri3": ("roce_bytes_total", {"direction": "rx", "priority": "3"}, 47112008862, "bytes"),
    "rx_packets_pri3": ("roce_packets_total", {"direction": "rx", "priority": "3"}, 36811788, "packets"),
    "tx_bytes_pri3": ("roce_bytes_total", {"direction": "tx", "priority": "3"}, 44030288120, "bytes"),
    "tx_packets_pri3": ("roce_packets_total", {"direction": "tx", "priority": "3"}, 34403584, "packets"),
    "pfc_pri3_rx_duration_us": ("roce_pfc_paused_seconds_total", {"direction": "rx", "priority": "3"}, 1.830441,
                                "seconds"),
    "pfc_pri3_rx_transitions": ("roce_pfc_pause_transitions_total", {"direction": "rx", "priority": "3"}, 5499,
                                "events"),
    "pfc_pri3_tx_duration_us": ("roce_pfc_paused_seconds_total", {"direction": "tx", "priority": "3"}, 0.061204,
                                "seconds"),
    "pfc_pri3_tx_transitions": ("roce_pfc_pause_transitions_total", {"direction": "tx", "priority": "3"}, 205,
                                "events"),
    "rx_bits": ("roce_phy_received_bit_count_total", {}, 377003840028160, "bits"),
    "rx_buffer_passed_threshold": ("roce_buffer_almost_full_events_total", {}, 41, "events"),
    "rx_pcs_symbol_err": ("roce_phy_uncorrected_symbols_total", {}, 0, "symbols"),
    "rx_corrected_bits": ("roce_phy_corrected_bit_errors_total", {}, 812, "bits"),
    "rx_discard_packets_cos3": ("roce_discards_total", {"reason": "cos_discard", "queue": "cos3"}, 2, "packets"),
}
ICE: Expect = {
    "rx_bytes.nic": ("roce_bytes_total", {"direction": "rx"}, 13120018224, "bytes"),
    "tx_bytes.nic": ("roce_bytes_total", {"direction": "tx"}, 12981029335, "bytes"),
    "rx_crc_errors.nic": ("roce_phy_crc_errors_total", {}, 0, "packets"),
    "rx_dropped.nic": ("roce_discards_total", {"direction": "rx", "reason": "port"}, 14, "packets"),
    "link_xon_rx.nic": ("roce_pfc_pause_transitions_total", {"direction": "rx", "priority": "global"}, 0, "events"),
    "link_xoff_rx.nic": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "global"}, 0, "frames"),
    "link_xon_tx.nic": ("roce_pfc_pause_transitions_total", {"direction": "tx", "priority": "global"}, 0, "events"),
    "link_xoff_tx.nic": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "global"}, 0, "frames"),
    "tx_priority_3_xon.nic": ("roce_pfc_pause_transitions_total", {"direction": "tx", "priority": "3"}, 118,
                              "events"),
    "tx_priority_3_xoff.nic": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "3"}, 120, "frames"),
    "rx_priority_3_xon.nic": ("roce_pfc_pause_transitions_total", {"direction": "rx", "priority": "3"}, 3305,
                              "events"),
    "rx_priority_3_xoff.nic": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "3"}, 3310, "frames"),
    "rx_priority_0_xoff.nic": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "0"}, 0, "frames"),
}
BE2NET: Expect = {
    "rx_crc_errors": ("roce_phy_crc_errors_total", {}, 2, "packets"),
    "rx_pause_frames": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "global"}, 0, "frames"),
    "tx_pauseframes": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "global"}, 0, "frames"),
    "rx_priority_pause_frames": ("roce_pause_ctrl_frames_total", {"direction": "rx"}, 4402, "frames"),
    "tx_priority_pauseframes": ("roce_pause_ctrl_frames_total", {"direction": "tx"}, 17, "frames"),
    "rx_drops_no_pbuf": ("roce_discards_total", {"reason": "eth_no_buffer"}, 5, "packets"),
    "eth_red_drops": ("roce_discards_total", {"reason": "eth_wred"}, 0, "packets"),
    "rx_roce_frames": ("roce_rdma_packets_total", {"direction": "rx"}, 6120447, "packets"),
    "roce_drops_payload_len": ("roce_discards_total", {"reason": "roce_payload_len"}, 0, "packets"),
    "roce_drops_crc": ("roce_icrc_errors_total", {}, 1, "packets"),
}
QEDE: Expect = {
    "rx_pause_frames": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "global"}, 0, "frames"),
    "tx_pause_frames": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "global"}, 0, "frames"),
    "rx_pfc_frames": ("roce_pause_ctrl_frames_total", {"direction": "rx"}, 930, "frames"),
    "tx_pfc_frames": ("roce_pause_ctrl_frames_total", {"direction": "tx"}, 12, "frames"),
    "rx_crc_errors": ("roce_phy_crc_errors_total", {}, 0, "packets"),
    "brb_discards": ("roce_discards_total", {"reason": "port"}, 6, "packets"),
    "no_buff_discards": ("roce_discards_total", {"reason": "eth_no_buffer"}, 0, "packets"),
}

I40E: Expect = {
    "port.rx_bytes": ("roce_bytes_total", {"direction": "rx"}, 8901223358, "bytes"),
    "port.tx_bytes": ("roce_bytes_total", {"direction": "tx"}, 8790447162, "bytes"),
    "port.rx_dropped": ("roce_discards_total", {"reason": "port"}, 0, "packets"),
    "port.rx_crc_errors": ("roce_phy_crc_errors_total", {}, 0, "packets"),
    "port.link_xon_rx": ("roce_pfc_pause_transitions_total", {"direction": "rx", "priority": "global"}, 0, "events"),
    "port.link_xoff_rx": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "global"}, 0, "frames"),
    "port.link_xon_tx": ("roce_pfc_pause_transitions_total", {"direction": "tx", "priority": "global"}, 0, "events"),
    "port.link_xoff_tx": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "global"}, 0, "frames"),
    "port.tx_priority_3_xon_tx": ("roce_pfc_pause_transitions_total", {"direction": "tx", "priority": "3"}, 41,
                                  "events"),
    "port.tx_priority_3_xoff_tx": ("roce_pfc_pause_frames_total", {"direction": "tx", "priority": "3"}, 44, "frames"),
    "port.rx_priority_3_xon_rx": ("roce_pfc_pause_transitions_total", {"direction": "rx", "priority": "3"}, 902,
                                  "events"),
    "port.rx_priority_3_xoff_rx": ("roce_pfc_pause_frames_total", {"direction": "rx", "priority": "3"}, 911,
                                   "frames"),
}

ETHTOOL_CASES = [
    ("ethtool_mlx5_ticket.txt", "ens1f0np0", MLX5),
    ("ethtool_mlx5_grep.txt", "ethtool_mlx5_grep", MLX5_GREP),
    ("ethtool_bnxt_en.txt", "ethtool_bnxt_en", BNXT),
    ("ethtool_ice.txt", "ethtool_ice", ICE),
    ("ethtool_be2net.txt", "enp4s0f0", BE2NET),
    ("ethtool_qede.txt", "ethtool_qede", QEDE),
    ("ethtool_i40e.txt", "ethtool_i40e", I40E),
]


# per-queue keys spelt with the queue inside the name: (queue, name without it), the documented convention
_IN_NAME = (re.compile(r"(rx|tx)-(\d+)\.(?:rx_|tx_)?(\w+)"), re.compile(r"(rx|tx)_queue_(\d+)_(\w+)"),
            re.compile(r"(rx|tx|ch)(\d+)_(\w+)"), re.compile(r"(rx|tx)q(\d+)_(\w+)"))


def _ethtool_keys(path: Path) -> list[tuple[str, str, float]]:
    """(queue, name, value) of every statistic line, read independently of the parser under test."""
    out = []
    for line in path.read_text().splitlines():
        if not line.startswith("     "):
            continue  # prompt, header
        head, _, value = line.strip().rpartition(": ")
        queue, _, name = head.rpartition(": ")
        for pattern in () if queue else _IN_NAME:
            if (m := pattern.fullmatch(name)) is not None:
                queue, name = m.group(2), f"{m.group(1)}_{m.group(3)}"
                break
        out.append((queue.strip("[]").replace("1 [XDP", "xdp1"), name, float(value)))
    return out


def _one(samples: list[Sample], metric: str, **labels: str) -> Sample:
    found = [s for s in samples if s.metric == metric and all(s.labels.get(k, "") == v for k, v in labels.items())]
    assert len(found) == 1, f"{metric} {labels}: {len(found)} samples"
    return found[0]


@pytest.mark.parametrize(("name", "device", "expect"), ETHTOOL_CASES, ids=[c[0] for c in ETHTOOL_CASES])
def test_every_ethtool_counter_is_exported(name: str, device: str, expect: Expect) -> None:
    reading = open_source(f"ethtool-file:{DRIVERS / name}", ctx()).read()
    assert reading.errors == ()
    samples = list(reading.samples)
    keys = _ethtool_keys(DRIVERS / name)
    assert len(samples) == len(keys)  # one sample per counter: nothing dropped, nothing doubled
    assert {s.labels["device"] for s in samples} == {device}
    matched = set()
    for queue, key, raw in keys:
        if key in expect and not queue:
            matched.add(key)
            metric, labels, value, unit = expect[key]
            sample = _one(samples, metric, **labels, **({} if metric != GENERIC else {"name": key}))
            assert sample.value == pytest.approx(value), key
            assert METRICS[metric].unit == unit, key
        else:
            sample = _one(samples, GENERIC, name=key, queue=queue)  # queue "": the aggregate, not a ring
            assert sample.value == raw and sample.kind == "counter" and METRICS[GENERIC].unit == "raw"
    assert matched == set(expect)  # every expectation names a counter of the file


def test_per_queue_counters_carry_the_queue() -> None:
    samples = open_source(f"ethtool-file:{DRIVERS / 'ethtool_bnxt_en.txt'}", ctx()).read().samples
    rows = find(list(samples), GENERIC, name="rx_ucast_packets")
    assert {(s.labels["queue"], s.value) for s in rows} == {("0", 18420016), ("1", 18399871)}
    qede = open_source(f"ethtool-file:{DRIVERS / 'ethtool_qede.txt'}", ctx()).read().samples
    assert _one(list(qede), GENERIC, name="xmit_pkts", queue="xdp1").value == 41


def test_counter_filter_bounds_the_generic_family() -> None:
    narrow = SourceContext(host="h0", clock=lambda: 1.0, counters=CounterFilter.parse(None, r"^\[|^tx_", 3))
    reading = open_source(f"ethtool-file:{DRIVERS / 'ethtool_bnxt_en.txt'}", narrow).read()
    generic = find(list(reading.samples), GENERIC)
    assert len(generic) == 3 and not [s for s in generic if s.labels["name"].startswith("tx_")]
    assert any("more than 3 counters" in e for e in reading.errors)
    # canonical counters are never filtered: the detectors need them
    assert find(list(reading.samples), "roce_pfc_paused_seconds_total", direction="rx")


RDMA_CASES = [
    ("rdma_statistic_oneline.txt", {("mlx5_0", "1"): 29, ("mlx5_1", "1"): 12}),
    ("rdma_statistic_pretty.txt", {("mlx5_2", "1"): 12, ("mlx5_3", "1"): 2}),
    ("show_counters.txt", {("mlx5_0", "1"): 15}),
    ("hw_counters_grep.txt", {("mlx5_4", "1"): 19}),
    ("irdma_hw_counters_grep.txt", {("irdma0", "1"): 10}),
]


@pytest.mark.parametrize(("name", "links"), RDMA_CASES, ids=[c[0] for c in RDMA_CASES])
def test_every_rdma_text_form_is_read(name: str, links: dict[tuple[str, str], int]) -> None:
    spec = f"rdma-file:{RDMA / name}" + ("@mlx5_4/1" if name == "hw_counters_grep.txt" else "")
    reading = open_source(spec, ctx()).read()
    assert reading.errors == ()
    counted: dict[tuple[str, str], int] = {}
    for s in reading.samples:
        key = (s.labels["device"], s.labels["port"])
        counted[key] = counted.get(key, 0) + 1
    assert counted == links


def test_rdma_text_values_and_units() -> None:
    s = list(open_source(f"rdma-file:{RDMA / 'rdma_statistic_oneline.txt'}", ctx()).read().samples)
    assert _one(s, "roce_rq_out_of_buffer_total", device="mlx5_0").value == 135
    assert _one(s, "roce_completion_errors_total", device="mlx5_0", kind="resp_cqe_error").value == 1009
    assert _one(s, "roce_completion_errors_total", device="mlx5_0", kind="req_cqe_flush_error").value == 11
    assert _one(s, "roce_rx_requests_total", device="mlx5_0", kind="write").value == 401
    assert _one(s, "roce_retransmissions_total", device="mlx5_0", kind="roce_slow_restart_cnps").value == 0
    assert _one(s, "roce_icrc_errors_total", device="mlx5_0").value == 0
    assert _one(s, "roce_cnp_handled_total", device="mlx5_1").value == 18231
    assert not find(s, GENERIC)  # every mlx5 hw_counter has a canonical name now
    pretty = list(open_source(f"rdma-file:{RDMA / 'rdma_statistic_pretty.txt'}", ctx()).read().samples)
    assert _one(pretty, "roce_ecn_marked_packets_total", device="mlx5_2").value == 1802
    shown = list(open_source(f"rdma-file:{RDMA / 'show_counters.txt'}", ctx()).read().samples)
    assert _one(shown, "roce_bytes_total", direction="rx").value == 1870233601 * 4  # 4-byte words
    assert _one(shown, "roce_hw_counters_lifespan_seconds").value == pytest.approx(0.010)
    assert _one(shown, GENERIC, name="port_xmit_wait").value == 0
    irdma = list(open_source(f"rdma-file:{RDMA / 'irdma_hw_counters_grep.txt'}", ctx()).read().samples)
    assert _one(irdma, "roce_cnp_handled_total").value == 4410 and _one(irdma, "roce_cnp_sent_total").value == 4502
    assert _one(irdma, "roce_ecn_marked_packets_total").value == 9120
    assert _one(irdma, GENERIC, name="InRdmaWrites").value == 318844


def test_grep_without_device_in_path_uses_the_file_stem() -> None:
    s = open_source(f"rdma-file:{RDMA / 'hw_counters_grep.txt'}", ctx()).read().samples
    assert {x.labels["device"] for x in s} == {"hw_counters_grep"} and {x.labels["port"] for x in s} == {""}


def test_a_source_that_recognises_nothing_says_so() -> None:
    monitor = Monitor([open_source(f"ethtool-file:{DRIVERS / 'ethtool_qede.txt'}", ctx()),
                       open_source(f"ethtool-file:{FIXTURES / 'unknown_driver.txt'}", ctx())])
    monitor.poll()
    recognised = {name: st.recognised for name, st in monitor.status.items()}
    assert recognised[f"ethtool-file:{FIXTURES / 'unknown_driver.txt'}"] == 0
    assert recognised[f"ethtool-file:{DRIVERS / 'ethtool_qede.txt'}"] == 7


from hypothesis import given  # noqa: E402 -- the fuzz tests below only
from hypothesis import strategies as st  # noqa: E402

from tensorfabric.errors import ParseError  # noqa: E402
from tensorfabric.telemetry.sources.ethtool import parse_ethtool_stats  # noqa: E402
from tensorfabric.telemetry.sources.rdma_text import parse_rdma_text  # noqa: E402

_TOKENS = st.sampled_from(["link", "mlx5_0/1", "out_of_buffer", "12", "-3", ":", "/", "hw_counters/x:4", "port 1",
                           "[0]: rx_bytes: 5", "rxq0:", " ", "\n", "$ rdma statistic show", "N/A", "1 [XDP]: a: 2"])


@given(st.lists(_TOKENS, max_size=60).map("".join) | st.text(max_size=300))
def test_fuzz_rdma_text_and_queue_keys(text: str) -> None:
    for parse in (lambda t: parse_rdma_text(t, source="fuzz", default=("d", "1")),
                  lambda t: parse_ethtool_stats(t, source="fuzz")):
        try:
            parse(text)
        except ParseError:
            pass


@pytest.mark.parametrize("line", ["link mlx5_0/1 " + "x 1 " * 1_250_000, "a" * 10_000_000,
                                  "hw_counters/" + "/" * 10_000_000 + ":1", "[0]: " + ":" * 10_000_000])
def test_a_10_mb_line_gives_only_parse_errors(line: str) -> None:
    # linear by construction (str methods, one bounded anchored regex); a quadratic parse would hang this test
    for parse in (lambda t: parse_rdma_text(t, source="big", default=("d", "1")),
                  lambda t: parse_ethtool_stats(t, source="big")):
        try:
            parse(line)
        except ParseError:
            pass
