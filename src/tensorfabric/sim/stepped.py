"""The time-stepped fluid engine: one loop iteration per step, array operations over segments/edges/flows.

Order within a step (all bytes, per step of ``dt``), one method of :class:`_Stepper` per phase:

1. ``start_flows``: flows whose start time (or whose stage's predecessor) came begin sending;
2. ``admit``: bytes that left the upstream hop ``ds`` steps ago arrive at their switch; an ingress port above its
   admission limit (XOFF + headroom) drops the excess;
3. ``serve``: each egress queue serves up to ``C * dt`` unless its edge is paused, first in first out: each flow
   sends what it has at the head of the queue (:mod:`tensorfabric.sim.fifo`); departures move to the next hop
   (or are delivered), and their ACKs take their share of the reverse links;
4. ``inject``: sources inject at their DCQCN rate unless their NIC port is paused;
5. ``mark``: ECN marks at dequeue on the queue each departure leaves behind, and the reaction points update;
6. ``pfc``: every switch compares each ingress port's bytes with XOFF/XON; the decision reaches the upstream port
   after the cable delay plus the response delay, at the instant within a step that the crossing and the
   egress's packet-at-a-time service give (:mod:`tensorfabric.sim.pausetiming`);
7. ``finish_flows`` and ``record``: completions, the next stage's start, the time series and counter snapshots.

Conservation holds by construction: sent = delivered + dropped + buffered + on the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np
import numpy.typing as npt

from tensorfabric.sim.config import SimConfig
from tensorfabric.sim.ecn import mark_probability
from tensorfabric.sim.fifo import EgressFifo, window_steps
from tensorfabric.sim.network import Network
from tensorfabric.sim.pausetiming import PauseTiming
from tensorfabric.sim.pfc import pause_duration_s
from tensorfabric.sim.reaction import make_reaction_point
from tensorfabric.sim.trace import F64, Trace

__all__ = ["ENGINE", "SteppedEngine", "run_stepped"]

Bools = npt.NDArray[np.bool_]
_EPS = 1e-9
_TIE = 1e-3
"""Bytes: a counter this close to XOFF (XON) has reached it. Ports with identical histories then decide alike; float
noise of 1e-9 B would otherwise split an exact tie between them, one pausing a step before the other, and lock the
egress they share into an unequal split (3.225 against 3 S/C on test_port_level_fairness_two_tiers at a 1 us step)."""


class SteppedEngine:
    """The engine every configuration runs on (``applies`` always holds)."""

    name = "stepped"

    def applies(self, net: Network, cfg: SimConfig) -> str | None:
        return None

    def run(self, net: Network, cfg: SimConfig, *, advance: Callable[[float], None] | None = None) -> Trace:
        return run_stepped(net, cfg, advance=advance)


ENGINE = SteppedEngine()


def run_stepped(net: Network, cfg: SimConfig, *, advance: Callable[[float], None] | None = None) -> Trace:
    """Step the network until ``cfg.duration_s`` (or until every flow finished, if ``stop_when_idle``)."""
    s = _Stepper(net, cfg)
    dt, progress_every, idle_stop = s.dt, s.progress_every, cfg.stop_when_idle
    t = 0
    for t in range(s.n_steps):
        now = t * dt
        if now + _EPS >= s.next_ready:
            s.start_flows(now)
        arr = s.admit(t)
        dep, q_post, wire = s.serve(t, arr)
        inj = s.inject(t, wire)
        s.mark(t, dep, inj, q_post)
        s.pfc(t)
        s.finish_flows(now)
        s.record(t, now, q_post)
        if advance is not None and t % progress_every == 0:
            advance(progress_every)
        if idle_stop and s.n_done == s.n_f:
            break
    return s.trace(t + 1)


class _Stepper:
    """One run's arrays and constants; each public method is one phase of a step (see the module's docstring)."""

    def __init__(self, net: Network, cfg: SimConfig) -> None:
        self.net, self.cfg = net, cfg
        self.dt = dt = cfg.step_s
        self.n_f, self.n_e, self.n_s = net.size.shape[0], net.cap_bytes_s.shape[0], net.seg_flow.shape[0]
        fb = np.maximum(1, np.ceil((2 * net.path_prop_s + cfg.nic_delay_s) / dt)).astype(np.int64)
        cfg_rp = cfg.paper if cfg.dcqcn == "paper" else cfg.firmware
        self.rp = make_reaction_point(cfg.dcqcn, cfg_rp, net.line_bps, fb, dt, np.random.default_rng(cfg.seed))
        self.use_cc = cfg.dcqcn != "none"
        self.n_steps = max(1, round(cfg.duration_s / dt))
        self.depth = net.delay_depth
        self.timing = PauseTiming(net, cfg, dt)
        self.cap_dt = net.cap_bytes_s * dt
        # ACKs ride the reverse links: last step's deliveries take ack/mtu of their wire share there.
        self.with_acks = net.ack_edge.size > 0
        self.ack_ratio = cfg.ack_bytes * net.payload_fraction / cfg.mtu
        self.free_dt = self.cap_dt.copy()  # updated in place each step
        self.fifo = EgressFifo(net.seg_edge, self.n_e, window_steps(net, dt))
        self.shared_nic = np.bincount(net.src_nic_edge, minlength=self.n_e).max() > 1
        self.rec_every = max(1, self.n_steps // cfg.records)
        self.snap_every = 0 if cfg.counter_interval_s is None else max(1, round(cfg.counter_interval_s / dt))
        self.marks_needed = self.use_cc or bool(self.snap_every)
        self.kmin = cfg.ecn.kmin_bytes if cfg.ecn.enabled else np.inf
        self.progress_every = max(1, self.n_steps // 100)
        self._delays()
        self._flows()
        self._ports()

    def _delays(self) -> None:
        net = self.net
        self.pause_steps = pause_steps = self.timing.steps
        self.p_depth = int(pause_steps.max()) + 1
        self.pending = np.zeros((self.depth, self.n_s))
        # Most fabrics have one cable class per hop, so delays are uniform and a row index replaces fancy indexing.
        self.uniform_pause = bool((pause_steps == pause_steps[0]).all())
        self.pause_row = int(pause_steps[0])
        self.uniform_fwd = net.fwd_steps.size == 0 or bool((net.fwd_steps == net.fwd_steps[0]).all())
        self.fwd_row = int(net.fwd_steps[0]) if net.fwd_steps.size else 1
        self.uniform_inject = bool((net.inject_steps == net.inject_steps[0]).all())
        self.inject_row = int(net.inject_steps[0])
        # With one delay for forwarding and injection, each wire slot gets exactly one write per segment: the row
        # is the departures shifted by one segment (a flow's segments are consecutive), with the flows' first
        # segments overwritten by the injection. No scatter-add and no zeroing of consumed rows.
        self.shifted = (self.uniform_fwd and self.uniform_inject and self.fwd_row == self.inject_row
                        and np.array_equal(net.fwd_to, net.fwd_from + 1) and net.first_seg[0] == 0
                        and np.array_equal(net.first_seg[1:], net.last_seg[:-1] + 1))
        # A pause that takes effect after one step is the current state itself: no history, paused time = XOFF time.
        self.pause_now = self.uniform_pause and self.pause_row == 1

    def _flows(self) -> None:
        net, n_f = self.net, self.n_f
        self.buf = np.zeros(self.n_s)
        self.delivered, self.dropped, self.marked = np.zeros(n_f), np.zeros(n_f), np.zeros(n_f)
        self.finish = np.full(n_f, np.nan)
        self.begin = np.full(n_f, np.nan)
        self.ready = np.where(net.stage <= 1, net.start_s + np.where(net.stage == 1, net.gap_s, 0.0), np.inf)
        self.stage_left = np.bincount(net.stage, minlength=int(net.stage.max()) + 2)
        self.started = np.zeros(n_f, dtype=bool)
        self.finished = np.zeros(n_f, dtype=bool)
        self.zeros_f = np.zeros(n_f)
        self.rc_seen: F64 | None = None
        self.active_seen: Bools | None = None
        self.want_base = np.zeros(n_f)
        self.active = self.started & ~self.finished
        self.remaining = net.size.copy()
        self.goal_left = net.size * (1 - 1e-9)  # delivered bytes still needed: size less drops (no retransmission)
        self.next_ready = float(self.ready.min())
        self.n_done = 0
        self.s_t: list[float] = []
        self.s_q: list[npt.NDArray[np.float32]] = []
        self.s_p: list[Bools] = []
        self.s_r: list[npt.NDArray[np.float32]] = []
        self.s_d: list[npt.NDArray[np.float32]] = []
        self.snapshots: list[dict[str, F64]] = []

    def _ports(self) -> None:
        net, cfg, n_e = self.net, self.cfg, self.n_e
        self.ing_prev = np.zeros(n_e)
        self.ing = np.zeros(n_e)
        self.state = net.forced_pause.copy()
        self.hist = np.zeros((self.p_depth, n_e), dtype=bool)
        self.hist[:] = net.forced_pause
        self.paused = net.forced_pause.copy()
        self.e_idx = np.arange(n_e)
        self.pfc_on = cfg.pfc.enabled
        self.dynamic = cfg.pfc.threshold == "dynamic"
        self.xoff = np.full(n_e, cfg.pfc.xoff_bytes)
        self.xon = self.xoff - cfg.pfc.xon_offset_bytes
        self.running: F64 | Bools = ~self.paused  # per edge: sends this step (a fraction where PAUSE/XON acts)
        self.any_forced = bool(net.forced_pause.any())
        self.room = net.limit_bytes.copy()
        # Static thresholds: a port can only overflow when it is within a step's worth of line rate of its limit; one
        # byte of slack keeps this test a superset of ``limit - ing < cap_dt`` whatever the rounding.
        self.near_limit = net.limit_bytes - self.cap_dt - 1.0
        # Paused/XOFF time is counted in steps (cheaper per step) and scaled by dt when read.
        self.edge_drops, self.paused_n, self.xoff_n = np.zeros(n_e), np.zeros(n_e), np.zeros(n_e)
        # XOFF and XON counts from the number of state changes: they alternate, from the start state (a stuck NIC
        # starts in XOFF), so on - off = state - start. One add per step that changes anything instead of four.
        self.flips, self.start_on, self.qmax = np.zeros(n_e), net.forced_pause.astype(np.float64), np.zeros(n_e)
        self.edge_marks, self.edge_tx = np.zeros(n_e), np.zeros(n_e)
        # The latch: a paused port resumes at XON, a running one pauses at XOFF (within _TIE of them).
        self.thr = np.where(self.state, self.xon + _TIE, self.xoff - _TIE)

    # -- the phases of one step --------------------------------------------------------------------------------
    def start_flows(self, now: float) -> None:
        started, ready = self.started, self.ready
        newly = ~started & (ready <= now + _EPS)
        started |= newly
        self.begin[newly] = now
        waiting = ready[~started]
        self.next_ready = float(waiting.min()) if waiting.size else np.inf
        self.active = started & ~self.finished

    def admit(self, t: int) -> F64:
        """This step's arrivals (a view of the wire row, consumed by ``serve``), less what full ports drop."""
        net, n_e = self.net, self.n_e
        arr: F64 = self.pending[t % self.depth]
        # One step brings at most a step's worth of line rate into a port; only near the limit can it overflow.
        if self.dynamic:
            near = np.count_nonzero(self.room < self.cap_dt)
        elif near := np.count_nonzero(self.ing > self.near_limit):
            self.room = net.limit_bytes - self.ing
        if near and np.count_nonzero((in_arr := np.bincount(net.seg_in, arr, n_e)) > self.room):
            over = in_arr - self.room
            frac_drop = np.where(over > 0, np.minimum(1.0, over / np.maximum(in_arr, _EPS)), 0.0)
            drop = arr * frac_drop[net.seg_in]
            arr -= drop
            drop_f = np.bincount(net.seg_flow, drop, self.n_f)
            self.dropped += drop_f
            self.goal_left -= drop_f
            self.edge_drops += np.bincount(net.seg_in, drop, n_e)
        return arr

    def serve(self, t: int, arr: F64) -> tuple[F64, F64, F64 | None]:
        """Departures per segment, the queues they leave behind per edge, and the wire row (shifted layout)."""
        net, buf, depth = self.net, self.buf, self.depth
        buf += arr
        dep = self.fifo.serve(arr, self.free_dt * self.running, buf)
        buf -= dep
        q_post = cast(F64, np.bincount(net.seg_edge, buf, self.n_e))
        np.maximum(self.qmax, q_post, out=self.qmax)
        wire = None
        if self.shifted:
            wire = self.pending[(t + self.fwd_row) % depth]
            wire[1:] = dep[:-1]
        else:
            arr.fill(0.0)
            if self.uniform_fwd:
                self.pending[(t + self.fwd_row) % depth, net.fwd_to] += dep[net.fwd_from]
            else:
                self.pending[(t + net.fwd_steps) % depth, net.fwd_to] += dep[net.fwd_from]
        got = dep[net.last_seg]
        self.delivered += got
        if self.with_acks:
            np.subtract(self.cap_dt, np.bincount(net.ack_edge, (got * self.ack_ratio)[net.ack_flow], self.n_e),
                        out=self.free_dt)
            np.maximum(self.free_dt, 0.0, out=self.free_dt)
        return dep, q_post, wire

    def inject(self, t: int, wire: F64 | None) -> F64:
        net, rp, active, free_dt = self.net, self.rp, self.active, self.free_dt
        if rp.rc is not self.rc_seen or active is not self.active_seen:  # rates change only on updates and events
            self.rc_seen, self.active_seen = rp.rc, active
            self.want_base = rp.rc * (self.dt / 8 * net.payload_fraction) * active
        want = self.want_base
        if self.shared_nic:
            load = np.bincount(net.src_nic_edge, want, self.n_e)
            scale = np.minimum(1.0, free_dt / np.maximum(load, _EPS))
            want = want * scale[net.src_nic_edge]
        elif self.with_acks:  # one flow per NIC: it gets what the ACKs leave of its link
            want = np.minimum(want, free_dt[net.src_nic_edge])
        inj = np.minimum(want * self.running[net.src_nic_edge], self.remaining)
        self.remaining -= inj
        if wire is not None:
            wire[net.first_seg] = inj
        elif self.uniform_inject:
            self.pending[(t + self.inject_row) % self.depth, net.first_seg] += inj
        else:
            self.pending[(t + net.inject_steps) % self.depth, net.first_seg] += inj
        return inj

    def mark(self, t: int, dep: F64, inj: F64, q_post: F64) -> None:
        if not self.marks_needed:
            return
        net, rp, n_e, snap = self.net, self.rp, self.n_e, self.snap_every
        if np.maximum.reduce(q_post) <= self.kmin:
            # No queue above Kmin: nothing is marked this step.
            if self.use_cc:
                rp.step(t, self.zeros_f, self.zeros_f, inj, self.active)
            if snap:
                self.edge_tx += np.bincount(net.seg_edge, dep, n_e)
                self.edge_tx += np.bincount(net.src_nic_edge, inj, n_e)
            return
        p_seg = mark_probability(q_post, self.cfg.ecn)[net.seg_edge]
        marks = dep * p_seg / self.cfg.mtu
        marked_f = cast(F64, np.bincount(net.seg_flow, marks, self.n_f))
        self.marked += marked_f
        if self.use_cc:
            if rp.needs_path_probability:
                log_keep = np.bincount(net.seg_flow, np.log1p(-np.minimum(p_seg, 1 - 1e-9)), self.n_f)
                p_path: F64 = -np.expm1(log_keep)
            else:
                p_path = marked_f
            rp.step(t, p_path, marked_f, inj, self.active)
        if snap:
            self.edge_marks += np.bincount(net.seg_edge, marks, n_e)
            self.edge_tx += np.bincount(net.seg_edge, dep, n_e)
            self.edge_tx += np.bincount(net.src_nic_edge, inj, n_e)

    def pfc(self, t: int) -> None:
        net, cfg, state = self.net, self.cfg, self.state
        self.ing_prev, ing = self.ing, cast(F64, np.bincount(net.seg_in, self.buf, self.n_e))
        self.ing = ing
        if self.pfc_on:
            if self.dynamic:
                used = np.bincount(net.seg_switch, self.buf, net.n_switches)
                free = np.maximum(cfg.pfc.buffer_bytes - used, 0.0)
                self.xoff = np.where(net.ingress_switch >= 0, cfg.pfc.dynamic_alpha * free[net.ingress_switch], np.inf)
                self.xon = self.xoff - cfg.pfc.xon_offset_bytes
                self.room = self.xoff + net.headroom_bytes - ing  # admission follows the moving threshold
                self.thr = np.where(state, self.xon + _TIE, self.xoff - _TIE)
            # Latch: XOFF above the threshold, XON only once below threshold - offset (thr holds whichever applies).
            new_state = ing > self.thr
            if self.any_forced:
                new_state |= net.forced_pause
        else:
            new_state = net.forced_pause
        if np.count_nonzero(flip := new_state != state):
            self.flips += flip
            self.timing.book(t, np.flatnonzero(flip), self.ing_prev, ing, self.thr, state)
            if not self.dynamic:
                self.thr = np.where(new_state, self.xon + _TIE, self.xoff - _TIE)
        self.state = new_state
        self.xoff_n += new_state
        if self.pause_now:
            paused = new_state
        else:
            self.hist[t % self.p_depth] = new_state
            if self.uniform_pause:
                # A view is safe: that row is next written p_depth - pause_row >= 1 steps after its last use.
                paused = self.hist[(t + 1 - self.pause_row) % self.p_depth]
            else:
                paused = self.hist[(t + 1 - self.pause_steps) % self.p_depth, self.e_idx]
            self.paused_n += paused
        self.paused = paused
        frac = self.timing.due(t + 1, paused)
        self.running = frac if frac is not None else ~paused

    def finish_flows(self, now: float) -> None:
        done = self.delivered >= self.goal_left
        if not (n_new := int(np.count_nonzero(done))):
            return
        net, dt = self.net, self.dt
        self.n_done += n_new
        self.goal_left[done] = np.inf
        self.finished |= done
        self.active = self.started & ~self.finished
        self.finish[done] = now + dt + net.ack_delay_s[done]
        for stage in np.unique(net.stage[done]):
            self.stage_left[stage] -= int(np.count_nonzero(net.stage[done] == stage))
            if stage > 0 and self.stage_left[stage] == 0:
                nxt = net.stage == stage + 1
                self.ready[nxt] = np.maximum(net.start_s[nxt], now + dt + net.gap_s[nxt])
                self.next_ready = min(self.next_ready, float(self.ready[nxt].min(initial=np.inf)))

    def record(self, t: int, now: float, q_post: F64) -> None:
        dt = self.dt
        if t % self.rec_every == 0:
            self.s_t.append(now + dt)
            self.s_q.append(q_post.astype(np.float32))
            self.s_p.append(self.paused.copy())
            self.s_r.append(np.where(self.active, self.rp.rc, 0.0).astype(np.float32))
            self.s_d.append(self.delivered.astype(np.float32))
        if self.snap_every and (t + 1) % self.snap_every == 0:
            rp, flips, state, start_on = self.rp, self.flips, self.state, self.start_on
            self.snapshots.append({
                "time": np.array([round((t + 1) * dt, 12)]),
                "edge_paused_s": (self.xoff_n if self.pause_now else self.paused_n) * dt,
                "edge_xoff_s": self.xoff_n * dt,
                "edge_on": _xoff_count(flips, state, start_on), "edge_off": _xon_count(flips, state, start_on),
                "edge_drops": self.edge_drops.copy(),
                "edge_marks": self.edge_marks.copy(), "edge_tx": self.edge_tx.copy(), "cnp_sent": rp.cnp_sent.copy(),
                "cnp_handled": rp.cnp_handled.copy(), "marked": self.marked.copy(), "queue": q_post.copy(),
                "paused": self.paused.astype(np.float64),
            })

    # -- the end of the run ------------------------------------------------------------------------------------
    def trace(self, steps: int) -> Trace:
        net, dt, depth, pending, rp = self.net, self.dt, self.depth, self.pending, self.rp
        paused_n = self.xoff_n.copy() if self.pause_now else self.paused_n
        if self.shifted:  # rows consumed and not written since hold stale departures: only the last fwd_row are wired
            wired = {(s + self.fwd_row) % depth for s in range(max(0, steps - self.fwd_row), steps)}
            for row in range(depth):
                if row not in wired:
                    pending[row] = 0.0
        # Bytes still inside the network, counted from the buffers and the wires, not from the difference.
        in_network = cast(F64, np.bincount(net.seg_flow, self.buf + pending.sum(axis=0), self.n_f))
        flips, state, start_on = self.flips, self.state, self.start_on
        return Trace(
            steps=steps, sim_time_s=steps * dt, sent=net.size - self.remaining, delivered=self.delivered,
            dropped=self.dropped, buffered=in_network, finish_s=self.finish, begin_s=self.begin,
            cnp_sent=rp.cnp_sent.copy(), cnp_handled=rp.cnp_handled.copy(), marked_pkts=self.marked,
            edge_drops=self.edge_drops, edge_paused_s=paused_n * dt, edge_xoff_s=self.xoff_n * dt,
            edge_xoff_on=_xoff_count(flips, state, start_on), edge_xoff_off=_xon_count(flips, state, start_on),
            edge_queue_max=self.qmax,
            edge_refresh_s=np.array([pause_duration_s(self.cfg.pfc.pause_quanta, e.rate_bps) / 2 for e in net.edges]),
            series_t=np.array(self.s_t), series_queue=np.array(self.s_q), series_paused=np.array(self.s_p),
            series_rate=np.array(self.s_r), series_delivered=np.array(self.s_d), snapshots=self.snapshots,
        )


def _xoff_count(flips: F64, state: Bools, start_on: F64) -> F64:
    """XOFF episodes per edge (the start state counts as one): exact, the counts being small integers."""
    return start_on + (flips + state - start_on) / 2


def _xon_count(flips: F64, state: Bools, start_on: F64) -> F64:
    return (flips - state + start_on) / 2
