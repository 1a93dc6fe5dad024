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
from tensorfabric.telemetry.detectors.base import Detector, Thresholds, paused_fractions
from tensorfabric.telemetry.window import Labels, Window, subject_of

__all__ = ["DETECTOR", "detect", "find_cycle"]


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
    held = [labels for labels in rx if _stuck(window, labels)]
    if not limits.links:
        # without cabling: devices held both ways (a stuck port paused by its peer, and a port pausing its own
        # peer) and no storm root anywhere -- the same test the Prometheus rule makes
        held_by = {(_where(k)[0], _where(k)[2]) for k in held}
        pausing = {(host, prio) for host, _, prio in tx}
        devices = sorted(held_by & pausing)
        held_hosts = {host for host, _ in held_by}
        roots = [h for h, _, _ in tx if h not in held_hosts]
        if len(devices) < 2 or roots:
            return []
        return [Alert("deadlock", "warning", f"{len(devices)} devices held both ways", window.end,
                      {"devices": [f"{h} prio {p}" for h, p in devices], "cycle": "unconfirmed"},
                      "Possible deadlock: give the cabling (monitor --links) to confirm a cycle; meanwhile "
                      "check for bounce routes and lossless flooding.")]
    peers: dict[tuple[str, str], tuple[str, str]] = {}
    for a, b in limits.links:
        peers[(a.device, a.port)] = (b.device, b.port)
        peers[(b.device, b.port)] = (a.device, a.port)
    graphs: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for labels in held:
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
                                    subject_of(k) for k in held if _where(k)[2] == priority)},
                                "Break the cycle: drain one link of the loop or let the PFC watchdog drop on one "
                                "member, then remove the routing that bounces lossless traffic (up-down-up "
                                "paths after link failures, flooding of lossless packets)."))
    return alerts


DETECTOR = Detector("deadlock", 120.0, detect)
