"""The canonical metric catalogue: every Sample a telemetry source or the simulator emits uses one of these names.

A base module so that the simulator (which never imports telemetry) and telemetry read the one list: names, kinds,
units, help texts and labels are written here once; ``telemetry.metrics`` re-exports it for the telemetry package,
and the simulator's counter stream names its series with the constants below and takes each kind from the entry.

Names follow the Prometheus conventions (one namespace prefix, base units, counters end in ``_total``,
gauges carry their unit). Values are already in base units when they become Samples: pause durations in
seconds (ethtool and SAI report microseconds), data in bytes (IB PMA counts 4-byte words), frames and
packets as counts. Labels come only from ``LABELS`` (plus ``kind`` on the retransmission family, as the
issue names it). Producers that cannot fill a label leave it out; the exporter fills absent labels with "".

``wrap`` is the modulus of the raw counter in base units where the hardware counter is 32 bits wide
(mlx5 Q counters are read with ``be32_to_cpu``); rates use it to tell a wrap from a reset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from tensorfabric.samples import Sample, new_sample

__all__ = ["BYTES", "CNP_HANDLED", "CNP_SENT", "DISCARDS", "ECN_MARKED_PACKETS", "GENERIC", "LABELS", "METRICS",
           "PFC_PAUSED_SECONDS", "PFC_PAUSE_FRAMES", "PFC_PAUSE_TRANSITIONS", "QUEUE_OCCUPANCY_BYTES", "QUEUE_PACKETS",
           "QUEUE_PAUSED", "MetricSpec", "sample", "spec"]

LABELS = ("host", "device", "port", "priority", "direction", "queue", "reason", "kind", "name", "link_layer")

GENERIC = "roce_nic_stat_total"
"""The one family for every counter a source reads but has no canonical name for (node_exporter style: the raw
counter name is the ``name`` label). Cardinality is bounded per source by :class:`CounterFilter`."""

# The series the simulator emits as well as the sources (sim/counters.py names them through these).
PFC_PAUSE_FRAMES = "roce_pfc_pause_frames_total"
PFC_PAUSED_SECONDS = "roce_pfc_paused_seconds_total"
PFC_PAUSE_TRANSITIONS = "roce_pfc_pause_transitions_total"
BYTES = "roce_bytes_total"
ECN_MARKED_PACKETS = "roce_ecn_marked_packets_total"
CNP_SENT = "roce_cnp_sent_total"
CNP_HANDLED = "roce_cnp_handled_total"
DISCARDS = "roce_discards_total"
QUEUE_PACKETS = "roce_queue_packets_total"
QUEUE_OCCUPANCY_BYTES = "roce_queue_occupancy_bytes"
QUEUE_PAUSED = "roce_queue_paused"

_WRAP32 = float(2**32)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One canonical metric: name, kind, unit, meaning and which labels it may carry."""

    name: str
    kind: Literal["counter", "gauge"]
    unit: str
    help: str
    labels: tuple[str, ...] = ("host", "device", "port")
    wrap: float | None = None
    glitch: float = 0.0
    """A decrease up to this much (base units) is a read glitch, not a reset (see rates.py)."""


_HDP = ("host", "device", "port")
_PRIO = (*_HDP, "priority", "direction")

_SPECS = (
    # PFC -- NIC (ethtool rx/tx_prio<p>_pause*) and switch (SAI_PORT_STAT_PFC_<n>_*).
    MetricSpec(PFC_PAUSE_FRAMES, "counter", "frames",
               "PFC pause frames received (direction=rx) or sent (tx) on a priority", _PRIO),
    MetricSpec(PFC_PAUSED_SECONDS, "counter", "seconds",
               "Time paused on a priority: rx = paused by the peer, tx = asked the peer to pause; "
               "rate() is the paused fraction", _PRIO, glitch=0.01),
    MetricSpec(PFC_PAUSE_TRANSITIONS, "counter", "events",
               "XOFF to XON transitions (ethtool *_pause_transition, SAI ON2OFF); flat while paused = "
               "continuous pause", _PRIO),
    MetricSpec("roce_pause_storm_warning_events_total", "counter", "events",
               "NIC kept sending pause past the warning watermark (tx_pause_storm_warning_events)"),
    MetricSpec("roce_pause_storm_error_events_total", "counter", "events",
               "NIC pause-storm prevention disabled pause transmission (tx_pause_storm_error_events)"),
    # Traffic.
    MetricSpec(BYTES, "counter", "bytes",
               "Bytes on the port (per priority where the source has it)", (*_HDP, "priority", "direction")),
    MetricSpec("roce_packets_total", "counter", "packets",
               "Packets on the port (per priority where the source has it)", (*_HDP, "priority", "direction")),
    MetricSpec("roce_link_speed_bytes_per_second", "gauge", "bytes/s",
               "Negotiated link speed in base units (the sysfs rate in Gb/s / 8: node_exporter's convention)"),
    # Congestion control (DCQCN) and ECN.
    MetricSpec(ECN_MARKED_PACKETS, "counter", "packets",
               "CE-marked RoCE packets: seen at the notification point (NIC) or marked by a queue (switch)",
               (*_HDP, "priority", "queue")),
    MetricSpec(CNP_SENT, "counter", "packets", "CNPs sent by the notification point (np_cnp_sent)"),
    MetricSpec(CNP_HANDLED, "counter", "packets",
               "CNPs the reaction point acted on (rp_cnp_handled)"),
    MetricSpec("roce_cnp_ignored_total", "counter", "packets",
               "CNPs received at QPs without congestion control (rp_cnp_ignored)"),
    # Loss.
    MetricSpec(DISCARDS, "counter", "packets",
               "Discarded packets by reason (no_buffer, host_buffer, wred, phy_rx, phy_tx, queue, pg, pfcwd, xmit, "
               "pci_overflow, cos_discard, roce_payload_len, ip4/ip6_discard; port and eth_* mix classes)",
               (*_HDP, "priority", "direction", "queue", "reason")),
    MetricSpec("roce_retransmissions_total", "counter", "events",
               "Transport retransmission signals by kind (out_of_sequence, packet_seq_err, local_ack_timeout_err, "
               "...)", (*_HDP, "kind"), wrap=_WRAP32),
    MetricSpec("roce_retries_exceeded_total", "counter", "events",
               "Retry budget exhausted, QP moved to error (req_transport/rnr_retries_exceeded)",
               (*_HDP, "kind"), wrap=_WRAP32),
    MetricSpec("roce_rq_out_of_buffer_total", "counter", "events",
               "No receive WQE posted for an RDMA QP (out_of_buffer)", _HDP, wrap=_WRAP32),
    MetricSpec("roce_buffer_almost_full_events_total", "counter", "events",
               "Port receive buffer passed 85 % (rx_buffer_passed_thres_phy)"),
    # PHY and link.
    # "bits" is not a base unit to promtool's linter: these count bit events, named so `check metrics` is clean
    MetricSpec("roce_phy_corrected_bit_errors_total", "counter", "bits",
               "Bit errors corrected by FEC (rx_corrected_bits_phy, bnxt rx_corrected_bits)"),
    MetricSpec("roce_phy_received_bit_count_total", "counter", "bits",
               "Bits received, the BER denominator (rx_bits_phy, bnxt rx_bits)"),
    MetricSpec("roce_phy_uncorrected_symbols_total", "counter", "symbols",
               "Symbol errors FEC could not correct: traffic lost (rx_pcs_symbol_err_phy)"),
    MetricSpec("roce_phy_symbol_errors_total", "counter", "packets",
               "Coding (symbol) errors (rx_symbol_err_phy, IB symbol_error)"),
    MetricSpec("roce_phy_crc_errors_total", "counter", "packets", "FCS errors (rx_crc_errors_phy, port_rcv_errors)"),
    MetricSpec("roce_link_down_events_total", "counter", "events",
               "Link went down (link_down_events_phy, link_downed)"),
    MetricSpec("roce_pci_stalled_ratio", "gauge", "ratio",
               "Share of the last second outbound PCIe reads/writes waited for credits", (*_HDP, "direction")),
    MetricSpec("roce_pci_stalled_seconds_total", "counter", "seconds",
               "Seconds the PCIe stall gauge was above 30 % (outbound_pci_stalled_rd/wr_events)", (*_HDP, "direction")),
    MetricSpec("roce_pci_signal_errors_total", "counter", "events",
               "PCIe signal-integrity errors (rx/tx_pci_signal_integrity)", (*_HDP, "direction")),
    MetricSpec("roce_pause_ctrl_frames_total", "counter", "frames",
               "Link-level pause frames of any kind, one total per direction (mlx5 *_pause_ctrl_phy, bnxt/qede "
               "*_pfc_frames, be2net *_priority_pause_frames)", (*_HDP, "direction")),
    MetricSpec("roce_eth_rx_out_of_buffer_total", "counter", "events",
               "Ethernet receive queue had no software buffer (mlx5 rx_out_of_buffer; not the RDMA out_of_buffer)"),
    MetricSpec("roce_xdp_drops_total", "counter", "packets", "Packets an XDP program dropped or could not transmit",
               (*_HDP, "reason")),
    MetricSpec("roce_rdma_bytes_total", "counter", "bytes", "RDMA (RoCE) bytes of this function (vport counters)",
               (*_HDP, "direction", "kind")),
    MetricSpec("roce_rdma_packets_total", "counter", "packets", "RDMA (RoCE) packets of this function",
               (*_HDP, "direction", "kind")),
    MetricSpec("roce_completion_errors_total", "counter", "events",
               "Work completions with an error, by kind (req/resp_cqe_error, *_cqe_flush_error, remote access / "
               "invalid request, local length)", (*_HDP, "kind"), wrap=_WRAP32),
    MetricSpec("roce_rx_requests_total", "counter", "requests",
               "RDMA requests received by kind (read, write, atomic, dct_connect)", (*_HDP, "kind"), wrap=_WRAP32),
    MetricSpec("roce_icrc_errors_total", "counter", "packets",
               "RoCE packets with a bad ICRC (rx_icrc_encapsulated, be2net roce_drops_crc)"),
    MetricSpec("roce_hw_counters_lifespan_seconds", "gauge", "seconds",
               "How long the driver caches hw_counters values (hw_counters/lifespan)"),
    MetricSpec("roce_port_info", "gauge", "info", "1 per RDMA port, with its link layer (Ethernet = RoCE)",
               (*_HDP, "link_layer")),
    MetricSpec(GENERIC, "counter", "raw",
               "Every other counter a source read, by its raw name (value as the driver reports it)",
               (*_HDP, "queue", "name")),
    # Switch queues, priority groups, watchdog (SONiC COUNTERS_DB).
    MetricSpec(QUEUE_PACKETS, "counter", "packets", "Packets dequeued (transmitted) by a queue",
               (*_HDP, "queue")),
    MetricSpec("roce_queue_bytes_total", "counter", "bytes", "Bytes dequeued (transmitted) by a queue",
               (*_HDP, "queue")),
    MetricSpec(QUEUE_OCCUPANCY_BYTES, "gauge", "bytes", "Current queue occupancy", (*_HDP, "queue")),
    MetricSpec("roce_queue_watermark_bytes", "gauge", "bytes", "Queue shared-buffer high-water mark",
               (*_HDP, "queue")),
    MetricSpec(QUEUE_PAUSED, "gauge", "bool", "1 while the queue is paused by PFC", (*_HDP, "queue")),
    MetricSpec("roce_pg_shared_watermark_bytes", "gauge", "bytes", "Ingress priority-group shared-buffer watermark",
               (*_HDP, "priority")),
    MetricSpec("roce_pg_headroom_watermark_bytes", "gauge", "bytes",
               "Ingress priority-group headroom (XOFF room) watermark: pause happening", (*_HDP, "priority")),
    MetricSpec("roce_pfcwd_storms_detected_total", "counter", "events", "PFC watchdog storm detections",
               (*_HDP, "queue")),
    MetricSpec("roce_pfcwd_storms_restored_total", "counter", "events", "PFC watchdog restorations",
               (*_HDP, "queue")),
    MetricSpec("roce_pfcwd_stormed", "gauge", "bool", "1 while the watchdog holds the queue in storm state",
               (*_HDP, "queue")),
    # Operational state read from switch CLI pastes: reported beside the counters, never as one of them.
    MetricSpec("roce_pfc_operational", "gauge", "bool",
               "1 when PFC is operationally on for the port (or the priority), 0 when it is off (e.g. a DCBX "
               "mismatch)", (*_HDP, "priority")),
    # Linux interface and qdisc statistics (lab hosts, any netdev).
    MetricSpec("netdev_bytes_total", "counter", "bytes", "Interface bytes", (*_HDP, "direction")),
    MetricSpec("netdev_packets_total", "counter", "packets", "Interface packets", (*_HDP, "direction")),
    MetricSpec("netdev_errors_total", "counter", "packets", "Interface errors", (*_HDP, "direction")),
    MetricSpec("netdev_dropped_total", "counter", "packets", "Interface drops", (*_HDP, "direction")),
    MetricSpec("netdev_qdisc_bytes_total", "counter", "bytes", "Bytes sent by a qdisc", (*_HDP, "queue")),
    MetricSpec("netdev_qdisc_drops_total", "counter", "packets", "Packets dropped by a qdisc", (*_HDP, "queue")),
    MetricSpec("netdev_qdisc_overlimits_total", "counter", "events", "Qdisc overlimit events", (*_HDP, "queue")),
    MetricSpec("netdev_qdisc_backlog_bytes", "gauge", "bytes", "Bytes queued in a qdisc", (*_HDP, "queue")),
)

METRICS: dict[str, MetricSpec] = {s.name: s for s in _SPECS}


def spec(name: str) -> MetricSpec | None:
    """The catalogue entry for ``name`` (None for names outside the catalogue, e.g. from a replay file)."""
    return METRICS.get(name)


def sample(time: float, name: str, value: float, labels: Mapping[str, str], source: str) -> Sample:
    """A Sample of a catalogued metric, its kind taken from the catalogue (KeyError for a name outside it)."""
    return new_sample(time, name, METRICS[name].kind, value, labels, source)
