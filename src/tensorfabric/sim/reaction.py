"""Vectorised DCQCN reaction and notification points: one array element per flow, one call per step.

Each class takes, per step, the flows' path marking probability and expected marked packets (from the
engine's egress queues), and updates the sending rate ``rc`` (bits/s) in place.

* ``paper``    -- the SIGCOMM'15 fluid model integrated per flow (dcqcn-model.tex): alpha update, rate
  decrease at CNP rate (1 - (1 - p)^(tau R)) / tau, fast recovery and additive increase driven by the
  byte counter and the timer. It is the paper's protocol in expectation, so its equilibrium is exactly
  :func:`~tensorfabric.sim.dcqcn.fixed_point`; CNP counters are expected counts. The published model has
  no hyper-increase term and neither does this form.
* ``firmware`` -- the ConnectX firmware state machine, discrete: CNPs drawn from the marks (at most one per
  flow per MIN_TIME_BETWEEN_CNPS), alpha timer, rate-decrease monitor period, timer/byte-counter stages
  with fast recovery, additive and hyper increase.
* ``none``     -- no congestion control: senders stay at line rate (PFC alone).

CNPs reach the reaction point after the flow's feedback delay (a ring buffer indexed by step).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tensorfabric.registry import Registry
from tensorfabric.sim.dcqcn import FirmwareDcqcn, PaperDcqcn

__all__ = ["REACTION_POINTS", "ReactionPoint", "make_reaction_point"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class ReactionPoint(Protocol):
    needs_path_probability: bool
    """Whether ``step`` reads ``p_path`` (the fluid form) or only the marked packets."""
    rc: F64
    cnp_sent: F64
    cnp_handled: F64

    def step(self, t: int, p_path: F64, marked_pkts: F64, sent_bytes: F64, active: npt.NDArray[np.bool_]) -> None:
        ...


class NoCongestionControl:
    needs_path_probability = False
    def __init__(self, line_bps: F64) -> None:
        self.rc = line_bps.copy()
        self.cnp_sent = np.zeros_like(line_bps)
        self.cnp_handled = np.zeros_like(line_bps)

    def step(self, t: int, p_path: F64, marked_pkts: F64, sent_bytes: F64, active: npt.NDArray[np.bool_]) -> None:
        return None


class PaperFluid:
    """The fluid model's ODEs, explicit Euler, with delayed feedback p(t - tau*).

    The ODEs move on the 50-55 us timescale of their timers, so they are integrated every ``update_s``
    (5 us, or every step if steps are longer) with the path marking probability averaged over the steps
    in between; feedback delays are rounded up to whole updates.
    """

    needs_path_probability = True
    update_s = 5e-6

    def __init__(self, cfg: PaperDcqcn, line_bps: F64, fb_steps: I64, dt: float) -> None:
        n = line_bps.shape[0]
        self.cfg, self.line = cfg, line_bps
        self.every = max(1, int(self.update_s / dt + 1e-9))
        self.h = dt * self.every
        self.rc, self.rt = line_bps.copy(), line_bps.copy()
        self.alpha = np.ones(n)
        self.cnp_sent, self.cnp_handled = np.zeros(n), np.zeros(n)
        fb = -(-fb_steps // self.every)  # ceil, in updates
        self.depth = int(fb.max(initial=0)) + 1
        self.uniform = bool((fb == fb[0]).all()) if n else True
        self.fb = fb
        self.fb0 = int(fb[0]) if n else 0
        self.hist_p = np.zeros((self.depth, n))
        self.hist_r = np.tile(line_bps, (self.depth, 1))
        self.p_acc = np.zeros(n)
        self.idx = np.arange(n)
        self.k = 0
        self.b_pk = cfg.byte_counter_bytes / cfg.packet_bytes
        self.r_scale = 1.0 / (8 * cfg.packet_bytes)
        self.g_rate = cfg.g / cfg.alpha_interval_s
        self.inv_tau = 1.0 / cfg.cnp_interval_s

    def step(self, t: int, p_path: F64, marked_pkts: F64, sent_bytes: F64, active: npt.NDArray[np.bool_]) -> None:
        self.p_acc += p_path
        if (t + 1) % self.every:
            return
        c = self.cfg
        slot = self.k % self.depth
        self.hist_p[slot] = self.p_acc * (1.0 / self.every)
        self.hist_r[slot] = self.rc
        self.p_acc[:] = 0.0
        if self.uniform:
            back = (self.k - self.fb0) % self.depth
            p_hat, r_hat = self.hist_p[back], self.hist_r[back]
        else:
            back_v = (self.k - self.fb) % self.depth
            p_hat, r_hat = self.hist_p[back_v, self.idx], self.hist_r[back_v, self.idx]
        self.k += 1
        p = np.minimum(np.maximum(p_hat, 1e-12), 1 - 1e-9)
        r = r_hat * self.r_scale  # packets per second
        lp = np.log1p(-p)
        rlp = r * lp
        blp = self.b_pk * lp
        a = -np.expm1(c.cnp_interval_s * rlp)
        # Capping the exponent keeps (1-p)^-B finite; past e^700 the increase term is zero anyway.
        b = p / np.expm1(np.minimum(-blp, 700.0))
        d = p / np.expm1(np.minimum(-c.timer_s * rlp, 700.0))
        f = c.fast_recovery_steps
        inc_ai = np.exp(f * blp) * b + np.exp((f * c.timer_s) * rlp) * d
        alpha_target = -np.expm1(c.alpha_interval_s * rlp)
        gap = self.rt - self.rc
        decrease = a * self.inv_tau
        d_alpha = self.g_rate * (alpha_target - self.alpha)
        d_rt = c.rai_bps * r * inc_ai - gap * decrease
        d_rc = gap * 0.5 * r * (b + d) - self.rc * self.alpha * 0.5 * decrease
        on = active * self.h
        self.alpha += d_alpha * on
        self.rt = np.minimum(self.rt + d_rt * on, self.line)
        self.rc = np.minimum(np.maximum(self.rc + d_rc * on, c.min_rate_bps), self.rt)
        cnps = decrease * on
        self.cnp_sent += cnps
        self.cnp_handled += cnps


class Firmware:
    """ConnectX firmware DCQCN as a discrete state machine per flow (Isekai / HPCC 'Mellanox version')."""

    needs_path_probability = False

    def __init__(self, cfg: FirmwareDcqcn, line_bps: F64, fb_steps: I64, dt: float,
                 rng: np.random.Generator) -> None:
        n = line_bps.shape[0]
        self.cfg, self.dt, self.line, self.rng = cfg, dt, line_bps, rng
        self.rc, self.rt = line_bps.copy(), line_bps.copy()
        self.alpha = np.full(n, cfg.initial_alpha)
        self.cnp_sent, self.cnp_handled = np.zeros(n), np.zeros(n)
        self.fb, self.idx = fb_steps, np.arange(n)
        self.depth = int(fb_steps.max(initial=0)) + 1
        self.inbox = np.zeros((self.depth, n), dtype=bool)
        self.np_next = np.zeros(n)
        self.seen_cnp = np.zeros(n, dtype=bool)
        # Alpha periods in which a CNP arrived since alpha was last applied, and the last such period per flow:
        # without CNP pacing (the HPCC simulator's DCQCN) a CNP can arrive in every 1 us period of a tick.
        self.cnp_periods = np.zeros(n)
        self.last_cnp_period = np.full(n, -1, dtype=np.int64)
        self.cnp_dec = np.zeros(n, dtype=bool)
        self.timer_stage = np.zeros(n)
        self.byte_stage = np.zeros(n)
        self.bytes_since = np.zeros(n)
        self.timer_next = np.full(n, cfg.time_reset_s)
        self.timer_min = cfg.time_reset_s
        self.last_inc = np.zeros(n, dtype=np.int8)  # 0 none since decrease, 1 timer, 2 byte counter
        self.alpha_time = 0.0
        self.tick_steps = max(1, round(cfg.rate_reduce_period_s / dt))
        self.np_steps = max(1, int(cfg.min_time_between_cnps_s / dt + 1e-9))
        self.mark_acc = np.zeros(n)
        self.no_flows = np.zeros(n, dtype=bool)
        self.max_cut = (100.0 - cfg.min_dec_fac) / 100.0

    def step(self, t: int, p_path: F64, marked_pkts: F64, sent_bytes: F64, active: npt.NDArray[np.bool_]) -> None:
        c, now = self.cfg, (t + 1) * self.dt
        # Notification point: a CNP when a marked packet arrived and the per-flow gap has passed. A flow can
        # send at most one CNP per gap, so marks are pooled over the gap and drawn once: P(>= 1 mark).
        self.mark_acc += marked_pkts
        if (t + 1) % self.np_steps == 0 and np.count_nonzero(self.mark_acc):
            marked = self.rng.random(marked_pkts.shape[0]) < -np.expm1(-self.mark_acc)
            self.mark_acc[:] = 0.0
            send = marked & active & (now >= self.np_next - 1e-12)
        else:
            send = self.no_flows
        if np.count_nonzero(send):
            self.np_next[send] = now + c.min_time_between_cnps_s
            self.cnp_sent += send
            slots = (t + self.fb) % self.depth
            self.inbox[slots[send], self.idx[send]] = True
        slot = t % self.depth
        if np.count_nonzero(self.inbox[slot]):
            arrived = self.inbox[slot].copy()
            self.inbox[slot] = False
            self.cnp_handled += arrived
            first = arrived & ~self.seen_cnp
            self.alpha[first] = c.initial_alpha
            self.seen_cnp |= arrived
            period = int((t + 0.5) * self.dt / c.alpha_period_s)
            fresh = arrived & (self.last_cnp_period != period)
            self.cnp_periods += fresh
            self.last_cnp_period[arrived] = period
            self.cnp_dec |= arrived
        self.bytes_since += sent_bytes
        # Alpha, decrease and increase are evaluated on the rate-reduce monitor tick (4 us by default).
        # Alpha's 1 us periods in between are applied together, counting those in which a CNP arrived.
        if (t + 1) % self.tick_steps:
            return
        periods = int((now - self.alpha_time) / c.alpha_period_s + 1e-6)
        if periods > 0:
            # k periods with a CNP among them, taken as the last k: alpha (1-g)^P + 1 - (1-g)^k, which for
            # k <= 1 (CNPs paced at least a tick apart, the firmware default) is exactly alpha (1-g)^P + k g.
            k = np.minimum(self.cnp_periods, periods)
            gain = np.where(k <= 1, c.g * k, 1 - (1 - c.g) ** k)
            self.alpha = self.alpha * (1 - c.g) ** periods + gain
            self.cnp_periods[:] = 0.0
            self.alpha_time += periods * c.alpha_period_s
        dec = self.cnp_dec
        if np.count_nonzero(dec):
            clamp = dec & (c.clamp_tgt_rate | (self.last_inc == 2)
                           | ((self.last_inc == 1) & c.clamp_tgt_rate_after_time_inc))
            self.rt = np.where(clamp, self.rc, self.rt)
            cut = np.minimum(self.alpha / 2, self.max_cut)
            self.rc = np.where(dec, np.maximum(c.min_rate_bps, self.rc * (1 - cut)), self.rc)
            self.timer_stage[dec] = 0
            self.byte_stage[dec] = 0
            self.bytes_since[dec] = 0
            self.timer_next[dec] = now + c.time_reset_s
            self.timer_min = float(self.timer_next.min())
            self.last_inc[dec] = 0
            self.cnp_dec = np.zeros_like(dec)
        self._increase(now, active)

    def _increase(self, now: float, active: npt.NDArray[np.bool_]) -> None:
        c = self.cfg
        byte = self.bytes_since >= c.byte_reset_bytes
        if now < self.timer_min and not np.count_nonzero(byte):
            return
        timer = active & (now >= self.timer_next)
        self.timer_next = np.where(timer, now + c.time_reset_s, self.timer_next)
        self.timer_min = float(self.timer_next.min())
        inc = timer | byte
        if not np.count_nonzero(inc):
            return
        self.bytes_since = np.where(byte, self.bytes_since - c.byte_reset_bytes, self.bytes_since)
        self.timer_stage += timer
        self.byte_stage += byte
        hyper = np.minimum(self.timer_stage, self.byte_stage) > c.threshold
        additive = np.maximum(self.timer_stage, self.byte_stage) >= c.threshold
        step = np.where(hyper, c.hai_bps, np.where(additive, c.ai_bps, 0.0))
        self.rt = np.where(inc, np.minimum(self.rt + step, self.line), self.rt)
        self.rc = np.where(inc, (self.rt + self.rc) / 2, self.rc)
        self.last_inc = np.where(byte, 2, np.where(timer, 1, self.last_inc)).astype(np.int8)


Factory = Callable[[PaperDcqcn | FirmwareDcqcn | None, F64, I64, float, np.random.Generator], ReactionPoint]


def _paper(cfg: PaperDcqcn | FirmwareDcqcn | None, line: F64, fb: I64, dt: float,
           rng: np.random.Generator) -> ReactionPoint:
    return PaperFluid(cfg if isinstance(cfg, PaperDcqcn) else PaperDcqcn(), line, fb, dt)


def _firmware(cfg: PaperDcqcn | FirmwareDcqcn | None, line: F64, fb: I64, dt: float,
              rng: np.random.Generator) -> ReactionPoint:
    return Firmware(cfg if isinstance(cfg, FirmwareDcqcn) else FirmwareDcqcn(), line, fb, dt, rng)


def _none(cfg: PaperDcqcn | FirmwareDcqcn | None, line: F64, fb: I64, dt: float,
          rng: np.random.Generator) -> ReactionPoint:
    return NoCongestionControl(line)


REACTION_POINTS: Registry[Factory] = Registry("dcqcn", {"paper": _paper, "firmware": _firmware, "none": _none})


def make_reaction_point(name: str, cfg: PaperDcqcn | FirmwareDcqcn | None, line_bps: F64, fb_steps: I64,
                        dt: float, rng: np.random.Generator) -> ReactionPoint:
    return REACTION_POINTS.get(name)(cfg, line_bps, fb_steps, dt, rng)
