"""Verdicts on one dump (or two): what a ``ethtool -S`` / ``rdma statistic`` / switch CLI paste in a ticket shows.

A ticket has no time series, so nothing here is a rate: every verdict reads counters accumulated since they
were last cleared (boot, driver load, ``ethtool -S`` reset), and says so. The checks are the misconfigurations
a single dump proves on its own: 802.3x link pause in use instead of PFC, all traffic on priority 0 (nothing
maps RoCE to a lossless priority), heavy ECN marking / CNP generation, receivers running out of buffers (RNR,
out_of_buffer) and work completions with errors; on the fabric side (:mod:`.snapshot_switch`) a lossless queue
that drops, two counter paths that disagree, a flapping PFC watchdog, and PFC operationally off on a port whose
pause counters move. Given an earlier dump of the same sources, each of those is graded ``moving`` (it rose
between the dumps), ``stopped`` (it did not) or, from one dump, ``counted``.

A device that is not RoCE at all (Omni-Path, EFA, iWARP, virtio-net, a 1 Gb/s NIC: :mod:`.devices`) is named
for what it is and gets no RoCE verdict. Thresholds are fields of :class:`SnapshotLimits`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from tensorfabric import roce
from tensorfabric.findings import Finding
from tensorfabric.samples import Sample
from tensorfabric.telemetry.devices import DeviceClass, classify, device_key
from tensorfabric.telemetry.snapshot_switch import (
    Dumps,
    lossless_drops,
    path_disagreement,
    pfc_off_pausing,
    watchdog_flapping,
)

__all__ = ["SnapshotLimits", "snapshot_findings"]

_SINCE = "counted since the counters were last cleared"


@dataclass(frozen=True, slots=True)
class SnapshotLimits:
    min_bytes: float = 1e9
    """Traffic below this is too little to judge a priority mapping by."""
    ecn_share: float = 0.01
    """CE-marked (or CNP-sent) share of received packets above which marking is heavy."""
    lossless_priorities: tuple[str, ...] = tuple(str(p) for p in roce.SONIC_LOSSLESS_PRIORITIES)
    lossless_queue_names: tuple[str, ...] = ("no-loss", "fcoe")
    """Queues named by forwarding class that are lossless by default (Junos' no-loss and fcoe classes)."""
    flap_cycles: float = 10.0
    """Storm/restore cycles of one queue, since cleared, that are flapping rather than storms that came and went
    (170 in 20 minutes in sonic-buildimage#29203; a healthy port sees a handful a year)."""


def _device(s: Sample) -> str:
    host, device = s.labels.get("host", ""), s.labels.get("device", "")
    return " ".join(p for p in (host, device if device != host else "") if p) or s.source


def snapshot_findings(samples: Iterable[Sample], limits: SnapshotLimits | None = None, *,
                      earlier: Iterable[Sample] | None = None) -> list[Finding]:
    """Findings with fixes from the newest value of each counter in ``samples`` (one poll of any sources; the same
    series from two sources is compared, not merged), graded against ``earlier`` (an earlier poll or paste of the
    same sources) when given."""
    lim = limits or SnapshotLimits()
    rows_all = list(samples)
    classes = classify(rows_all)
    by_dev: dict[str, list[Sample]] = defaultdict(list)
    for s in rows_all:
        if s.kind == "counter" and device_key(s) not in classes:
            by_dev[_device(s)].append(s)
    out: list[Finding] = [_not_roce(key, found) for key, found in sorted(classes.items())]
    for subject, rows in sorted(by_dev.items()):
        out += _pause_kind(subject, rows) + _priority_zero(subject, rows, lim) + _ecn(subject, rows, lim)
        out += _buffers(subject, rows) + _completions(subject, rows)
    dumps = Dumps.of((s for s in rows_all if device_key(s) not in classes), earlier)
    out += lossless_drops(dumps, lim.lossless_priorities, lim.lossless_queue_names, set(classes))
    out += path_disagreement(dumps) + watchdog_flapping(dumps, lim.flap_cycles) + pfc_off_pausing(dumps)
    return out


def _not_roce(key: tuple[str, str], found: DeviceClass) -> Finding:
    subject = " ".join(p for p in key if p)
    return Finding("telemetry.not-roce", "info", subject,
                   f"{key[1]} is {found.name}, not a RoCE device ({found.why}): its counters are not read as "
                   "RoCE counters and no RoCE verdict is given for it",
                   {"class": found.name, "evidence": found.why}, found.fix)


def _sum(rows: list[Sample], metric: str, **match: str) -> float:
    return sum(s.value for s in rows if s.metric == metric and all(s.labels.get(k, "") == v for k, v in match.items()))


def _pause_kind(subject: str, rows: list[Sample]) -> list[Finding]:
    by_port: dict[str, list[Sample]] = defaultdict(list)
    for s in rows:
        by_port[s.labels.get("port", "")].append(s)
    link = pfc = 0.0
    ports: list[str] = []
    for port, mine in sorted(by_port.items()):
        linked = _sum(mine, "roce_pfc_pause_frames_total", priority="global")
        per_priority = [s for s in mine if s.metric == "roce_pfc_pause_frames_total"
                        and s.labels.get("priority", "").isdigit()]
        if linked <= 0 and per_priority:
            # all MAC control pause frames (PFC and 802.3x) against the per-priority PFC ones: the rest is link pause
            linked = _sum(mine, "roce_pause_ctrl_frames_total")
        priority_frames = sum(s.value for s in per_priority)
        if linked > 0 and priority_frames <= 0:
            link, ports = link + linked, [*ports, port]
        pfc += priority_frames
    if link <= 0:
        return []
    named = [p for p in ports if p]
    return [Finding("telemetry.global-pause", "warning", subject,
                    f"802.3x link pause is in use ({link:.0f} frames{' on ' + ', '.join(named) if named else ''}) "
                    f"and PFC is not there (0 per-priority pause frames), {_SINCE}: a pause stops every priority, "
                    "lossy traffic included",
                    {"link_pause_frames": link, "pfc_pause_frames": pfc, **({"ports": named} if named else {})},
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
