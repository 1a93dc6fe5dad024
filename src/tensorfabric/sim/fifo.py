"""First-in first-out egress queues for the fluid engine: bytes leave in the order they arrived.

A switch egress is a FIFO, so what a flow gets of the link at time t is its share of the bytes at the *head*
of the queue -- those that arrived one sojourn earlier -- not its share of the whole backlog. The two agree
only in steady state. Under PFC the arrivals never are steady: a paused port sends nothing, a resumed one
sends at line rate, so the backlog of one port swings through the queue, and a flow that shares the queue
with it sees its own bytes pile up behind each burst and drain while the port is paused. Backlog-proportional
sharing smooths that away (measured on the 4-flow case of docs/sim.md: an innocent flow's ingress count
stayed within 11-14 packets, so its port never reached XOFF, while the packet-level reference swings it from
5 to 15 packets and pauses it; with this FIFO it swings 6-15 and pauses, as there). It also drained a
finished flow's last bytes geometrically instead of within one sojourn.

Each queue is kept as cumulative-arrival curves: per segment (a flow's bytes waiting for one egress) the
bytes that ever arrived, recorded once per step for a window of steps, and the bytes that ever left. A
step's departures from an egress advance its head along the queue's total arrival curve; each segment's
departures are what arrived of it up to the new head, with the bytes that arrived within one step taken as
mixed in proportion. Bytes older than the window leave in proportion among the segments that still hold
them (the window covers the largest backlog PFC admits, so that is rare).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from tensorfabric.sim.network import Network

__all__ = ["EgressFifo", "window_steps"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
MAX_WINDOW = 512
"""Steps of arrival history kept: bounds memory (window x segments) on unbounded (PFC-off) queues."""


def window_steps(net: Network, step_s: float) -> int:
    """Steps of history that cover the longest sojourn PFC admits: a switch's ingress limits drained at the
    slowest egress rate."""
    finite = np.isfinite(net.limit_bytes) & (net.ingress_switch >= 0)
    per_switch = np.bincount(net.ingress_switch[finite], net.limit_bytes[finite], max(net.n_switches, 1))
    worst = float(per_switch.max(initial=0.0)) / float(net.cap_bytes_s.min()) if finite.any() else math.inf
    if not math.isfinite(worst):
        return MAX_WINDOW
    return int(min(MAX_WINDOW, max(8, math.ceil(worst / step_s) + 2)))


class EgressFifo:
    """The egress FIFOs of one run; :meth:`serve` is called once per step."""

    def __init__(self, seg_edge: I64, n_edges: int, window: int) -> None:
        n_s = seg_edge.shape[0]
        self._se = seg_edge
        self._n_e = n_edges
        self._d = window
        self._cols = np.arange(n_s)
        self._edges = np.arange(n_edges)
        self._cin = np.zeros(n_s)
        self._cout = np.zeros(n_s)
        self._eout = np.zeros(n_edges)
        self._hs = np.zeros((window, n_s))
        self._he = np.zeros((window, n_edges))
        self._head = np.zeros(n_edges, dtype=np.int64)
        self._t = 0

    def serve(self, arrived: F64, cap: F64, buf: F64) -> F64:
        """Bytes each segment sends this step.

        ``arrived``: bytes that joined each segment this step (already in ``buf``); ``cap``: bytes each edge
        may send; ``buf``: each segment's backlog, which bounds what it sends.
        """
        t, d, se = self._t, self._d, self._se
        self._cin += arrived
        ein = np.bincount(se, self._cin, self._n_e)
        row = t % d
        self._hs[row] = self._cin
        self._he[row] = ein
        self._t = t + 1
        target = np.minimum(self._eout + cap, ein)
        # The head only moves forward: first step (within the window) whose cumulative arrivals reach target.
        oldest = t - d + 1
        j = np.maximum(self._head, oldest)
        idx = np.flatnonzero(self._he[j % d, self._edges] < target)
        while idx.size:
            j[idx] += 1
            idx = idx[self._he[j[idx] % d, idx] < target[idx]]
        self._head = j
        p = j - 1
        hep = self._he[p % d, self._edges]
        # A head that moved into a later step starts from that step's start; one still in the same step (or at
        # the window's edge) goes on from where it left off, with that step's bytes mixed in proportion.
        new_block = (p >= max(oldest, 0)) & (hep > self._eout)
        lo_e = np.where(new_block, hep, self._eout)
        hi_e = self._he[j % d, self._edges]
        span = hi_e - lo_e
        f = np.where(span > 0.0, (target - lo_e) / np.where(span > 0.0, span, 1.0), 0.0)
        jr, pr = (j % d)[se], (p % d)[se]
        hi_s = self._hs[jr, self._cols]
        lo_s = np.where(new_block[se], self._hs[pr, self._cols], self._cout)
        dep = np.clip(lo_s + f[se] * (hi_s - lo_s) - self._cout, 0.0, buf)
        self._cout += dep
        self._eout = target
        return dep
