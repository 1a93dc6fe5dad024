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
        # Each port's egress where all its flows leave by one (-1 elsewhere): the ports whose XON crossings one
        # egress serializes. (A port feeding several egresses is not in lockstep with another in practice.)
        lo = np.full(len(net.edges), np.iinfo(np.int64).max)
        hi = np.full(len(net.edges), -1)
        np.minimum.at(lo, net.seg_in, net.seg_edge)
        np.maximum.at(hi, net.seg_in, net.seg_edge)
        self._one_egress = np.where(lo == hi, hi, -1)
        self._owed = np.zeros(len(net.edges))
        self._due: dict[int, list[tuple[npt.NDArray[np.intp], F64]]] = {}
        self._uniform = bool((self.steps == self.steps[0]).all())
        self._static = cfg.pfc.threshold == "static"
        self._run_f = np.zeros(len(net.edges))
        self._step0 = int(self.steps[0])

    def book(self, t: int, flipped: npt.NDArray[np.intp], before: F64, after: F64, thr: F64, paused: B) -> None:
        """Book the decisions of step ``t``: ``flipped`` edges changed state; ``before``/``after`` are their
        counters at the end of the last step and of this one, ``thr`` the threshold they crossed, ``paused`` the
        state they leave."""
        c0 = before[flipped]
        cross = thr[flipped] - c0
        rise = after[flipped] - c0
        if self._static:
            # The latch keeps the last counter on the far side of the threshold a flip crosses, so the rise is
            # never zero and the fraction is in (0, 1].
            cross /= rise
        else:  # a moving threshold can flip a port whose counter did not move
            np.divide(cross, rise, out=cross, where=rise != 0.0)
            np.minimum(np.maximum(cross, 0.0, out=cross), 1.0, out=cross)
        resumed = paused[flipped]
        n_resumed = int(np.count_nonzero(resumed))
        if n_resumed > 1:
            ports = flipped[resumed]
            egress = self._one_egress[ports]
            if np.count_nonzero(one := egress >= 0) > 1:
                shared = np.sort(egress[one])
                if (shared[1:] == shared[:-1]).any():  # two or more drain through one egress
                    res = resumed.nonzero()[0][one]
                    cross[res] = self._one_at_a_time(egress[one], flipped[res], cross[res])
        # What each edge is owed is kept as what its next switch can spend: sending time at a PAUSE (it sends on
        # for that much of the pipeline's steps), silence at an XON (it starts that much late). The physical
        # instant's distance after the pipeline's switch adds to it, whichever the kind; what is left below zero
        # is owed the other way, which is what the edge's next switch (of the other kind) spends.
        cross += self._late0[flipped]
        cross += self._owed[flipped]
        spend = np.maximum(cross, 0.0)
        self._owed[flipped] = spend - cross  # bounded: at most the lag's shortfall of a whole step
        if not self._uniform:
            if np.count_nonzero(now := spend > 0.0):
                self._spend(t, flipped[now], spend[now], resumed[now])
            return
        # The fraction of each step from the pipeline's switch on that each edge sends (a zero spend leaves the
        # pipeline's own 0 or 1); spend rarely reaches past the switch step, by a crossing late in its step.
        due = self._due
        at = t + self._step0
        due.setdefault(at, []).append((flipped, np.abs(resumed - np.minimum(spend, 1.0))))
        while spend.max() > 1.0:
            spend -= 1.0
            at += 1
            more = spend > 0.0
            flipped, spend, resumed = flipped[more], spend[more], resumed[more]
            due.setdefault(at, []).append((flipped, np.abs(resumed - np.minimum(spend, 1.0))))

    def _spend(self, t: int, edges: npt.NDArray[np.intp], spend: F64, resumed: B) -> None:
        """Schedule the fractions of the steps from the pipeline's switch on: ``spend`` steps still sending after a
        PAUSE, or still silent after an XON."""
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

    def _one_at_a_time(self, egress: I64, ports: npt.NDArray[np.intp], cross: F64) -> F64:
        """XON crossings of ports that drain through one egress (``egress``: each port's), at least one packet time
        apart, in the order they would come (ties: by port, a fixed arbitration order)."""
        order = np.lexsort((ports, cross, egress))
        g, c = egress[order], cross[order]
        start = np.empty(g.size, dtype=bool)
        start[0] = True
        np.not_equal(g[1:], g[:-1], out=start[1:])
        if start.all():
            return cross
        idx = np.arange(g.size)
        rank = idx - np.maximum.accumulate(idx * start)
        gap = self._packet[g]
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
        """Sending fraction per edge in step ``t`` where an edge switches there with time owed; None elsewhere.
        The array is reused by the next call."""
        if not self._due or (items := self._due.pop(t, None)) is None:
            return None
        run_f = self._run_f
        np.logical_not(paused, out=run_f)
        for edges, frac in items:
            run_f[edges] = frac
        return run_f
