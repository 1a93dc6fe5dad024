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
_PROBE = np.arange(1, 9)
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
        self._d = window
        self._cin = np.zeros(n_s)
        self._cout = np.zeros(n_s)
        self._eout = np.zeros(n_q)
        # Row t mod window holds the cumulative arrivals after step t, per shared segment and per queue (flat,
        # for np.take: the heads of most queues sit in the same few rows, so the gathers stay cache-local).
        self._hs = np.zeros(window * n_s)
        self._he = np.zeros(window * n_q)
        self._cols = np.arange(n_s)
        self._queues = np.arange(n_q)
        self._head = np.zeros(n_q, dtype=np.int64)
        """Per queue: the step whose arrivals hold the next byte to leave."""
        self._t = 0

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
        cin, cout, hs, he, j = self._cin, self._cout, self._hs, self._he, self._head
        cols, queues, n_s, n_q = self._cols, self._queues, self._cols.shape[0], self._n_q
        cin += arrived
        ein = np.bincount(se, cin, n_q)
        row = t & mask
        hs[row * n_s:(row + 1) * n_s] = cin
        he[row * n_q:(row + 1) * n_q] = ein
        self._t = t + 1
        target = self._eout + cap
        np.minimum(target, ein, out=target)
        # The head only moves forward, to the first step (in the window) whose cumulative arrivals reach
        # target. Most heads move one step.
        jr = j & mask
        hi_e = he.take(jr * n_q + queues)
        need = hi_e < target
        if np.count_nonzero(need):
            j += need
            jr = j & mask
            hi_e = he.take(jr * n_q + queues)
            if np.count_nonzero(need := hi_e < target):
                idx = np.flatnonzero(need)
                # The next few steps first (rows past the current step would be old ones: read step t there).
                ahead = np.minimum(j[idx, None] + _PROBE, t)
                below = np.count_nonzero(he.take((ahead & mask) * n_q + idx[:, None]) < target[idx, None], axis=1)
                j[idx] += below + 1
                if np.count_nonzero(far := below == _PROBE.size):
                    # The rest by counting the window's steps below target (the curves only grow; rows not
                    # written yet are zeros, below any positive target).
                    far_idx = idx[far]
                    j[far_idx] = t + 1 - d + np.count_nonzero(he.reshape(d, n_q)[:, far_idx] < target[far_idx], axis=0)
                jr[idx] = j[idx] & mask
                hi_e[idx] = he.take(jr[idx] * n_q + idx)
        old = None
        if t >= d - 1 and int(j.min()) <= t - d + 1:
            # Keep the head one step inside the window, so that the step before it is known (from step d - 1
            # on, the row before step 0 is the current step's).
            old = j <= t - d + 1
            j[old] = t - d + 2
            jr[old] = j[old] & mask
            hi_e[old] = he.take(jr[old] * n_q + queues[old])
        pr = (jr - 1) & mask
        # A head that moved into a later step starts at that step's start; one still in the step it was in goes
        # on from where it left off: either way the bytes of one step leave mixed in proportion.
        lo_e = np.maximum(he.take(pr * n_q + queues), self._eout)
        lo_s = np.maximum(hs.take(pr.take(se) * n_s + cols), cout)
        if old is not None and np.count_nonzero(stale := old & (lo_e > target)):
            # The head is older than the window: those bytes leave in proportion among the segments holding them.
            lo_e[stale] = self._eout[stale]
            lo_s = np.where(stale[se], cout, lo_s)
        g = target - lo_e
        g /= np.maximum(hi_e - lo_e, 1e-300)
        dep = hs.take(jr.take(se) * n_s + cols)
        dep -= lo_s
        dep *= g[se]
        dep += lo_s
        dep -= cout
        np.maximum(dep, 0.0, out=dep)
        np.minimum(dep, buf, out=dep)
        cout += dep
        self._eout = target
        # An emptied queue's next byte can only come in a later step: its head waits at this one.
        np.copyto(j, t, where=target >= ein)
        return dep
