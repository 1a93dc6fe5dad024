"""What kind of device a set of counters came from, when it is not a RoCE NIC or switch port.

People paste what their machine has: an Omni-Path HFI's hw_counters, an AWS EFA's, an iWARP adapter's, a VM's
virtio-net ``ethtool -S``, a 1 Gb/s onboard NIC's. Read as RoCE they give wrong answers (an igb's 802.3x XOFF
counters as "global pause instead of PFC", an EFA's drops as "lossless loss"); named for what they are, they
give the right one: this device does not carry RoCE, so RoCE checks do not apply to it.

The evidence is the device name the driver gives (``hfi1_0``, ``rdmap16s27``/``efa_0``, ``i40iw0``/``iwp…``/
``cxgb4_0``), the counters only that driver prints (read under the generic family by their raw names), the link
layer an RDMA port reports, and a link speed at or under 1 Gb/s. Each class lists where its names were seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tensorfabric.samples import Sample
from tensorfabric.telemetry.metrics import GENERIC

__all__ = ["DeviceClass", "classify", "device_key"]


@dataclass(frozen=True, slots=True)
class DeviceClass:
    """A kind of device that is not RoCE, and why a set of counters was taken for one."""

    name: str
    """What to call it, with its article (``an Omni-Path HFI (hfi1)``)."""
    why: str
    """The evidence, e.g. ``device name hfi1_0`` or ``counters RcResend, RcvHdrOvr0``."""
    fix: str


@dataclass(frozen=True, slots=True)
class _Rule:
    name: str
    device: re.Pattern[str] | None
    counters: frozenset[str]
    """Raw counter names only this kind of device prints (any one of them is enough)."""
    fix: str
    counter_pattern: re.Pattern[str] | None = None


_HFI_COUNTERS = re.compile(r"RcvHdrOvr\d{1,3}")
_RULES = (
    # hfi1 hw_counters as a shell loop prints them (netdata#9091, node_exporter#2023): RcResend, RcSeqNak, DmaWait...
    _Rule("an Omni-Path HFI (hfi1)", re.compile(r"hfi1_\d{1,3}"),
          frozenset({"RcResend", "RcSeqNak", "RcAcks", "RcQacks", "RcDelayComp", "RcDupRew", "RcTimeOut", "DmaWait",
                     "PktDrop", "LoopPkts", "OtherNak", "RcvCstrErr", "SDmaDescAvail", "SwLinkUp"}),
          "Omni-Path has credit-based link flow control, not PFC/ECN: check it with opainfo / opareport, and look "
          "for RoCE counters on the Ethernet NICs instead.", _HFI_COUNTERS),
    # EFA hw_counters (linux-rdma/perftest#113, aws docs "Monitor an EFA"): SRD has its own retransmission
    _Rule("an AWS Elastic Fabric Adapter (EFA)", re.compile(r"efa_\d{1,3}|rdmap\d{1,4}s\d{1,4}"),
          frozenset({"rdma_read_bytes", "rdma_read_wrs", "rdma_read_wr_err", "rdma_read_resp_bytes",
                     "rdma_write_bytes", "rdma_write_wrs", "rdma_write_wr_err", "retrans_timeout_events",
                     "impaired_remote_conn_events", "unresponsive_remote_events", "keep_alive_rcvd",
                     "completed_cmds", "submitted_cmds", "send_wrs", "recv_wrs"}),
          "EFA runs AWS's SRD transport, not RoCE: PFC and ECN do not apply; watch rx_drops, retrans_timeout_events "
          "and impaired_remote_conn_events, and NCCL's aws-ofi-nccl plugin for the data path."),
    # iWARP: i40iw / irdma in iWARP mode (iwp...) / Chelsio iw_cxgb4 (node_exporter#966): RDMA over TCP
    _Rule("an iWARP adapter (RDMA over TCP)", re.compile(r"i40iw\d{1,3}|iwp\w{1,40}|cxgb[34]_\d{1,3}"),
          frozenset({"tcpInSegs", "tcpOutSegs", "tcpRetransSegs", "tcpInErrs", "tcpOutRsts", "tcpInOptErrors",
                     "tcpInProtoErrors"}),
          "iWARP carries RDMA over TCP, which recovers loss itself: PFC/ECN verdicts do not apply; for RoCE, switch "
          "the adapter's protocol (irdma: roce_ena=1) or use a RoCE NIC."),
    # virtio-net ethtool -S (isc-projects/ethq#12, netdata#17015): per-queue kicks and XDP counters
    _Rule("a virtio-net NIC (a VM's paravirtual NIC)", None,
          frozenset({"rx_kicks", "tx_kicks", "rx_xdp_redirects", "rx_xdp_tx", "tx_xdp_tx", "tx_xdp_tx_drops"}),
          "A virtio-net NIC carries no RDMA: RoCE needs the physical NIC (SR-IOV VF or passthrough) inside the VM; "
          "these counters describe the paravirtual queue only."),
    # igb / e1000e ethtool -S (isc-projects/ethq#4): 802.3x XON/XOFF, collision and BMC counters of 1G chips
    _Rule("a 1 Gb/s NIC (igb/e1000e class)", None,
          frozenset({"rx_flow_control_xon", "rx_flow_control_xoff", "tx_flow_control_xon", "tx_flow_control_xoff",
                     "tx_deferred_ok", "tx_single_coll_ok", "tx_multi_coll_ok", "tx_abort_late_coll",
                     "os2bmc_rx_by_bmc", "os2bmc_tx_by_host", "rx_smbus", "tx_smbus"}),
          "This is a management or onboard 1 Gb/s NIC, not the RoCE fabric's: its 802.3x pause is not a RoCE "
          "finding. Collect counters from the RoCE NICs (mlx5_*, bnxt_re*, irdma*, rocep*)."),
)
_RDMA_EVIDENCE = frozenset({"cnpHandled", "cnpSent", "RxECNMrkd", "np_cnp_sent", "rp_cnp_handled"})
"""RoCE congestion counters: a device printing them is RoCE whatever else it prints (irdma has tcp* counters too)."""
_ONE_GBIT_BYTES_PER_S = 125e6


def device_key(sample: Sample) -> tuple[str, str]:
    """(host, device) the sample was read on."""
    labels = sample.labels
    return labels.get("host", ""), labels.get("device", "") or sample.source


def classify(samples: Iterable[Sample]) -> dict[tuple[str, str], DeviceClass]:
    """The devices among ``samples`` that are not RoCE, keyed by (host, device), with the evidence."""
    names: dict[tuple[str, str], set[str]] = {}
    layers: dict[tuple[str, str], str] = {}
    slow: set[tuple[str, str]] = set()
    for s in samples:
        key = device_key(s)
        seen = names.setdefault(key, set())
        if s.metric == GENERIC:
            seen.add(s.labels.get("name", ""))
        elif s.metric == "roce_port_info":
            layers[key] = s.labels.get("link_layer", "")
        elif s.metric == "roce_link_speed_bytes_per_second" and 0 < s.value <= _ONE_GBIT_BYTES_PER_S:
            slow.add(key)
    out: dict[tuple[str, str], DeviceClass] = {}
    for key, counters in names.items():
        found = _match(key[1], counters)
        if found is None and layers.get(key, "Ethernet") not in ("Ethernet", ""):
            found = DeviceClass(f"an {layers[key]} port", f"link layer {layers[key]}",
                                "Not an Ethernet port, so not RoCE: PFC and ECN do not apply (InfiniBand uses "
                                "credit-based flow control); check it with ibstat / perfquery.")
        if found is None and key in slow:
            found = DeviceClass("a 1 Gb/s NIC", "link speed at or under 1 Gb/s", _RULES[-1].fix)
        if found is not None:
            out[key] = found
    return out


def _match(device: str, counters: set[str]) -> DeviceClass | None:
    if counters & _RDMA_EVIDENCE:
        return None
    for rule in _RULES:
        if rule.device is not None and rule.device.fullmatch(device[:64]):
            return DeviceClass(rule.name, f"device name {device}", rule.fix)
        hits = sorted(counters & rule.counters)
        if rule.counter_pattern is not None:
            hits += sorted(c for c in counters if rule.counter_pattern.fullmatch(c[:32]))[:2]
        if hits:
            return DeviceClass(rule.name, f"counters {', '.join(hits[:3])}", rule.fix)
    return None
