"""Verdicts on one dump: what a single ``ethtool -S`` / ``rdma statistic`` paste in a ticket already shows.

A ticket has no time series, so nothing here is a rate: every verdict reads counters accumulated since they
were last cleared (boot, driver load, ``ethtool -S`` reset), and says so. The checks are the misconfigurations
a single dump proves on its own: 802.3x link pause in use instead of PFC, all traffic on priority 0 (nothing
maps RoCE to a lossless priority), heavy ECN marking / CNP generation, receivers running out of buffers (RNR,
out_of_buffer) and work completions with errors. Thresholds are fields of :class:`SnapshotLimits`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from tensorfabric import roce
from tensorfabric.findings import Finding
from tensorfabric.samples import Sample

__all__ = ["SnapshotLimits", "snapshot_findings"]

_SINCE = "counted since the counters were last cleared"


@dataclass(frozen=True, slots=True)
class SnapshotLimits:
    min_bytes: float = 1e9
    """Traffic below this is too little to judge a priority mapping by."""
    ecn_share: float = 0.01
    """CE-marked (or CNP-sent) share of received packets above which marking is heavy."""


def _device(s: Sample) -> str:
    return " ".join(p for p in (s.labels.get("host", ""), s.labels.get("device", "")) if p) or s.source


def snapshot_findings(samples: Iterable[Sample], limits: SnapshotLimits | None = None) -> list[Finding]:
    """Findings with fixes from the newest value of each counter in ``samples`` (one poll of any sources)."""
    lim = limits or SnapshotLimits()
    by_dev: dict[str, list[Sample]] = defaultdict(list)
    for s in samples:
        if s.kind == "counter":
            by_dev[_device(s)].append(s)
    out: list[Finding] = []
    for subject, rows in sorted(by_dev.items()):
        out += _pause_kind(subject, rows) + _priority_zero(subject, rows, lim) + _ecn(subject, rows, lim)
        out += _buffers(subject, rows) + _completions(subject, rows)
    return out


def _sum(rows: list[Sample], metric: str, **match: str) -> float:
    return sum(s.value for s in rows if s.metric == metric and all(s.labels.get(k, "") == v for k, v in match.items()))


def _pause_kind(subject: str, rows: list[Sample]) -> list[Finding]:
    link = _sum(rows, "roce_pfc_pause_frames_total", priority="global")
    pfc = sum(s.value for s in rows if s.metric == "roce_pfc_pause_frames_total"
              and s.labels.get("priority", "").isdigit())
    if link <= 0 or pfc > 0:
        return []
    return [Finding("telemetry.global-pause", "warning", subject,
                    f"802.3x link pause is in use ({link:.0f} frames) and PFC is not (0 per-priority pause frames), "
                    f"{_SINCE}: a pause stops every priority, lossy traffic included",
                    {"link_pause_frames": link, "pfc_pause_frames": pfc},
                    "Turn link pause off (ethtool -A IF rx off tx off) and enable PFC on the RoCE priority only "
                    "(mlnx_qos -i IF --pfc 0,0,0,1,0,0,0,0, or the switch's matching no-drop class).")]


def _priority_zero(subject: str, rows: list[Sample], lim: SnapshotLimits) -> list[Finding]:
    per_prio: dict[str, float] = defaultdict(float)
    for s in rows:
        if s.metric == "roce_bytes_total" and s.labels.get("priority", "").isdigit():
            per_prio[s.labels["priority"]] += s.value
    total = sum(per_prio.values())
    if total < lim.min_bytes or per_prio.get("0", 0.0) < total:
        return []
    return [Finding("telemetry.all-on-priority-0", "warning", subject,
                    f"all {total / 1e9:.1f} GB of traffic ran on priority 0, {_SINCE}: nothing maps RoCE to a "
                    "lossless priority (no DSCP or PCP mapping), so PFC cannot protect it",
                    {"bytes_by_priority": dict(per_prio)},
                    "Trust DSCP on the NIC (mlnx_qos -i IF --trust dscp) and map RoCE's DSCP "
                    f"({roce.ROCE_DSCP} by default) to the lossless priority ({roce.LOSSLESS_PRIORITY}); check the "
                    "switch classifies the same way (tensorfabric fabric lint).")]


def _ecn(subject: str, rows: list[Sample], lim: SnapshotLimits) -> list[Finding]:
    received = _sum(rows, "roce_rdma_packets_total", direction="rx") or _sum(rows, "roce_packets_total",
                                                                          direction="rx", priority="")
    if received <= 0:
        return []
    out = []
    for metric, what in (("roce_ecn_marked_packets_total", "CE-marked"), ("roce_cnp_sent_total", "CNPs sent for")):
        count = _sum(rows, metric)
        if count / received > lim.ecn_share:
            out.append(Finding("telemetry.heavy-ecn", "warning", subject,
                               f"{what} {count / received:.1%} of the {received:.0f} packets received, {_SINCE}: "
                               "sustained congestion on the path to this host",
                               {"metric": metric, "count": count, "received_packets": received},
                               "Find the congested hop (incast onto this host, an oversubscribed uplink); if ECN "
                               "marks start below the switch's intended Kmin, revisit the WRED/ECN profile."))
    return out


def _buffers(subject: str, rows: list[Sample]) -> list[Finding]:
    evidence = {name: value for name, value in (
        ("out_of_buffer", _sum(rows, "roce_rq_out_of_buffer_total")),
        ("rnr_nak_retry_err", _sum(rows, "roce_retransmissions_total", kind="rnr_nak_retry_err")),
        ("rx_out_of_buffer", _sum(rows, "roce_eth_rx_out_of_buffer_total")),
        ("req_rnr_retries_exceeded", _sum(rows, "roce_retries_exceeded_total", kind="rnr")),
    ) if value > 0}
    if not evidence:
        return []
    return [Finding("telemetry.receiver-out-of-buffers", "warning", subject,
                    f"receivers ran out of posted buffers ({', '.join(f'{k} {v:.0f}' for k, v in evidence.items())}),"
                    f" {_SINCE}: senders are told to retry (RNR) or packets are dropped",
                    evidence,
                    "Keep receive queues full: post more receive WQEs or use a larger SRQ, and raise the RNR timer "
                    "if the application is bursty; for the Ethernet queue (rx_out_of_buffer) raise the ring size "
                    "(ethtool -G IF rx 8192) or give the IRQs more CPU.")]


def _completions(subject: str, rows: list[Sample]) -> list[Finding]:
    kinds = {s.labels.get("kind", ""): s.value for s in rows
             if s.metric in ("roce_completion_errors_total", "roce_retries_exceeded_total") and s.value > 0}
    if not kinds:
        return []
    first = [k for k in kinds if "flush" not in k] or list(kinds)
    listed = ", ".join(f"{k} {v:.0f}" for k, v in kinds.items())
    return [Finding("telemetry.completion-errors", "warning", subject,
                    f"{sum(kinds.values()):.0f} work completions with errors ({listed}), {_SINCE}; flush errors "
                    "only follow a QP that already failed",
                    {"by_kind": kinds, "look_first_at": first},
                    "Start from the non-flush kinds: remote_access -> rkey or permissions of the target buffer; "
                    "invalid_request -> opcode/size the peer does not allow; local_length -> receive buffer too "
                    "small; retries exceeded (transport) -> packets lost or a dead peer, check PFC/ECN and links. "
                    "(A warning: a cumulative count cannot say whether failures are still happening; poll twice.)")]
