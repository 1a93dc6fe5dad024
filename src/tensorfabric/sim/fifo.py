"""First-in first-out egress queues for the fluid engine: bytes leave in the order they arrived.

A switch egress is a FIFO, so what a flow gets of the link at time t is its share of the bytes at the *head*
of the queue -- those that arrived one sojourn earlier -- not its share of the whole backlog. The two agree
only in steady state. Under PFC the arrivals never are steady: a paused port sends nothing, a resumed one
sends at line rate, so the backlog of one port swings through the queue, and a flow that shares the queue
with it sees its own bytes pile up behind each burst and drain while the port is paused. Backlog-proportional
sharing smooths that away (measured on the four-flow case of docs/sim.md: the count of the ingress port that
carries a congested flow next to an innocent one stayed within 11-14 packets, so it never reached XOFF, while
the packet-level reference swings it from 5 to 15 packets and pauses it, innocent flow included; with this
FIFO it swings from 4 to 15 and pauses, as there). It also drained a finished flow's last bytes geometrically
instead of within one sojourn.

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
        return _pow2(MAX_WINDOW)
    return _pow2(min(MAX_WINDOW, max(8, math.ceil(worst / step_s) + 2)))


def _pow2(n: int) -> int:
    """Next power of two: the ring is indexed with a bit mask (an integer modulo costs 5x more per step)."""
    return 1 << (n - 1).bit_length()


class EgressFifo:
    """The egress FIFOs of one run; :meth:`serve` is called once per step."""

    def __init__(self, seg_edge: I64, n_edges: int, window: int) -> None:
        if window & (window - 1):
            raise ValueError(f"window {window} must be a power of two")
        self._se = seg_edge
        # Only queues that several segments share need the arrival order; a lone segment sends min(backlog, C).
        shared = np.bincount(seg_edge, minlength=n_edges)[seg_edge] >= 2
        self._sh = np.flatnonzero(shared)
        self._qe, q_se = np.unique(seg_edge[self._sh], return_inverse=True)
        self._qse = q_se.astype(np.int64)
        n_s, n_q = self._sh.shape[0], self._qe.shape[0]
        self._n_q = n_q
        self._d = d = window
        self._cin = np.zeros(n_s)
        self._cout = np.zeros(n_s)
        self._eout = np.zeros(n_q)
        # The cumulative arrivals after step t sit in ring slot t mod window, one row per queue and per shared
        # segment, at column 1 + slot. Column 0 repeats the last slot and column d + 1 the first, so the step
        # before a head's is one element before it, without a modulo. Heads are addressed by that element
        # (flat index row + slot); the flat views shifted by one element read the head's own step.
        self._he = np.zeros((n_q, d + 2))
        self._hs = np.zeros((n_s, d + 2))
        self._he_prev, self._hs_prev = self._he.reshape(-1), self._hs.reshape(-1)
        self._he_now, self._hs_now = self._he_prev[1:], self._hs_prev[1:]
        self._q_row = np.arange(n_q, dtype=np.int64) * (d + 2)
        # A segment's element is its queue's, moved to the segment's row.
        self._s_off = (np.arange(n_s, dtype=np.int64) - self._qse) * (d + 2)
        self._head = np.zeros(n_q, dtype=np.int64)
        """Per queue: the step whose arrivals hold the next byte to leave."""
        self._t = 0
        self._j_min = 0
        """A lower bound of the heads' minimum (they only move forward): the window test reads j.min() only when
        this bound is old enough to matter."""

    def serve(self, arrived: F64, cap: F64, buf: F64) -> F64:
        """Bytes each segment sends this step.

        ``arrived``: bytes that joined each segment this step (already in ``buf``); ``cap``: bytes each edge
        may send; ``buf``: each segment's backlog, which bounds what it sends.
        """
        out = np.minimum(buf, cap[self._se])
        if self._n_q:
            sh = self._sh
            out[sh] = self._serve_shared(arrived[sh], cap[self._qe], buf[sh])
        return out

    def _serve_shared(self, arrived: F64, cap: F64, buf: F64) -> F64:
        t, d, se, mask = self._t, self._d, self._qse, self._d - 1
        cin, cout, he, hs, j, q_row = self._cin, self._cout, self._he, self._hs, self._head, self._q_row
        he_now = self._he_now
        cin += arrived
        ein = np.bincount(se, cin, self._n_q)
        col = (t & mask) + 1
        he[:, col] = ein
        hs[:, col] = cin
        if col == d:
            he[:, 0] = ein
            hs[:, 0] = cin
        elif col == 1:
            he[:, d + 1] = ein
            hs[:, d + 1] = cin
        self._t = t + 1
        target = self._eout + cap
        np.minimum(target, ein, out=target)
        # The head only moves forward, to the first step (in the window) whose cumulative arrivals reach
        # target; the arrival curves only grow, so that is the head plus the steps still below target. Most
        # heads move by at most one step.
        at = q_row + (j & mask)
        need = he_now[at] < target
        j += need
        at += need
        hi_e = he_now[at]
        if np.count_nonzero(further := hi_e < target):
            # Further: count the window's steps below target (slots not written yet are zeros, below any
            # positive target).
            idx = further.nonzero()[0]
            j[idx] = t + 1 - d + (he.take(idx, axis=0)[:, 1:d + 1] < target[idx][:, None]).sum(axis=1)
            at = q_row + (j & mask)
            hi_e = he_now[at]
        old = None
        if t - d + 1 >= self._j_min and (j_min := int(j.min())) <= t - d + 1:
            # Keep the head one step inside the window, so that the step before it is known (from step d - 1
            # on, the slot before step 0 is the current step's).
            old = j <= t - d + 1
            j[old] = t - d + 2
            at = q_row + (j & mask)
            hi_e = he_now[at]
            self._j_min = t - d + 2
        elif t - d + 1 >= self._j_min:
            self._j_min = j_min
        at_s = at[se]
        at_s += self._s_off
        # A head that moved into a later step starts at that step's start; one still in the step it was in goes
        # on from where it left off: either way the bytes of one step leave mixed in proportion.
        lo_e = np.maximum(self._he_prev[at], self._eout)
        dep = self._hs_now[at_s]
        lo_s = np.maximum(self._hs_prev[at_s], cout)
        if old is not None and np.count_nonzero(stale := old & (lo_e > target)):
            # The head is older than the window: those bytes leave in proportion among the segments holding them.
            lo_e[stale] = self._eout[stale]
            lo_s = np.where(stale[se], cout, lo_s)
        g = target - lo_e
        g /= np.maximum(hi_e - lo_e, 1e-300)
        dep -= lo_s
        dep *= g[se]
        dep += lo_s
        dep -= cout
        np.maximum(dep, 0.0, out=dep)
        np.minimum(dep, buf, out=dep)
        cout += dep
        self._eout = target
        # An emptied queue's next byte can only come in a later step: its head waits at this one.
        j[target >= ein] = t
        return dep
