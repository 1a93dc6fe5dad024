"""The time-stepped fluid engine: one loop iteration per step, array operations over segments/edges/flows.

Order within a step (all bytes, per step of ``dt``):

1. bytes that left the upstream hop ``ds`` steps ago arrive at their switch; an ingress port above its
   admission limit (XOFF + headroom) drops the excess;
2. each egress queue serves up to ``C * dt`` unless its edge is paused, first in first out: each flow sends
   what it has at the head of the queue (:mod:`tensorfabric.sim.fifo`), and ECN marks at dequeue on the
   queue it leaves behind;
3. departures move to the next hop (or are delivered), sources inject at their DCQCN rate unless their
   NIC port is paused, and the reaction points update;
4. every switch compares each ingress port's bytes with XOFF/XON; the decision reaches the upstream port
   after the cable delay plus the response delay, at the instant within a step that the crossing and the
   egress's packet-at-a-time service give (:mod:`tensorfabric.sim.pausetiming`).

Conservation holds by construction: sent = delivered + dropped + buffered + on the wire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import numpy.typing as npt

from tensorfabric.errors import InputError
from tensorfabric.sim.config import SimConfig
from tensorfabric.sim.ecn import mark_probability
from tensorfabric.sim.events import applies, run_events
from tensorfabric.sim.fifo import EgressFifo, window_steps
from tensorfabric.sim.network import Network
from tensorfabric.sim.pausetiming import PauseTiming
from tensorfabric.sim.pfc import pause_duration_s
from tensorfabric.sim.reaction import make_reaction_point

__all__ = ["Trace", "run"]

F64 = npt.NDArray[np.float64]
_EPS = 1e-9
_TIE = 1e-3
"""Bytes: a counter this close to XOFF (XON) has reached it. Ports with identical histories then decide alike; float
noise of 1e-9 B would otherwise split an exact tie between them, one pausing a step before the other, and lock the
egress they share into an unequal split (3.225 against 3 S/C on test_port_level_fairness_two_tiers at a 1 us step)."""


@dataclass(frozen=True)
class Trace:
    """What a run leaves behind: final per-flow/per-edge totals, time series and counter snapshots."""

    steps: int
    sim_time_s: float
    sent: F64
    delivered: F64
    dropped: F64
    buffered: F64
    """Per flow: bytes still in switch buffers or on the wires at the end (counted, not derived)."""
    finish_s: F64
    begin_s: F64
    cnp_sent: F64
    cnp_handled: F64
    marked_pkts: F64
    edge_drops: F64
    edge_paused_s: F64
    edge_xoff_s: F64
    edge_xoff_on: F64
    edge_xoff_off: F64
    edge_queue_max: F64
    edge_refresh_s: F64
    series_t: F64
    series_queue: npt.NDArray[np.float32]
    series_paused: npt.NDArray[np.bool_]
    series_rate: npt.NDArray[np.float32]
    series_delivered: npt.NDArray[np.float32]
    snapshots: list[dict[str, F64]] = field(default_factory=list)
    engine: str = "stepped"
    """Which engine produced it: ``stepped`` or ``events`` (see ``SimConfig.engine``)."""


def run(net: Network, cfg: SimConfig, *, advance: Callable[[float], None] | None = None) -> Trace:
    """Step the network until ``cfg.duration_s`` (or until every flow finished, if ``stop_when_idle``)."""
    # --- engine dispatch (sim/events.py): PFC steady state where it applies; the stepped engine below.
    if cfg.engine != "stepped":
        why_not = applies(net, cfg)
        if why_not is None:
            return run_events(net, cfg, advance=advance)
        if cfg.engine == "events":
            raise InputError(f"engine events: does not apply here ({why_not}); use engine auto or stepped")
    # --- end of engine dispatch
    dt = cfg.step_s
    n_f, n_e, n_s = net.size.shape[0], net.cap_bytes_s.shape[0], net.seg_flow.shape[0]
    rng = np.random.default_rng(cfg.seed)
    fb = np.maximum(1, np.ceil((2 * net.path_prop_s + cfg.nic_delay_s) / dt)).astype(np.int64)
    cfg_rp = cfg.paper if cfg.dcqcn == "paper" else cfg.firmware
    rp = make_reaction_point(cfg.dcqcn, cfg_rp, net.line_bps, fb, dt, rng)
    use_cc = cfg.dcqcn != "none"
    n_steps = max(1, round(cfg.duration_s / dt))
    depth = net.delay_depth
    timing = PauseTiming(net, cfg, dt)
    pause_steps = timing.steps
    ing_prev = np.zeros(n_e)
    p_depth = int(pause_steps.max()) + 1
    pending = np.zeros((depth, n_s))
    buf = np.zeros(n_s)
    cap_dt = net.cap_bytes_s * dt
    # ACKs ride the reverse links: last step's deliveries take ack/mtu of their wire share there.
    with_acks = net.ack_edge.size > 0
    ack_ratio = cfg.ack_bytes * net.payload_fraction / cfg.mtu
    free_dt = cap_dt.copy()  # updated in place each step
    fifo = EgressFifo(net.seg_edge, n_e, window_steps(net, dt))
    delivered, dropped = np.zeros(n_f), np.zeros(n_f)
    marked = np.zeros(n_f)
    size_goal = net.size * (1 - 1e-9)
    finish = np.full(n_f, np.nan)
    begin = np.full(n_f, np.nan)
    ready = np.where(net.stage <= 1, net.start_s + np.where(net.stage == 1, net.gap_s, 0.0), np.inf)
    stage_left = np.bincount(net.stage, minlength=int(net.stage.max()) + 2)
    started = np.zeros(n_f, dtype=bool)
    finished = np.zeros(n_f, dtype=bool)
    state = net.forced_pause.copy()
    hist = np.zeros((p_depth, n_e), dtype=bool)
    hist[:] = net.forced_pause
    paused = net.forced_pause.copy()
    e_idx = np.arange(n_e)
    ing = np.zeros(n_e)
    pfc_on = cfg.pfc.enabled
    xoff = np.full(n_e, cfg.pfc.xoff_bytes)
    xon = xoff - cfg.pfc.xon_offset_bytes
    running: F64 | npt.NDArray[np.bool_] = ~paused  # per edge: sends this step (a fraction where PAUSE/XON acts)
    zeros_f = np.zeros(n_f)
    any_forced = bool(net.forced_pause.any())
    rc_seen: F64 | None = None
    active_seen: npt.NDArray[np.bool_] | None = None
    want_base = np.zeros(n_f)
    kmin = cfg.ecn.kmin_bytes if cfg.ecn.enabled else np.inf
    room = net.limit_bytes.copy()
    # Static thresholds: a port can only overflow when it is within a step's worth of line rate of its limit; one
    # byte of slack keeps this test a superset of ``limit - ing < cap_dt`` whatever the rounding.
    near_limit = net.limit_bytes - cap_dt - 1.0
    active = started & ~finished
    remaining = net.size.copy()
    goal_left = size_goal.copy()  # delivered bytes still needed: size less drops (no retransmission)
    dynamic = cfg.pfc.threshold == "dynamic"
    # Paused/XOFF time is counted in steps (cheaper per step) and scaled by dt when read.
    edge_drops, paused_n, xoff_n = np.zeros(n_e), np.zeros(n_e), np.zeros(n_e)
    # XOFF and XON counts from the number of state changes: they alternate, from the start state (a stuck NIC
    # starts in XOFF), so on - off = state - start. One add per step that changes anything instead of four.
    flips, start_on, qmax = np.zeros(n_e), net.forced_pause.astype(np.float64), np.zeros(n_e)
    edge_marks, edge_tx = np.zeros(n_e), np.zeros(n_e)
    shared_nic = np.bincount(net.src_nic_edge, minlength=n_e).max() > 1
    rec_every = max(1, n_steps // cfg.records)
    s_t: list[float] = []
    s_q: list[npt.NDArray[np.float32]] = []
    s_p: list[npt.NDArray[np.bool_]] = []
    s_r: list[npt.NDArray[np.float32]] = []
    s_d: list[npt.NDArray[np.float32]] = []
    snapshots: list[dict[str, F64]] = []
    snap_every = 0 if cfg.counter_interval_s is None else max(1, round(cfg.counter_interval_s / dt))
    next_ready = float(ready.min())
    # Most fabrics have one cable class per hop, so delays are uniform and a row index replaces fancy indexing.
    uniform_pause = bool((pause_steps == pause_steps[0]).all())
    pause_row = int(pause_steps[0])
    uniform_fwd = net.fwd_steps.size == 0 or bool((net.fwd_steps == net.fwd_steps[0]).all())
    fwd_row = int(net.fwd_steps[0]) if net.fwd_steps.size else 1
    uniform_inject = bool((net.inject_steps == net.inject_steps[0]).all())
    inject_row = int(net.inject_steps[0])
    # With one delay for forwarding and injection, each wire slot gets exactly one write per segment: the row
    # is the departures shifted by one segment (a flow's segments are consecutive), with the flows' first
    # segments overwritten by the injection. No scatter-add and no zeroing of consumed rows.
    shifted = (uniform_fwd and uniform_inject and fwd_row == inject_row
               and np.array_equal(net.fwd_to, net.fwd_from + 1) and net.first_seg[0] == 0
               and np.array_equal(net.first_seg[1:], net.last_seg[:-1] + 1))
    # A pause that takes effect after one step is the current state itself: no history, and paused time = XOFF time.
    pause_now = uniform_pause and pause_row == 1
    # The latch: a paused port resumes at XON, a running one pauses at XOFF (within _TIE of them).
    thr = np.where(state, xon + _TIE, xoff - _TIE)
    marks_needed = use_cc or bool(snap_every)
    n_done = 0
    progress_every = max(1, n_steps // 100)
    t = 0
    for t in range(n_steps):
        now = t * dt
        if now + _EPS >= next_ready:
            newly = ~started & (ready <= now + _EPS)
            started |= newly
            begin[newly] = now
            waiting = ready[~started]
            next_ready = float(waiting.min()) if waiting.size else np.inf
            active = started & ~finished
        slot = t % depth
        arr = pending[slot]  # a view: consumed below, then zeroed (or overwritten) for reuse
        # One step brings at most a step's worth of line rate into a port; only near the limit can it overflow.
        if dynamic:
            near = np.count_nonzero(room < cap_dt)
        elif near := np.count_nonzero(ing > near_limit):
            room = net.limit_bytes - ing
        if near and np.count_nonzero((in_arr := np.bincount(net.seg_in, arr, n_e)) > room):
            over = in_arr - room
            frac_drop = np.where(over > 0, np.minimum(1.0, over / np.maximum(in_arr, _EPS)), 0.0)
            drop = arr * frac_drop[net.seg_in]
            arr -= drop
            drop_f = np.bincount(net.seg_flow, drop, n_f)
            dropped += drop_f
            goal_left -= drop_f
            edge_drops += np.bincount(net.seg_in, drop, n_e)
        buf += arr
        dep = fifo.serve(arr, free_dt * running, buf)
        buf -= dep
        q_post = cast(F64, np.bincount(net.seg_edge, buf, n_e))
        np.maximum(qmax, q_post, out=qmax)
        if shifted:
            wire = pending[(t + fwd_row) % depth]
            wire[1:] = dep[:-1]
        else:
            arr.fill(0.0)
            if uniform_fwd:
                pending[(t + fwd_row) % depth, net.fwd_to] += dep[net.fwd_from]
            else:
                pending[(t + net.fwd_steps) % depth, net.fwd_to] += dep[net.fwd_from]
        got = dep[net.last_seg]
        delivered += got
        if with_acks:
            np.subtract(cap_dt, np.bincount(net.ack_edge, (got * ack_ratio)[net.ack_flow], n_e), out=free_dt)
            np.maximum(free_dt, 0.0, out=free_dt)
        if rp.rc is not rc_seen or active is not active_seen:  # rates change only on updates and events
            rc_seen, active_seen = rp.rc, active
            want_base = rp.rc * (dt / 8 * net.payload_fraction) * active
        want = want_base
        if shared_nic:
            load = np.bincount(net.src_nic_edge, want, n_e)
            scale = np.minimum(1.0, free_dt / np.maximum(load, _EPS))
            want = want * scale[net.src_nic_edge]
        elif with_acks:  # one flow per NIC: it gets what the ACKs leave of its link
            want = np.minimum(want, free_dt[net.src_nic_edge])
        inj = np.minimum(want * running[net.src_nic_edge], remaining)
        remaining -= inj
        if shifted:
            wire[net.first_seg] = inj
        elif uniform_inject:
            pending[(t + inject_row) % depth, net.first_seg] += inj
        else:
            pending[(t + net.inject_steps) % depth, net.first_seg] += inj
        if marks_needed and np.maximum.reduce(q_post) <= kmin:
            # No queue above Kmin: nothing is marked this step.
            if use_cc:
                rp.step(t, zeros_f, zeros_f, inj, active)
            if snap_every:
                edge_tx += np.bincount(net.seg_edge, dep, n_e)
                edge_tx += np.bincount(net.src_nic_edge, inj, n_e)
        elif marks_needed:
            p_seg = mark_probability(q_post, cfg.ecn)[net.seg_edge]
            marks = dep * p_seg / cfg.mtu
            marked_f = cast(F64, np.bincount(net.seg_flow, marks, n_f))
            marked += marked_f
            if use_cc:
                if rp.needs_path_probability:
                    log_keep = np.bincount(net.seg_flow, np.log1p(-np.minimum(p_seg, 1 - 1e-9)), n_f)
                    p_path: F64 = -np.expm1(log_keep)
                else:
                    p_path = marked_f
                rp.step(t, p_path, marked_f, inj, active)
            if snap_every:
                edge_marks += np.bincount(net.seg_edge, marks, n_e)
                edge_tx += np.bincount(net.seg_edge, dep, n_e)
                edge_tx += np.bincount(net.src_nic_edge, inj, n_e)
        ing_prev = ing
        ing = cast(F64, np.bincount(net.seg_in, buf, n_e))
        if pfc_on:
            if dynamic:
                used = np.bincount(net.seg_switch, buf, net.n_switches)
                free = np.maximum(cfg.pfc.buffer_bytes - used, 0.0)
                xoff = np.where(net.ingress_switch >= 0, cfg.pfc.dynamic_alpha * free[net.ingress_switch], np.inf)
                xon = xoff - cfg.pfc.xon_offset_bytes
                room = xoff + net.headroom_bytes - ing  # admission follows the moving threshold
                thr = np.where(state, xon + _TIE, xoff - _TIE)
            # Latch: XOFF above the threshold, XON only once below threshold - offset (thr holds whichever applies).
            new_state = ing > thr
            if any_forced:
                new_state |= net.forced_pause
        else:
            new_state = net.forced_pause
        if np.count_nonzero(flip := new_state != state):
            flips += flip
            timing.book(t, np.flatnonzero(flip), ing_prev, ing, thr, state)
            if not dynamic:
                thr = np.where(new_state, xon + _TIE, xoff - _TIE)
        state = new_state
        xoff_n += state
        if pause_now:
            paused = state
        else:
            hist[t % p_depth] = state
            if uniform_pause:
                # A view is safe: that row is next written p_depth - pause_row >= 1 steps after its last use.
                paused = hist[(t + 1 - pause_row) % p_depth]
            else:
                paused = hist[(t + 1 - pause_steps) % p_depth, e_idx]
            paused_n += paused
        if (frac := timing.due(t + 1, paused)) is not None:
            running = frac
        else:
            running = ~paused
        done = delivered >= goal_left
        if n_new := int(np.count_nonzero(done)):
            n_done += n_new
            goal_left[done] = np.inf
            finished |= done
            active = started & ~finished
            finish[done] = now + dt + net.ack_delay_s[done]
            for stage in np.unique(net.stage[done]):
                stage_left[stage] -= int(np.count_nonzero(net.stage[done] == stage))
                if stage > 0 and stage_left[stage] == 0:
                    nxt = net.stage == stage + 1
                    ready[nxt] = np.maximum(net.start_s[nxt], now + dt + net.gap_s[nxt])
                    next_ready = min(next_ready, float(ready[nxt].min(initial=np.inf)))
        if t % rec_every == 0:
            s_t.append(now + dt)
            s_q.append(q_post.astype(np.float32))
            s_p.append(paused.copy())
            s_r.append(np.where(active, rp.rc, 0.0).astype(np.float32))
            s_d.append(delivered.astype(np.float32))
        if snap_every and (t + 1) % snap_every == 0:
            snapshots.append({
                "time": np.array([round((t + 1) * dt, 12)]),
                "edge_paused_s": (xoff_n if pause_now else paused_n) * dt, "edge_xoff_s": xoff_n * dt,
                "edge_on": _xoff_count(flips, state, start_on), "edge_off": _xon_count(flips, state, start_on),
                "edge_drops": edge_drops.copy(),
                "edge_marks": edge_marks.copy(), "edge_tx": edge_tx.copy(), "cnp_sent": rp.cnp_sent.copy(),
                "cnp_handled": rp.cnp_handled.copy(), "marked": marked.copy(), "queue": q_post.copy(),
                "paused": paused.astype(np.float64),
            })
        if advance is not None and t % progress_every == 0:
            advance(progress_every)
        if cfg.stop_when_idle and n_done == n_f:
            break
    steps = t + 1
    if pause_now:
        paused_n = xoff_n.copy()
    if shifted:  # rows consumed and not written since hold stale departures: only the last fwd_row are on the wire
        wired = {(s + fwd_row) % depth for s in range(max(0, steps - fwd_row), steps)}
        for row in range(depth):
            if row not in wired:
                pending[row] = 0.0
    sent = net.size - remaining
    # Bytes still inside the network, counted from the buffers and the wires, not from the difference.
    in_network = cast(F64, np.bincount(net.seg_flow, buf + pending.sum(axis=0), n_f))
    return Trace(
        steps=steps, sim_time_s=steps * dt, sent=sent, delivered=delivered, dropped=dropped,
        buffered=in_network, finish_s=finish, begin_s=begin, cnp_sent=rp.cnp_sent.copy(),
        cnp_handled=rp.cnp_handled.copy(), marked_pkts=marked, edge_drops=edge_drops, edge_paused_s=paused_n * dt,
        edge_xoff_s=xoff_n * dt, edge_xoff_on=_xoff_count(flips, state, start_on),
        edge_xoff_off=_xon_count(flips, state, start_on), edge_queue_max=qmax,
        edge_refresh_s=np.array([pause_duration_s(cfg.pfc.pause_quanta, e.rate_bps) / 2 for e in net.edges]),
        series_t=np.array(s_t), series_queue=np.array(s_q), series_paused=np.array(s_p),
        series_rate=np.array(s_r), series_delivered=np.array(s_d), snapshots=snapshots,
    )


def _xoff_count(flips: F64, state: npt.NDArray[np.bool_], start_on: F64) -> F64:
    """XOFF episodes per edge (the start state counts as one): exact, the counts being small integers."""
    return start_on + (flips + state - start_on) / 2


def _xon_count(flips: F64, state: npt.NDArray[np.bool_], start_on: F64) -> F64:
    return (flips - state + start_on) / 2
