"""Names shared by the sysfs and rdma sources: IB PMA ``counters/`` and mlx5 ``hw_counters/``.

Each raw name maps to (canonical metric, extra labels, scale to base units). Names from mlx5
(drivers/infiniband/hw/mlx5/counters.c) and irdma (Intel E810 RoCE, its ``irdma_hw_stat_names``); every other
name a device shows goes to the generic family (bounded by the source's :class:`GenericBudget`).
"""

from __future__ import annotations

from collections.abc import Mapping

from tensorfabric.samples import Sample
from tensorfabric.telemetry.metrics import GENERIC, METRICS
from tensorfabric.telemetry.sources.generic import GenericBudget

__all__ = ["HW_COUNTERS", "PMA_COUNTERS", "samples_for"]

Mapping_ = dict[str, tuple[str, dict[str, str], float]]

# IB PMA data counters count 4-byte words (the "4 lanes" of the ABI text): x4 gives bytes.
PMA_COUNTERS: Mapping_ = {
    "port_xmit_data": ("roce_bytes_total", {"direction": "tx"}, 4.0),
    "port_rcv_data": ("roce_bytes_total", {"direction": "rx"}, 4.0),
    "port_xmit_packets": ("roce_packets_total", {"direction": "tx"}, 1.0),
    "port_rcv_packets": ("roce_packets_total", {"direction": "rx"}, 1.0),
    "port_xmit_discards": ("roce_discards_total", {"direction": "tx", "reason": "xmit"}, 1.0),
    "port_rcv_errors": ("roce_discards_total", {"direction": "rx", "reason": "rcv_errors"}, 1.0),
    "excessive_buffer_overrun_errors": ("roce_discards_total", {"direction": "rx", "reason": "buffer_overrun"}, 1.0),
    "symbol_error": ("roce_phy_symbol_errors_total", {}, 1.0),
    "link_downed": ("roce_link_down_events_total", {}, 1.0),
}

_RETRANS = ("out_of_sequence", "packet_seq_err", "implied_nak_seq_err", "local_ack_timeout_err",
            "duplicate_request", "rnr_nak_retry_err", "roce_adp_retrans", "roce_adp_retrans_to",
            "roce_slow_restart", "roce_slow_restart_cnps", "roce_slow_restart_trans")
_COMPLETION = ("req_cqe_error", "resp_cqe_error", "req_cqe_flush_error", "resp_cqe_flush_error",
               "req_remote_invalid_request", "req_remote_access_errors", "resp_remote_access_errors",
               "resp_local_length_error")

HW_COUNTERS: Mapping_ = {
    "np_ecn_marked_roce_packets": ("roce_ecn_marked_packets_total", {}, 1.0),
    "np_cnp_sent": ("roce_cnp_sent_total", {}, 1.0),
    "rp_cnp_handled": ("roce_cnp_handled_total", {}, 1.0),
    "rp_cnp_ignored": ("roce_cnp_ignored_total", {}, 1.0),
    "out_of_buffer": ("roce_rq_out_of_buffer_total", {}, 1.0),
    "req_transport_retries_exceeded": ("roce_retries_exceeded_total", {"kind": "transport"}, 1.0),
    "req_rnr_retries_exceeded": ("roce_retries_exceeded_total", {"kind": "rnr"}, 1.0),
    **{name: ("roce_retransmissions_total", {"kind": name}, 1.0) for name in _RETRANS},
    **{name: ("roce_completion_errors_total", {"kind": name}, 1.0) for name in _COMPLETION},
    **{f"rx_{kind}_requests": ("roce_rx_requests_total", {"kind": kind}, 1.0) for kind in ("read", "write", "atomic")},
    "rx_dct_connect": ("roce_rx_requests_total", {"kind": "dct_connect"}, 1.0),
    "rx_icrc_encapsulated": ("roce_icrc_errors_total", {}, 1.0),
    "lifespan": ("roce_hw_counters_lifespan_seconds", {}, 1e-3),  # milliseconds
    # irdma (E810): the DCQCN counters under their own names
    "cnpHandled": ("roce_cnp_handled_total", {}, 1.0),
    "cnpIgnored": ("roce_cnp_ignored_total", {}, 1.0),
    "cnpSent": ("roce_cnp_sent_total", {}, 1.0),
    "RxECNMrkd": ("roce_ecn_marked_packets_total", {}, 1.0),
    "ip4InDiscards": ("roce_discards_total", {"direction": "rx", "reason": "ip4_discard"}, 1.0),
    "ip6InDiscards": ("roce_discards_total", {"direction": "rx", "reason": "ip6_discard"}, 1.0),
}


def samples_for(values: Mapping[str, float], table: Mapping_, *, time: float, labels: Mapping[str, str],
                source: str, budget: GenericBudget | None = None) -> list[Sample]:
    """Samples for the raw counters in ``values``: canonical where ``table`` knows the name, generic otherwise
    (only those ``budget`` admits; None: no generic samples)."""
    out: list[Sample] = []
    for raw, value in values.items():
        entry = table.get(raw)
        if entry is None:
            if budget is None or not budget.admits(raw, *labels.values()):
                continue
            entry = (GENERIC, {"name": raw}, 1.0)
        metric, extra, scale = entry
        out.append(Sample(time=time, metric=metric, kind=METRICS[metric].kind, value=value * scale,
                          labels={**labels, **extra}, source=source))
    return out
