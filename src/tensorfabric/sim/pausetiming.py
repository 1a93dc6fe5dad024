"""When a PAUSE or XON takes effect, to within a fraction of a step, for the stepped engine.

The engine compares each ingress port's counter with XOFF/XON at the end of every step. Acting on that at a step
boundary quantizes every burst a port sends between XON and PAUSE to whole steps, and that is not a small error:
with the step near the pause loop (2 us against 2.3 us at 100G with 1 us hops) the bursts of ports with the same
thresholds round differently, and an egress they share splits unequally. Two things set the physical instant:

* **Where in the step the counter crossed.** Within a step bytes arrive and leave at constant rates, so the counter
  moves linearly from its value at the end of the last step to its value now; it crossed at fraction f of the step.
  The upstream port obeys at f plus its *lag*: the frame's cable and response delay, plus the cable delay the
  upstream's bytes still need, less the whole steps the engine already charges them for that cable.
* **One packet at a time.** An egress FIFO sends one packet at a time, so ports whose bytes drain through it
  together do not cross XON together: each crossing waits for that port's own packet to leave, at least one
  packet time after the one before. A fluid drains them in exact proportion, so identical ports would cross XON at
  the same instant, resume together and stay in lockstep for ever, queueing as one joint block; a packet FIFO
  breaks that tie at its first round (measured: three identical NIC ports beside one uplink port on one egress got
  4.31 S/C each in lockstep where the packet-level reference gives 4.01, the closed form 4).

The engine keeps its whole-step pause pipeline (``steps``: the new state from that step on) and this module books
the difference from the physical instant as *sending time owed*, per edge, in steps: positive where the port
should still send (spent in its next paused steps), negative where it should not have (taken from its next sending
steps). Where the instant falls after the pipeline's switch, the owed time is spent at once, which is exact;
where it fell before (within the step already served), it is spent at the port's next switch, which keeps every
burst as long as its thresholds make it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tensorfabric.sim.config import SimConfig
from tensorfabric.sim.network import Network
from tensorfabric.sim.pfc import PROPAGATION_S_PER_M, response_delay_s

__all__ = ["PauseTiming"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
_EPS = 1e-9
_MAX_OWED = 4.0
"""Steps of sending time one edge may owe either way (a bound on bookkeeping, far above what one crossing books)."""


class PauseTiming:
    """Sub-step timing of PAUSE/XON for one run: :meth:`book` after each step's decisions, :meth:`fractions` for the
    next step's sending fractions."""

    def __init__(self, net: Network, cfg: SimConfig, dt: float) -> None:
        prop = np.array([e.cable_m for e in net.edges]) * PROPAGATION_S_PER_M
        rate = np.array([e.rate_bps for e in net.edges])
        resp = np.array([response_delay_s(r) if cfg.pfc.response_s is None else cfg.pfc.response_s for r in rate])
        data = np.maximum(1, np.ceil(prop / dt - _EPS))
        self.lag: F64 = (2 * prop + resp) / dt - data
        self.steps: I64 = np.maximum(1, np.floor(self.lag + _EPS)).astype(np.int64)
        """Per edge: steps from the decision to the pipeline's switch (the physical instant is at or after it
        wherever the lag allows)."""
        self._packet = (cfg.mtu + cfg.header_bytes) * 8 / rate / dt
        """Per edge (as an egress): one packet's wire time, in steps."""
        self._seg_in, self._seg_edge = net.seg_in, net.seg_edge
        self.owed = np.zeros(len(net.edges))
        self.n_owed = 0

    def book(self, flipped: npt.NDArray[np.intp], before: F64, after: F64, thr: F64, paused: B, buf: F64) -> None:
        """Book the decisions of this step: ``flipped`` edges changed state; ``before``/``after`` are their
        counters at the end of the last step and of this one, ``thr`` the threshold they crossed, ``paused`` the
        state they leave, ``buf`` the bytes of every segment now."""
        c0, c1 = before[flipped], after[flipped]
        rise = c1 - c0
        cross = np.divide(thr[flipped] - c0, rise, out=np.ones_like(rise), where=np.abs(rise) > _EPS)
        np.clip(cross, 0.0, 1.0, out=cross)
        resumed = paused[flipped]
        if np.count_nonzero(resumed) > 1:
            cross[resumed] = self._one_at_a_time(flipped[resumed], cross[resumed], buf)
        late = cross + self.lag[flipped] - self.steps[flipped]  # physical instant after the pipeline's switch
        # A PAUSE that comes late leaves sending time owed; an XON that comes late, silence.
        self.owed[flipped] += np.where(resumed, -late, late)
        np.clip(self.owed, -_MAX_OWED, _MAX_OWED, out=self.owed)
        self.n_owed = int(np.count_nonzero(self.owed))

    def _one_at_a_time(self, ports: npt.NDArray[np.intp], cross: F64, buf: F64) -> F64:
        """XON crossings of ports that drain through one egress, at least one packet time apart, in the order
        they would come (ties: by port, a fixed arbitration order)."""
        seg = np.flatnonzero(np.isin(self._seg_in, ports))
        # Each port's egress: the one that holds most of its bytes.
        by = np.lexsort((buf[seg], self._seg_in[seg]))
        s_port = self._seg_in[seg][by]
        last = np.r_[s_port[1:] != s_port[:-1], True]
        egress_of = dict(zip(s_port[last].tolist(), self._seg_edge[seg][by][last].tolist(), strict=True))
        egress = np.array([egress_of.get(p, -1 - i) for i, p in enumerate(ports.tolist())], dtype=np.int64)
        order = np.lexsort((ports, cross, egress))
        g, c = egress[order], cross[order]
        start = np.r_[True, g[1:] != g[:-1]]
        if start.all():
            return cross
        first = np.maximum.accumulate(np.where(start, np.arange(g.size), 0))
        rank = np.arange(g.size) - first
        gap = np.where(egress[order] >= 0, self._packet[np.maximum(egress[order], 0)], 0.0)
        # c'_i = max(c_i, c'_(i-1) + gap) within a group is i*gap + the running max of c_j - j*gap.
        shift = np.cumsum(start) * 1e6  # keeps the running max inside each group
        v = np.maximum.accumulate(c - rank * gap + shift) - shift + rank * gap
        out = np.empty_like(cross)
        out[order] = v
        return out

    def fractions(self, running: B) -> F64:
        """This step's sending fraction per edge: the pipeline's state, with owed time spent (positive where the
        edge is paused, negative where it sends; at most the whole step)."""
        run_f = running.astype(np.float64)
        owed = self.owed
        ce = np.flatnonzero(owed)
        base = run_f[ce]
        new = np.clip(base + owed[ce], 0.0, 1.0)
        left = owed[ce] - (new - base)
        left[np.abs(left) < 1e-12] = 0.0
        owed[ce] = left
        run_f[ce] = new
        self.n_owed = int(np.count_nonzero(owed))
        return run_f
