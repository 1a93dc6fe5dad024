"""DCQCN parameters in its two published forms, and the fluid model's fixed point.

* ``PaperDcqcn`` -- Zhu et al., SIGCOMM'15, with the parameters of the authors' fluid model (dcqcn2.m):
  g 1/256, tau 50 us (CNP timer), tau' 55 us (alpha timer), T 55 us, B 10 MB, F 5, R_AI 40 Mb/s.
* ``FirmwareDcqcn`` -- the Mellanox/NVIDIA ConnectX firmware form (mlxconfig names in the field docs):
  alpha on a 1 us timer with g = 5/1024, rate decrease checked every 4 us and capped at a 50 % cut,
  300 us / 2.1 MB increase timer and byte counter, AI 5 Mb/s, HAI 50 Mb/s, stage threshold 1.

The vectorised reaction points that run these live in :mod:`tensorfabric.sim.reaction`.
:func:`fixed_point` solves the fluid model's equilibrium exactly (dcqcn-stability.tex), the oracle the
incast validation compares against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tensorfabric.errors import InputError, SimulationError
from tensorfabric.sim.ecn import EcnConfig

__all__ = ["FirmwareDcqcn", "FixedPoint", "PaperDcqcn", "fixed_point"]


@dataclass(frozen=True, slots=True)
class PaperDcqcn:
    """The paper's reaction/notification point parameters (fluid-model values)."""

    g: float = 1 / 256
    cnp_interval_s: float = 50e-6
    """tau: at most one CNP per flow per interval (notification point)."""
    alpha_interval_s: float = 55e-6
    """tau': alpha decays by (1 - g) when no CNP came for this long."""
    timer_s: float = 55e-6
    """T: rate-increase timer."""
    byte_counter_bytes: float = 10e6
    """B: rate-increase byte counter (10 MB)."""
    fast_recovery_steps: int = 5
    """F: increase events of fast recovery before additive increase."""
    rai_bps: float = 40e6
    min_rate_bps: float = 10e6
    packet_bytes: float = 1000.0
    """The fluid model counts in packets of 8000 bits."""

    def __post_init__(self) -> None:
        _positive(self, ("g", "cnp_interval_s", "alpha_interval_s", "timer_s", "byte_counter_bytes", "rai_bps",
                         "min_rate_bps", "packet_bytes"))
        if self.g >= 1 or self.fast_recovery_steps < 1:
            raise InputError("dcqcn paper: g must be in (0, 1) and F >= 1")


@dataclass(frozen=True, slots=True)
class FirmwareDcqcn:
    """ConnectX firmware DCQCN; defaults are the commonly observed mlxconfig values."""

    g: float = 5 / 1024
    """DCE_TCP_G 1019: alpha <- alpha * 1019/1024 + 5/1024."""
    alpha_period_s: float = 1e-6
    """DCE_TCP_RTT."""
    rate_reduce_period_s: float = 4e-6
    """RATE_REDUCE_MONITOR_PERIOD."""
    time_reset_s: float = 300e-6
    """RPG_TIME_RESET."""
    byte_reset_bytes: float = 32767 * 64
    """RPG_BYTE_RESET (in 64-byte units)."""
    threshold: int = 1
    """RPG_THRESHOLD: stages before additive / hyper increase."""
    ai_bps: float = 5e6
    """RPG_AI_RATE."""
    hai_bps: float = 50e6
    """RPG_HAI_RATE."""
    min_dec_fac: float = 50.0
    """RPG_MIN_DEC_FAC: one decrease cuts at most (100 - this) %."""
    min_rate_bps: float = 1e6
    """RPG_MIN_RATE."""
    initial_alpha: float = 1023 / 1024
    """INITIAL_ALPHA_VALUE 1023 in 10-bit fixed point, set on the first CNP."""
    min_time_between_cnps_s: float = 4e-6
    """MIN_TIME_BETWEEN_CNPS (notification point, per flow)."""
    clamp_tgt_rate: bool = False
    clamp_tgt_rate_after_time_inc: bool = True

    def __post_init__(self) -> None:
        _positive(self, ("g", "alpha_period_s", "rate_reduce_period_s", "time_reset_s", "byte_reset_bytes",
                         "ai_bps", "hai_bps", "min_rate_bps", "initial_alpha"))
        if self.g >= 1 or not 0 <= self.min_dec_fac < 100 or self.min_time_between_cnps_s < 0:
            raise InputError("dcqcn firmware: g must be in (0, 1), min_dec_fac in [0, 100), CNP gap >= 0")


def _positive(obj: object, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(obj, name)
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise InputError(f"dcqcn {name}: {value!r} must be a positive number")


@dataclass(frozen=True, slots=True)
class FixedPoint:
    """Equilibrium of the fluid model for N identical flows on one bottleneck."""

    p: float
    """Marking probability."""
    queue_bytes: float
    """q*; equals Kmax when p* > Pmax (marking jumps to 1 and the queue pins there)."""
    alpha: float
    rate_bps: float
    """R_C* = C / N."""
    above_kmax: bool


def fixed_point(n_flows: int, capacity_bps: float, dcqcn: PaperDcqcn, ecn: EcnConfig) -> FixedPoint:
    """Solve a^2 alpha* / ((b + d)(c + e)) = tau^2 R_AI R_C* for p* by bisection on log p.

    All quantities in packets and seconds, as in dcqcn-stability.tex.
    """
    if n_flows < 1:
        raise InputError(f"flows: {n_flows!r} must be at least 1")
    pkt_bits = 8 * dcqcn.packet_bytes
    rc = capacity_bps / pkt_bits / n_flows
    rai = dcqcn.rai_bps / pkt_bits
    tau, tau_a, timer = dcqcn.cnp_interval_s, dcqcn.alpha_interval_s, dcqcn.timer_s
    b_pk, f = dcqcn.byte_counter_bytes / dcqcn.packet_bytes, dcqcn.fast_recovery_steps
    target = tau * tau * rai * rc

    def excess(p: float) -> float:
        lp = math.log1p(-p)
        if -b_pk * lp > 700:  # (1-p)^-B overflows: the increase terms vanish, decrease dominates
            return math.inf
        a = -math.expm1(tau * rc * lp)
        b = p / math.expm1(-b_pk * lp)
        d = p / math.expm1(-timer * rc * lp)
        c = math.exp(f * b_pk * lp) * b
        e = math.exp(f * timer * rc * lp) * d
        alpha = -math.expm1(tau_a * rc * lp)
        return a * a * alpha / ((b + d) * (c + e)) - target

    lo, hi = math.log(1e-12), math.log(0.999)
    if excess(math.exp(lo)) > 0 or excess(math.exp(hi)) < 0:
        raise SimulationError(f"no DCQCN fixed point for N={n_flows} at {capacity_bps:.3g} bit/s")
    for _ in range(200):
        mid = (lo + hi) / 2
        if excess(math.exp(mid)) > 0:
            hi = mid
        else:
            lo = mid
    p = math.exp((lo + hi) / 2)
    alpha = -math.expm1(tau_a * rc * math.log1p(-p))
    above = p > ecn.pmax
    q = ecn.kmax_bytes if above else p / ecn.pmax * (ecn.kmax_bytes - ecn.kmin_bytes) + ecn.kmin_bytes
    return FixedPoint(p=p, queue_bytes=q, alpha=alpha, rate_bps=capacity_bps / n_flows, above_kmax=above)
