"""``ethtool:IF`` / ``ethtool-file:PATH`` -- ``ethtool -S`` statistics of any driver.

Counters with a canonical meaning become canonical Samples (the detectors read those): mlx5_core, bnxt_en,
ice, i40e, be2net and qede names are mapped here, each from the names the driver's ethtool strings table
prints. Per-priority keys get ``priority`` and ``direction`` labels instead of names with the priority inside
them; pause durations are microseconds on the wire and seconds here; PCIe stall percentages become a 0-1
ratio. Every other key is exported in the generic family (see generic.py), per-queue keys (``[0]: rx_bytes``,
``rxq0: rx_bytes``, ``0: rcv_pkts``) with a ``queue`` label.

Per-queue keys of every driver's spelling carry the queue as a label and the counter's name without it:
``[0]: rx_bytes`` (bnxt), ``tx-0.tx_packets`` (i40e, sfc), ``rx_queue_1_packets`` (virtio_net, ice, ixgbe,
hv_netvsc), ``queue_0_tx_cnt`` (ena), ``rx0_packets`` / ``ch3_events`` (mlx5), ``txq0_pktnum_rcd`` (hns3) all
become ``name=<dir>_<what>, queue=<N>`` -- so one driver's thousands of per-ring keys are a handful of names.

Accepted text: what ``ethtool -S IF`` prints (``NIC statistics:`` header), a pasted terminal with its
``$ ethtool -S eth0`` prompt line (the interface then names the device), and ``grep`` output without a header.
``file:`` reads the same lines through :mod:`.ethtool_text`.
"""

from __future__ import annotations

import re
from math import isfinite
from pathlib import Path

from tensorfabric.errors import InputError, ParseError
from tensorfabric.samples import Sample, SampleKind, new_sample
from tensorfabric.telemetry.metrics import GENERIC, METRICS
from tensorfabric.telemetry.sources.base import Reading, SourceContext, capture_or_run
from tensorfabric.telemetry.sources.generic import GenericBudget

__all__ = ["EthtoolSource", "cached_mapping", "ethtool_samples", "mapping", "parse_ethtool_stats", "per_queue_key",
           "statistic_key"]

Entry = tuple[str, dict[str, str], float]

_KEY = re.compile(r"[A-Za-z0-9_.\-\[\]]+")
_QUEUE_PREFIX = re.compile(r"\[(\d{1,4})\]|([rt]xq\d{1,4})|(\d{1,4})( \[XDP\])?")
_PROMPT = re.compile(r"ethtool\s+(?:-S|--statistics)\s+(\S+)")

# mlx5 rx/tx_prio<p>_<what>
_PRIO = re.compile(r"^(rx|tx)_prio(\d)_(pause|pause_duration|pause_transition|bytes|packets|discards|buf_discard|"
                   r"cong_discard|marked)$")
_GLOBAL = re.compile(r"^(rx|tx)_global_(pause|pause_duration|pause_transition)$")
# bnxt_en: rx/tx_pfc_ena_frames_pri<p>, pfc_pri<p>_rx/tx_duration_us / _transitions, rx/tx_bytes/packets_pri<p>
_BNXT_PFC = re.compile(r"^(rx|tx)_pfc_ena_frames_pri(\d)$")
_BNXT_DURATION = re.compile(r"^pfc_pri(\d)_(rx|tx)_(duration_us|transitions)$")
_BNXT_TRAFFIC = re.compile(r"^(rx|tx)_(bytes|packets)_pri(\d)$")
_BNXT_COS_DISCARD = re.compile(r"^rx_discard_packets_cos(\d)$")
# ice: rx/tx_priority_<p>_xon/xoff.nic, link_xon/xoff_rx/tx.nic; i40e: port.rx/tx_priority_<p>_xon/xoff, in
# newer kernels with the direction repeated (port.rx_priority_<p>_xoff_rx), and port.link_xon/xoff_rx/tx
_ICE_PRIO = re.compile(r"^(?:port\.)?(rx|tx)_priority_(\d)_(xon|xoff)(?:_rx|_tx)?(?:\.nic)?$")
_ICE_LINK = re.compile(r"^(?:port\.)?link_(xon|xoff)_(rx|tx)(?:\.nic)?$")
# per-queue keys without a "[N]: " prefix; each gives (direction or family, queue, what)
_PER_QUEUE = (
    re.compile(r"^(rx|tx)-(\d{1,4})\.(?:(?:rx|tx)_)?(\w[\w.]{0,63})$"),  # i40e/sfc tx-0.tx_packets, tx-0.packets
    re.compile(r"^(rx|tx)_queue_(\d{1,4})_(\w{1,64})$"),                   # virtio_net, ice, ixgbe, hv_netvsc
    re.compile(r"^(rx|tx|ch)(\d{1,4})_(\w{1,64})$"),                       # mlx5 rx0_packets, ch3_events
    re.compile(r"^(rx|tx)q(\d{1,4})_(\w{1,64})$"),                         # hns3 txq0_pktnum_rcd
)
_ENA_QUEUE = re.compile(r"^queue_(\d{1,4})_(rx|tx)_(\w{1,64})$")          # ena queue_0_tx_cnt

_PER_PRIO: dict[str, Entry] = {
    "pause": ("roce_pfc_pause_frames_total", {}, 1.0),
    "pause_duration": ("roce_pfc_paused_seconds_total", {}, 1e-6),
    "pause_transition": ("roce_pfc_pause_transitions_total", {}, 1.0),
    "bytes": ("roce_bytes_total", {}, 1.0),
    "packets": ("roce_packets_total", {}, 1.0),
    "discards": ("roce_discards_total", {"reason": "no_buffer"}, 1.0),
    "buf_discard": ("roce_discards_total", {"reason": "host_buffer"}, 1.0),
    "cong_discard": ("roce_discards_total", {"reason": "wred"}, 1.0),
    "marked": ("roce_ecn_marked_packets_total", {}, 1.0),
}


def _dir(direction: str, metric: str, scale: float = 1.0, **extra: str) -> Entry:
    return metric, {"direction": direction, **extra}, scale


_GLOBAL_PAUSE = {"priority": "global"}  # 802.3x link pause, not PFC

_PLAIN: dict[str, Entry] = {
    # mlx5_core (en_stats.c names)
    "tx_pause_storm_warning_events": ("roce_pause_storm_warning_events_total", {}, 1.0),
    "tx_pause_storm_error_events": ("roce_pause_storm_error_events_total", {}, 1.0),
    "rx_discards_phy": _dir("rx", "roce_discards_total", reason="phy_rx"),
    "tx_discards_phy": _dir("tx", "roce_discards_total", reason="phy_tx"),
    "rx_buffer_passed_thres_phy": ("roce_buffer_almost_full_events_total", {}, 1.0),
    "rx_crc_errors_phy": ("roce_phy_crc_errors_total", {}, 1.0),
    "rx_symbol_err_phy": ("roce_phy_symbol_errors_total", {}, 1.0),
    "rx_pcs_symbol_err_phy": ("roce_phy_uncorrected_symbols_total", {}, 1.0),
    "rx_corrected_bits_phy": ("roce_phy_corrected_bit_errors_total", {}, 1.0),
    "rx_bits_phy": ("roce_phy_received_bit_count_total", {}, 1.0),
    "link_down_events_phy": ("roce_link_down_events_total", {}, 1.0),
    "rx_bytes_phy": _dir("rx", "roce_bytes_total"),
    "tx_bytes_phy": _dir("tx", "roce_bytes_total"),
    "rx_packets_phy": _dir("rx", "roce_packets_total"),
    "tx_packets_phy": _dir("tx", "roce_packets_total"),
    "rx_pause_ctrl_phy": _dir("rx", "roce_pause_ctrl_frames_total"),
    "tx_pause_ctrl_phy": _dir("tx", "roce_pause_ctrl_frames_total"),
    "rx_out_of_buffer": ("roce_eth_rx_out_of_buffer_total", {}, 1.0),
    "rx_xdp_drop": ("roce_xdp_drops_total", {"reason": "drop"}, 1.0),
    "rx_xdp_tx_err": ("roce_xdp_drops_total", {"reason": "tx_err"}, 1.0),
    "rx_xdp_tx_full": ("roce_xdp_drops_total", {"reason": "tx_full"}, 1.0),
    "tx_xdp_err": ("roce_xdp_drops_total", {"reason": "xmit_err"}, 1.0),
    # the stall gauges are percent of the last second; the _events counters are seconds above 30 %
    "outbound_pci_stalled_rd": _dir("rd", "roce_pci_stalled_ratio", 0.01),
    "outbound_pci_stalled_wr": _dir("wr", "roce_pci_stalled_ratio", 0.01),
    "outbound_pci_stalled_rd_events": _dir("rd", "roce_pci_stalled_seconds_total"),
    "outbound_pci_stalled_wr_events": _dir("wr", "roce_pci_stalled_seconds_total"),
    "outbound_pci_buffer_overflow": _dir("rx", "roce_discards_total", reason="pci_overflow"),
    "rx_pci_signal_integrity": _dir("rx", "roce_pci_signal_errors_total"),
    "tx_pci_signal_integrity": _dir("tx", "roce_pci_signal_errors_total"),
    "rx_vport_rdma_unicast_bytes": _dir("rx", "roce_rdma_bytes_total", kind="unicast"),
    "tx_vport_rdma_unicast_bytes": _dir("tx", "roce_rdma_bytes_total", kind="unicast"),
    "rx_vport_rdma_multicast_bytes": _dir("rx", "roce_rdma_bytes_total", kind="multicast"),
    "tx_vport_rdma_multicast_bytes": _dir("tx", "roce_rdma_bytes_total", kind="multicast"),
    "rx_vport_rdma_unicast_packets": _dir("rx", "roce_rdma_packets_total", kind="unicast"),
    "tx_vport_rdma_unicast_packets": _dir("tx", "roce_rdma_packets_total", kind="unicast"),
    "rx_vport_rdma_multicast_packets": _dir("rx", "roce_rdma_packets_total", kind="multicast"),
    "tx_vport_rdma_multicast_packets": _dir("tx", "roce_rdma_packets_total", kind="multicast"),
    # 802.3x global pause frames: bnxt_en, qede and be2net (which spells TX "pauseframes")
    "rx_pause_frames": _dir("rx", "roce_pfc_pause_frames_total", priority="global"),
    "tx_pause_frames": _dir("tx", "roce_pfc_pause_frames_total", priority="global"),
    "tx_pauseframes": _dir("tx", "roce_pfc_pause_frames_total", priority="global"),
    # PFC frames summed over priorities: bnxt_en/qede rx/tx_pfc_frames, be2net *_priority_pause*frames
    "rx_pfc_frames": _dir("rx", "roce_pause_ctrl_frames_total"),
    "tx_pfc_frames": _dir("tx", "roce_pause_ctrl_frames_total"),
    "rx_priority_pause_frames": _dir("rx", "roce_pause_ctrl_frames_total"),
    "tx_priority_pauseframes": _dir("tx", "roce_pause_ctrl_frames_total"),
    # bnxt_en port and extended port statistics
    "rx_buffer_passed_threshold": ("roce_buffer_almost_full_events_total", {}, 1.0),
    "rx_pcs_symbol_err": ("roce_phy_uncorrected_symbols_total", {}, 1.0),
    "rx_corrected_bits": ("roce_phy_corrected_bit_errors_total", {}, 1.0),
    "rx_bits": ("roce_phy_received_bit_count_total", {}, 1.0),
    "link_down_events": ("roce_link_down_events_total", {}, 1.0),
    "rx_fcs_err_frames": ("roce_phy_crc_errors_total", {}, 1.0),
    # ice port statistics (".nic" = the whole port, not this VSI)
    "rx_crc_errors.nic": ("roce_phy_crc_errors_total", {}, 1.0),
    "rx_bytes.nic": _dir("rx", "roce_bytes_total"),
    "tx_bytes.nic": _dir("tx", "roce_bytes_total"),
    # port-level drops of every traffic class: "port", like SONiC's IF_IN_DISCARDS (not judged as lossless loss)
    "rx_dropped.nic": _dir("rx", "roce_discards_total", reason="port"),
    # i40e port statistics
    "port.rx_bytes": _dir("rx", "roce_bytes_total"),
    "port.tx_bytes": _dir("tx", "roce_bytes_total"),
    "port.rx_crc_errors": ("roce_phy_crc_errors_total", {}, 1.0),
    "port.rx_dropped": _dir("rx", "roce_discards_total", reason="port"),
    # be2net
    "rx_crc_errors": ("roce_phy_crc_errors_total", {}, 1.0),
    # Ethernet (non-RoCE) receive drops: eth_* reasons, not judged as lossless loss
    "rx_drops_no_pbuf": _dir("rx", "roce_discards_total", reason="eth_no_buffer"),
    "eth_red_drops": _dir("rx", "roce_discards_total", reason="eth_wred"),
    "roce_drops_crc": ("roce_icrc_errors_total", {}, 1.0),
    "roce_drops_payload_len": _dir("rx", "roce_discards_total", reason="roce_payload_len"),
    "rx_roce_frames": _dir("rx", "roce_rdma_packets_total"),
    # qede
    "no_buff_discards": _dir("rx", "roce_discards_total", reason="eth_no_buffer"),
    "brb_discards": _dir("rx", "roce_discards_total", reason="port"),  # the shared receive buffer: all classes
}


def parse_ethtool_stats(text: str, *, source: str = "<ethtool>") -> tuple[dict[str, float], list[str]]:
    """Parse ``ethtool -S`` text into {key: value}, plus one error per line that is not ``key: number``.

    Per-queue keys keep their prefix (``[0]: rx_bytes``); a prompt line (``$ ethtool -S eth0``) and the
    ``NIC statistics:`` header are skipped. Negative values are errors: no counter goes below zero.
    Raises ParseError when the text holds no statistics line at all.
    """
    values: dict[str, float] = {}
    errors: list[str] = []
    known = _VALID_KEYS
    for number, line in enumerate(text.splitlines(), start=1):
        # partition, not a regex, on the hot path: a poll of 64 NICs parses ~10 000 of these lines; a key
        # seen before skips the name check (the same few hundred keys come back on every poll)
        key, sep, raw = line.partition(":")
        key = key.strip()
        value = None
        if sep and (key in known or _valid_key(key)):
            try:
                value = float(raw)  # what to_number() does, inlined: this loop runs per line
            except ValueError:
                if ":" in raw:  # a per-queue key: "[0]: rx_bytes: 5", "rxq0: rx_bytes: 5", "0: rcv_pkts: 5"
                    key, value = _queue_key(key, raw)
            else:
                if not isfinite(value):
                    value = None
        elif sep and ":" in raw:  # "1 [XDP]: xmit_pkts: 41" (qede's XDP queues have a space in the prefix)
            key, value = _queue_key(key, raw)
        if value is None:
            stripped = line.strip()
            if stripped and not stripped.endswith("statistics:") and _PROMPT.search(stripped[:200]) is None:
                errors.append(f"{source}:{number}: not 'name: number': {stripped[:60]!r}")
            continue
        if value < 0:
            errors.append(f"{source}:{number}: {key}: negative counter value {value:g} (counters never go below 0)")
            continue
        values[key] = value
    if not values:
        raise ParseError("no 'name: value' statistics found; expected `ethtool -S` output", source=source,
                         excerpt=text[:80])
    return values, errors


def _queue_key(prefix: str, rest: str) -> tuple[str, float | None]:
    name, _, raw = rest.rpartition(":")
    name = name.strip()
    if _QUEUE_PREFIX.fullmatch(prefix) is None or _KEY.fullmatch(name) is None:
        return prefix, None
    try:
        value = float(raw)
    except ValueError:
        return prefix, None
    return f"{prefix}: {name}", value if isfinite(value) else None


def prompt_device(text: str) -> str | None:
    """The interface of a pasted ``$ ethtool -S eth0`` prompt line near the top, if there is one."""
    for line in text[:2000].splitlines()[:5]:
        if (m := _PROMPT.search(line)) is not None:
            return m.group(1)
    return None


# keys that passed the name check, so the next poll need not run the regex again (bounded against garbage)
_VALID_KEYS: set[str] = set()


def _valid_key(key: str) -> bool:
    if not key or _KEY.fullmatch(key) is None:
        return False
    if len(_VALID_KEYS) > 10_000:
        _VALID_KEYS.clear()
    _VALID_KEYS.add(key)
    return True


def mapping(key: str) -> Entry:
    """(metric, labels beyond host/device/port, scale) for an ethtool key: canonical where the meaning is
    known, else the generic family with the raw name (and the queue of a per-queue key)."""
    if (m := _PRIO.match(key)) is not None:
        metric, fixed, scale = _PER_PRIO[m.group(3)]
        return metric, {"direction": m.group(1), "priority": m.group(2), **fixed}, scale
    if (m := _GLOBAL.match(key)) is not None:
        metric, fixed, scale = _PER_PRIO[m.group(2)]
        return metric, {"direction": m.group(1), "priority": "global", **fixed}, scale
    if (entry := _PLAIN.get(key)) is not None:
        return entry
    if (m := _BNXT_PFC.match(key)) is not None:
        return "roce_pfc_pause_frames_total", {"direction": m.group(1), "priority": m.group(2)}, 1.0
    if (m := _BNXT_DURATION.match(key)) is not None:
        prio, direction, what = m.groups()
        if what == "duration_us":
            return "roce_pfc_paused_seconds_total", {"direction": direction, "priority": prio}, 1e-6
        return "roce_pfc_pause_transitions_total", {"direction": direction, "priority": prio}, 1.0
    if (m := _BNXT_TRAFFIC.match(key)) is not None:
        direction, what, prio = m.groups()
        return f"roce_{what}_total", {"direction": direction, "priority": prio}, 1.0
    if (m := _BNXT_COS_DISCARD.match(key)) is not None:
        # a CoS queue, not a priority: bnxt maps priorities to CoS queues through its own pri2cos table
        return "roce_discards_total", {"direction": "rx", "reason": "cos_discard", "queue": f"cos{m.group(1)}"}, 1.0
    if (m := _ICE_PRIO.match(key)) is not None:
        direction, prio, what = m.groups()
        # XOFF frames pause the priority; an XON frame ends a pause, i.e. one XOFF-to-XON transition
        metric = "roce_pfc_pause_frames_total" if what == "xoff" else "roce_pfc_pause_transitions_total"
        return metric, {"direction": direction, "priority": prio}, 1.0
    if (m := _ICE_LINK.match(key)) is not None:
        what, direction = m.groups()
        metric = "roce_pfc_pause_frames_total" if what == "xoff" else "roce_pfc_pause_transitions_total"
        return metric, {"direction": direction, **_GLOBAL_PAUSE}, 1.0
    queue, sep, name = key.partition(": ")
    if sep:
        return GENERIC, {"name": name, "queue": _queue_label(queue)}, 1.0
    per_queue = per_queue_key(key)
    if per_queue is not None:
        return GENERIC, {"name": per_queue[1], "queue": per_queue[0]}, 1.0
    return GENERIC, {"name": key}, 1.0


def per_queue_key(key: str) -> tuple[str, str] | None:
    """``(queue, name)`` for a per-queue key spelt with the queue inside it (``rx_queue_1_packets`` ->
    ``("1", "rx_packets")``), None for any other key."""
    if (m := _ENA_QUEUE.match(key)) is not None:
        return m.group(1), f"{m.group(2)}_{m.group(3)}"
    for pattern in _PER_QUEUE:
        if (m := pattern.match(key)) is not None:
            return m.group(2), f"{m.group(1)}_{m.group(3)}"
    return None


def _queue_label(prefix: str) -> str:
    """``[0]`` -> ``0``, ``rxq3`` -> ``rxq3``, ``2 [XDP]`` -> ``xdp2``."""
    if prefix.endswith(" [XDP]"):
        return "xdp" + prefix.removesuffix(" [XDP]")
    return prefix.strip("[]")


# key -> mapping, filled on first sight: a NIC exposes the same few hundred keys on every poll
_MAPPINGS: dict[str, Entry] = {}

# per-source plan entry for one key: (metric, kind, scale, labels) or None for generic keys the filter refuses
_Plan = tuple[str, SampleKind, float, dict[str, str]] | None


def cached_mapping(key: str) -> Entry:
    """:func:`mapping`, remembered per key (bounded)."""
    entry = _MAPPINGS.get(key)
    if entry is None:
        if len(_MAPPINGS) > 10_000:  # garbage input must not grow the cache without bound
            _MAPPINGS.clear()
        entry = _MAPPINGS[key] = mapping(key)
    return entry


def statistic_key(key: str, name: str | None = None) -> bool:
    """Whether ``key`` (or, for a per-queue line ``[0]: rx_bytes``, the prefix ``key`` and ``name``) is spelt as
    ``ethtool -S`` prints statistic names."""
    if name is None:
        return bool(key) and _KEY.fullmatch(key) is not None
    return _QUEUE_PREFIX.fullmatch(key) is not None and _KEY.fullmatch(name) is not None


def _plan(key: str, host: str, device: str, budget: GenericBudget | None) -> _Plan:
    metric, extra, scale = cached_mapping(key)
    if metric == GENERIC and budget is not None and not budget.admits(extra["name"], extra.get("queue", "")):
        return None
    return metric, METRICS[metric].kind, scale, {"host": host, "device": device, "port": "1", **extra}


def ethtool_samples(values: dict[str, float], *, time: float, host: str, device: str, source: str,
                    label_cache: dict[str, _Plan] | None = None, budget: GenericBudget | None = None) -> list[Sample]:
    """``values`` as Samples (labels host, device, port): canonical where known, generic otherwise.

    ``label_cache`` (one per source, for one host and device) keeps each key's mapping and label dict across
    polls: Samples never mutate their labels, and working out ~150 mappings and dicts per NIC per poll was the
    largest cost of a poll. ``budget`` bounds the generic series (None: no bound).
    """
    plans = {} if label_cache is None else label_cache
    out: list[Sample] = []
    append = out.append
    for key, value in values.items():
        try:
            plan = plans[key]
        except KeyError:
            plan = _plan(key, host, device, budget)
            if len(plans) < 10_000:
                plans[key] = plan
        if plan is not None:
            append(new_sample(time, plan[0], plan[1], value * plan[2], plan[3], source))
    return out


class EthtoolSource:
    def __init__(self, name: str, device: str | None, ctx: SourceContext, *, path: Path | None = None) -> None:
        self.name = name
        self._device = device
        self._ctx = ctx
        self._path = path
        self._plans: dict[str, _Plan] = {}
        self._budget = GenericBudget(ctx.counters, name)

    def read(self) -> Reading:
        text = capture_or_run(self.name, self._path, self._ctx, ["ethtool", "-S", self._device or ""])
        now = self._ctx.clock()
        values, errors = parse_ethtool_stats(text, source=self.name)
        if self._device is None:  # a file without @IF: the pasted prompt names it, else the file's stem
            self._device = prompt_device(text) or (self._path.stem if self._path else "")
        samples = ethtool_samples(values, time=now, host=self._ctx.host, device=self._device, source=self.name,
                                  label_cache=self._plans, budget=self._budget)
        self._budget.report(errors)
        return Reading(tuple(samples), tuple(errors))


def open_live(arg: str, ctx: SourceContext) -> EthtoolSource:
    if not arg:
        raise InputError("ethtool: needs an interface, e.g. ethtool:eth0")
    return EthtoolSource(f"ethtool:{arg}", arg, ctx)


def open_file(arg: str, ctx: SourceContext) -> EthtoolSource:
    """``ethtool-file:PATH`` (device label = the pasted prompt's interface, else the file stem) or
    ``ethtool-file:PATH@IF``."""
    path_text, _, device = arg.partition("@")
    path = Path(path_text)
    if not path_text or not path.is_file():
        raise InputError(f"ethtool-file:{arg}: {path_text!r} is not a file (expected saved `ethtool -S` output)")
    return EthtoolSource(f"ethtool-file:{arg}", device or None, ctx, path=path)

