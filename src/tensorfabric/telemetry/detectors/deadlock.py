"""PFC deadlock (R6): a cycle in the paused-by graph whose queues are all paused >= 99 % with zero dequeue.

Edge X -> Y when X's port towards Y is paused by Y (rx paused share >= ``deadlock_fraction``), nothing leaves
the matching queue (dequeue increase 0 and occupancy > 0 where the switch reports them) and Y's side of the
link is sending that pause. A cycle of such edges is a cyclic buffer dependency that has frozen (Hu et al.
2016); a storm, by contrast, is a tree and has no cycle. Confirming the cycle needs the cabling
(``Thresholds.links``); without it, ports that are both RX- and TX-paused with no dequeue raise a warning.
"""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

from tensorfabric.samples import Alert
from tensorfabric.telemetry.detectors.base import (
    Detector,
    Thresholds,
    paused_fractions,
    storm_roots,
    storm_roots_promql,
)
from tensorfabric.telemetry.rules.promql import FABRIC_PRIO, HOST_PRIO, AlertRule, Timing, moved, paused
from tensorfabric.telemetry.window import Labels, Window, label_of, subject_of

__all__ = ["DETECTOR", "FORWARDED", "detect", "find_cycle", "rules"]


def _stuck(window: Window, labels: Labels) -> bool:
    """No dequeue on the queue matching this port and priority (True when the switch does not say)."""
    info = dict(labels)
    for queue_labels, _ in window.series("roce_queue_packets_total", host=info.get("host", ""),
                                         port=info.get("port", ""), queue=info.get("priority", "")):
        got = window.increase("roce_queue_packets_total", queue_labels)
        if got is not None and got[0] > 0:
            return False
        occupancy = window.last("roce_queue_occupancy_bytes", queue_labels)
        if occupancy is not None and occupancy <= 0:
            return False
    return True


def find_cycle(edges: dict[str, set[str]]) -> list[str]:
    """One cycle of the directed graph as [a, b, ..., a], or [] when there is none."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return []

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return []


@lru_cache(maxsize=1 << 16)  # pure, and asked about every pause series on every poll
def _where(labels: Labels) -> tuple[str, str, str]:
    info = dict(labels)
    return info.get("host", ""), info.get("port", ""), info.get("priority", "")


def detect(window: Window, limits: Thresholds) -> list[Alert]:
    rx = [labels for labels, f in paused_fractions(window, "rx") if f >= limits.deadlock_fraction]
    tx_series = {_where(labels) for labels, _ in window.series("roce_pfc_paused_seconds_total", direction="tx")}
    tx = {_where(labels) for labels, f in paused_fractions(window, "tx") if f >= limits.deadlock_fraction}
    held_ports = [labels for labels in rx if _stuck(window, labels)]
    if not limits.links:
        return _suspected(window, limits, held_ports, tx)
    peers: dict[tuple[str, str], tuple[str, str]] = {}
    for a, b in limits.links:
        peers[(a.device, a.port)] = (b.device, b.port)
        peers[(b.device, b.port)] = (a.device, a.port)
    graphs: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for labels in held_ports:
        host, port, priority = _where(labels)
        peer = peers.get((host, port))
        if peer is None:
            continue
        peer_key = (peer[0], peer[1], priority)
        # the peer must be sending the pause, unless it does not report TX pause time at all
        if peer_key in tx or peer_key not in tx_series:
            graphs[priority][host].add(peer[0])
    alerts: list[Alert] = []
    for priority, edges in sorted(graphs.items()):
        cycle = find_cycle(edges)
        if cycle:
            alerts.append(Alert("deadlock", "critical", f"cycle {' -> '.join(cycle)} prio {priority}", window.end,
                                {"cycle": cycle, "priority": priority, "paused_ports": sorted(
                                    subject_of(k) for k in held_ports if _where(k)[2] == priority)},
                                "Break the cycle: drain one link of the loop or let the PFC watchdog drop on one "
                                "member, then remove the routing that bounces lossless traffic (up-down-up "
                                "paths after link failures, flooding of lossless packets)."))
    return alerts



def _suspected(window: Window, limits: Thresholds, held_ports: list[Labels],
               tx: set[tuple[str, str, str]]) -> list[Alert]:
    """Without cabling: per priority, devices held both ways (a stuck port paused by its peer, and a port pausing its
    own peer) -- two or more of them and no storm root on the priority (:func:`~.base.storm_roots`) -- the same
    test the Prometheus rule makes."""
    held_by = {(_where(k)[0], _where(k)[2]) for k in held_ports}
    pausing = {(host, prio) for host, _, prio in tx}
    rooted = {label_of(k, "priority") or "" for k, _ in storm_roots(window, limits)}
    alerts: list[Alert] = []
    for priority in sorted({p for _, p in held_by & pausing}):
        devices = sorted(h for h, p in held_by & pausing if p == priority)
        if len(devices) < 2 or priority in rooted:
            continue
        alerts.append(Alert("deadlock", "warning", f"{len(devices)} devices held both ways prio {priority}",
                            window.end, {"devices": [f"{h} prio {priority}" for h in devices], "cycle": "unconfirmed",
                                         "priority": priority},
                            "Possible deadlock: give the cabling (monitor --links) to confirm a cycle; meanwhile "
                            "check for bounce routes and lossless flooding."))
    return alerts


FORWARDED = ("deadlock", "critical")
"""The one verdict PromQL cannot reach (a confirmed cycle needs the cabling): the exporter's ``tensorfabric_alert``
carries it to Prometheus, every other verdict has its own rule."""


def rules(limits: Thresholds, timing: Timing) -> tuple[AlertRule, ...]:
    # the queue a port's priority drains into: label_replace(queue -> priority) to join it to the pause series
    def queue(term: str) -> str:
        return f'label_replace({term}, "priority", "$1", "queue", "(.*)")'

    stuck_rx = (f'max by ({HOST_PRIO}) (\n    {paused("rx", timing)} >= {limits.deadlock_fraction:g}\n'
                f'      unless on (cluster, job, instance, host, port, priority)\n'
                f'    {queue(moved("roce_queue_packets_total", timing) + " > 0")}\n'
                f'      unless on (cluster, job, instance, host, port, priority)\n'
                f'    {queue("roce_queue_occupancy_bytes <= 0")}\n  )')
    pausing = f'max by ({HOST_PRIO}) ({paused("tx", timing)} >= {limits.deadlock_fraction:g})'
    roots = storm_roots_promql(limits, timing).replace("\n", "\n    ")
    return (
        AlertRule("RocePfcDeadlockSuspected",
                  f"count by ({FABRIC_PRIO}) (\n  {stuck_rx}\n    and on ({HOST_PRIO})\n  {pausing}\n)"
                  f" >= 2\n  unless on ({FABRIC_PRIO})\ncount by ({FABRIC_PRIO}) (\n    {roots}\n)",
                  "warning", "deadlock",
                  "{{ $value }} devices held both ways with no dequeue on priority {{ $labels.priority }}",
                  recommendation="Confirm the cycle (tensorfabric monitor --links) and break it by draining one link.",
                  comment="devices held both ways: a port paused with nothing dequeued, and a port pausing its own "
                          "peer; two or more and no storm root is a suspected cyclic buffer dependency (confirming "
                          "it needs the cabling: monitor --links, forwarded as tensorfabric_alert)"),
        AlertRule("TensorfabricDeadlockCycle",
                  f'tensorfabric_alert{{detector="{FORWARDED[0]}", severity="{FORWARDED[1]}"}} == 1',
                  "critical", FORWARDED[0], "{{ $labels.subject }}: PFC deadlock cycle confirmed with the cabling",
                  recommendation="Break the cycle: drain one link of the loop or let the PFC watchdog drop on one "
                                 "member, then remove the routing that bounces lossless traffic."),
    )


DETECTOR = Detector("deadlock", 120.0, detect, rules=rules)
