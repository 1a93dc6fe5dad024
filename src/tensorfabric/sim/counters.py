"""The simulator's counter stream: Sample records per NIC and switch port, as the monitor reads them.

Names and kinds come from the one catalogue (``tensorfabric.metrics_catalogue``, the base module telemetry reads too;
sim does not import telemetry).
For a directed edge u -> v carrying data, v's port *sends* PFC frames (direction ``tx``) and u's port
*receives* them (``rx``): ``roce_pfc_paused_seconds_total{direction="rx"}`` at u is the time u's egress
was held; ``{direction="tx"}`` at v the time v asked for it. PAUSE frames count XOFF assertions, XON
releases and the refreshes a port sends every half pause time while it stays above XOFF.

Labels: ``host`` is the host or switch name, ``device`` the RDMA device (``mlx5_0``) or the switch name,
``port`` the interface (``eth0``, ``Ethernet8``); PFC series add ``priority`` and ``direction``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import numpy as np
import numpy.typing as npt

from tensorfabric.metrics_catalogue import (
    BYTES,
    CNP_HANDLED,
    CNP_SENT,
    DISCARDS,
    ECN_MARKED_PACKETS,
    PFC_PAUSE_FRAMES,
    PFC_PAUSE_TRANSITIONS,
    PFC_PAUSED_SECONDS,
    QUEUE_OCCUPANCY_BYTES,
    QUEUE_PACKETS,
    QUEUE_PAUSED,
    sample,
)
from tensorfabric.samples import Sample
from tensorfabric.sim.network import Network
from tensorfabric.sim.trace import Trace
from tensorfabric.topology import Fabric, Host

__all__ = ["counter_samples"]

SOURCE = "sim"


def _labels(fabric: Fabric, device: str, port: str) -> dict[str, str]:
    dev = fabric.device(device)
    if isinstance(dev, Host):
        nic = dev.nic(port) if any(n.netdev == port for n in dev.nics) else None
        return {"host": device, "device": (nic.rdma_device if nic and nic.rdma_device else port), "port": port}
    return {"host": device, "device": device, "port": port}


def _per_edge(values: npt.NDArray[np.float64], idx: npt.NDArray[np.int64], n: int) -> npt.NDArray[np.float64]:
    return cast(npt.NDArray[np.float64], np.bincount(idx, values, n))


def counter_samples(net: Network, trace: Trace, *, priority: int, mtu: int, lossless: bool) -> Iterator[Sample]:
    """Yield the counter stream of every snapshot the run took, in time order."""
    fabric = net.fabric
    n_e = len(net.edges)
    prio = str(priority)
    reason = "pg" if lossless else "queue"
    src_lab = [_labels(fabric, e.src, e.src_port) for e in net.edges]
    dst_lab = [_labels(fabric, e.dst, e.dst_port) for e in net.edges]
    used = np.zeros(n_e, dtype=bool)
    used[net.seg_edge] = True
    used[net.src_nic_edge] = True
    used |= trace.edge_xoff_s > 0
    edges = np.flatnonzero(used)
    from_switch = [fabric.is_switch(e.src) for e in net.edges]
    for snap in trace.snapshots:
        t = float(snap["time"][0])
        frames = snap["edge_on"] + snap["edge_off"] + np.floor(snap["edge_xoff_s"] / trace.edge_refresh_s)
        nic_marked = _per_edge(snap["marked"], net.dst_nic_edge, n_e)
        cnp_sent = _per_edge(snap["cnp_sent"], net.dst_nic_edge, n_e)
        cnp_handled = _per_edge(snap["cnp_handled"], net.src_nic_edge, n_e)
        for e in edges:
            rx, tx = src_lab[e], dst_lab[e]  # u receives PAUSE for edge u->v; v sends it
            pfc_rx = {**rx, "priority": prio, "direction": "rx"}
            pfc_tx = {**tx, "priority": prio, "direction": "tx"}
            yield sample(t, PFC_PAUSE_FRAMES, float(frames[e]), pfc_rx, SOURCE)
            yield sample(t, PFC_PAUSE_FRAMES, float(frames[e]), pfc_tx, SOURCE)
            yield sample(t, PFC_PAUSED_SECONDS, float(snap["edge_paused_s"][e]), pfc_rx, SOURCE)
            yield sample(t, PFC_PAUSED_SECONDS, float(snap["edge_xoff_s"][e]), pfc_tx, SOURCE)
            yield sample(t, PFC_PAUSE_TRANSITIONS, float(snap["edge_off"][e]), pfc_rx, SOURCE)
            yield sample(t, PFC_PAUSE_TRANSITIONS, float(snap["edge_off"][e]), pfc_tx, SOURCE)
            yield sample(t, BYTES, float(snap["edge_tx"][e]), {**rx, "priority": prio, "direction": "tx"}, SOURCE)
            if net.to_switch[e]:
                drops = float(np.floor(snap["edge_drops"][e] / mtu))
                yield sample(t, DISCARDS, drops, {**tx, "priority": prio, "direction": "rx", "reason": reason}, SOURCE)
            if from_switch[e]:  # a switch egress queue: ECN marks, occupancy, paused state
                queue = {**rx, "queue": prio}
                yield sample(t, ECN_MARKED_PACKETS, float(np.floor(snap["edge_marks"][e])),
                             {**rx, "priority": prio, "queue": prio}, SOURCE)
                yield sample(t, QUEUE_OCCUPANCY_BYTES, float(snap["queue"][e]), queue, SOURCE)
                yield sample(t, QUEUE_PACKETS, float(np.floor(snap["edge_tx"][e] / mtu)), queue, SOURCE)
                yield sample(t, QUEUE_PAUSED, float(snap["paused"][e]), queue, SOURCE)
            else:  # a sending NIC: the reaction point
                yield sample(t, CNP_HANDLED, float(np.floor(cnp_handled[e])), rx, SOURCE)
            if not net.to_switch[e]:  # a receiving NIC: the notification point
                yield sample(t, ECN_MARKED_PACKETS, float(np.floor(nic_marked[e])), {**tx, "priority": prio},
                             SOURCE)
                yield sample(t, CNP_SENT, float(np.floor(cnp_sent[e])), tx, SOURCE)
