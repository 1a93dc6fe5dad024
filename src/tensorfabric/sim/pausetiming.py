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
should still send, negative where it should not have. It is spent in the step where the pipeline next switches
that edge, as the fraction of that step the edge sends (:meth:`due`): a PAUSE spends what is owed positive, an XON
what is owed negative. Where the instant falls after the pipeline's switch that is exact; where it fell before
(within the step already served) it is spent at the edge's next switch, which keeps every burst as long as its
thresholds make it. Nothing is done in steps where no edge switches.
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
_MAX_OWED = 8.0
"""Steps of sending time spent at one switch at most (a bound on bookkeeping, far above what one crossing books)."""


class PauseTiming:
    """Sub-step timing of PAUSE/XON for one run: :meth:`book` after each step's decisions, :meth:`due` for a
    step's sending fractions."""

    def __init__(self, net: Network, cfg: SimConfig, dt: float) -> None:
        prop = np.array([e.cable_m for e in net.edges]) * PROPAGATION_S_PER_M
        rate = np.array([e.rate_bps for e in net.edges])
        resp = np.array([response_delay_s(r) if cfg.pfc.response_s is None else cfg.pfc.response_s for r in rate])
        data = np.maximum(1, np.ceil(prop / dt - _EPS))
        self.lag: F64 = (2 * prop + resp) / dt - data
        self.steps: I64 = np.maximum(1, np.floor(self.lag + _EPS)).astype(np.int64)
        """Per edge: steps from the decision to the pipeline's switch (the physical instant is at or after it
        wherever the lag allows)."""
        self._late0 = self.lag - self.steps
        self._packet = (cfg.mtu + cfg.header_bytes) * 8 / rate / dt
        """Per edge (as an egress): one packet's wire time, in steps."""
        self._switch = net.ingress_switch
        self._n_edges = len(net.edges)
        # Each port's egress, where all its flows leave by one.
        lo = np.full(len(net.edges), np.iinfo(np.int64).max)
        hi = np.full(len(net.edges), -1)
        np.minimum.at(lo, net.seg_in, net.seg_edge)
        np.maximum.at(hi, net.seg_in, net.seg_edge)
        self._one_egress = np.where(lo == hi, hi, -1)
        self._owed = np.zeros(len(net.edges))
        self._due: dict[int, list[tuple[npt.NDArray[np.intp], F64]]] = {}
        self._uniform = bool((self.steps == self.steps[0]).all())
        self._step0 = int(self.steps[0])

    def book(self, t: int, flipped: npt.NDArray[np.intp], before: F64, after: F64, thr: F64, paused: B) -> None:
        """Book the decisions of step ``t``: ``flipped`` edges changed state; ``before``/``after`` are their
        counters at the end of the last step and of this one, ``thr`` the threshold they crossed, ``paused`` the
        state they leave."""
        c0 = before[flipped]
        cross = thr[flipped] - c0
        rise = after[flipped] - c0
        np.divide(cross, rise, out=cross, where=rise != 0.0)
        np.minimum(np.maximum(cross, 0.0, out=cross), 1.0, out=cross)
        resumed = paused[flipped]
        n_resumed = int(np.count_nonzero(resumed))
        if n_resumed > 1:
            ports = flipped[resumed]
            sw = np.sort(self._switch[ports])
            if (sw[1:] == sw[:-1]).any():  # two or more at one switch: they may share an egress
                cross[resumed] = self._one_at_a_time(ports, cross[resumed])
        # Owed sending time, signed the way this switch spends it: a PAUSE what is owed positive (the edge sends
        # on for that much of the pipeline's steps), an XON what is owed negative (it starts that much late). The
        # physical instant's distance after the pipeline's switch adds to it; what is owed the other way waits.
        cross += self._late0[flipped]
        owed = self._owed[flipped]
        if n_resumed:
            owed[resumed] *= -1.0
        cross += owed
        spend = np.minimum(np.maximum(cross, 0.0), _MAX_OWED)
        cross -= spend
        if n_resumed:
            cross[resumed] *= -1.0
        self._owed[flipped] = cross
        if np.count_nonzero(now := spend > 0.0):
            self._spend(t, flipped[now], spend[now], resumed[now])

    def _spend(self, t: int, edges: npt.NDArray[np.intp], spend: F64, resumed: B) -> None:
        """Schedule the fractions of the steps from the pipeline's switch on: ``spend`` steps still sending after a
        PAUSE, or still silent after an XON."""
        if spend.max() <= 1.0 and self._uniform:  # the common case: within the switch step
            self._due.setdefault(t + self._step0, []).append((edges, np.where(resumed, 1.0 - spend, spend)))
            return
        at = t + self.steps[edges]
        for k in range(int(np.ceil(spend.max()))):
            part = np.minimum(spend - k, 1.0)
            frac = np.where(resumed, 1.0 - part, part)
            keep = part > 0.0
            if not keep.all():
                edges, frac, at, spend, resumed = edges[keep], frac[keep], at[keep], spend[keep], resumed[keep]
            for step in np.unique(at).tolist():
                sel = at == step
                self._due.setdefault(step + k, []).append((edges[sel], frac[sel]))

    def _one_at_a_time(self, ports: npt.NDArray[np.intp], cross: F64) -> F64:
        """XON crossings of ports that drain through one egress, at least one packet time apart, in the order
        they would come (ties: by port, a fixed arbitration order). A port whose flows leave by several egresses
        is taken to share one with the other such ports of its switch (the bytes of its flows are interleaved with
        theirs on the switch's uplinks)."""
        egress = self._one_egress[ports]
        multi = egress < 0
        egress[multi] = self._n_edges + self._switch[ports[multi]]
        order = np.lexsort((ports, cross, egress))
        g, c = egress[order], cross[order]
        start = np.empty(g.size, dtype=bool)
        start[0] = True
        np.not_equal(g[1:], g[:-1], out=start[1:])
        if start.all():
            return cross
        idx = np.arange(g.size)
        rank = idx - np.maximum.accumulate(idx * start)
        gap = self._packet[np.where(g < self._n_edges, g, ports[order])]  # the egress's packet time (or the port's)
        gap *= rank
        # c'_i = max(c_i, c'_(i-1) + gap) within a group is i*gap + the running max of c_j - j*gap.
        shift = np.cumsum(start) * 1e6  # keeps the running max inside each group
        c -= gap
        c += shift
        np.maximum.accumulate(c, out=c)
        c -= shift
        c += gap
        cross[order] = c
        return cross

    def due(self, t: int, paused: B) -> F64 | None:
        """Sending fraction per edge in step ``t`` where an edge switches there with time owed; None elsewhere."""
        if not self._due or (items := self._due.pop(t, None)) is None:
            return None
        run_f = (~paused).astype(np.float64)
        for edges, frac in items:
            run_f[edges] = frac
        return run_f
