"""Running an inference job's ranks wherever :func:`~tensorfabric.transfer.launch.placement` puts them.

:func:`launch_run` runs a colocated tp x pp job and returns every rank's result; :func:`run_disaggregated`
runs P prefill and D decode ranks and returns rank 0's report for the whole run. Both take a placement (inside a
launched job this process is one rank; else one rank per host of a lab, local processes, or this process) and
check their input before any rank starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from tensorfabric.errors import InputError
from tensorfabric.inference.disagg import DisaggConfig, DisaggRankResult, disagg_entry, parse_split
from tensorfabric.inference.disagg_report import DisaggReport, disagg_report
from tensorfabric.inference.runner import Bars, RankResult, RunConfig, prepare, rank_entry

if TYPE_CHECKING:
    from tensorfabric.transfer.launch import Placement
    from tensorfabric.transfer.spawn import OnMessage

__all__ = ["check_run", "launch_run", "plan_disagg", "run_disaggregated", "streams_here"]

LAB_GRACE_S = 60
"""What a lab run adds to ``--timeout``: building the namespaces and starting a rank in each."""


def check_run(cfg: RunConfig, where: Placement) -> None:
    """InputError (exit 2) before any rank starts when the run cannot work; inside a launched job every rank
    finds out for itself."""
    if not where.launched:
        prepare(cfg, world_size=where.ranks)


def streams_here(where: Placement) -> bool:
    """Whether rank 0 posts its tokens to this process as they come (a lab host's rank 0 has no terminal: its
    text comes back with its result)."""
    return where.kind != "lab" and where.rank == 0


def launch_run(cfg: RunConfig, where: Placement, *, bars: Bars | None = None,
               on_message: OnMessage | None = None) -> dict[int, RankResult]:
    """Every rank's result of a colocated run (only rank 0's on a launched job's rank 0, none on its others).
    ``bars`` are rank 0's progress bars, drawn only where this process's terminal is; ``cfg.timeout_s`` bounds
    the whole run: a stopped or hung rank ends it at the timeout, grace included."""
    from tensorfabric.transfer.launch import launch

    lab = where.kind == "lab"
    ranks: dict[int, RankResult] = launch(rank_entry, where, args=(cfg, None if lab else bars, streams_here(where)),
                                          timeout_s=cfg.timeout_s + (LAB_GRACE_S if lab else 0),
                                          on_message=on_message)
    return ranks


def plan_disagg(run: RunConfig, split: str, prefill_tp: int = 0, decode_tp: int = 0) -> DisaggConfig:
    """The checked configuration of ``tensorfabric run --disaggregate P:D``."""
    p, d = parse_split(split)
    cfg = DisaggConfig(run=run, prefill=p, decode=d, prefill_tp=prefill_tp, decode_tp=decode_tp)
    cfg.check()
    return cfg


def run_disaggregated(cfg: DisaggConfig, *, environ: Mapping[str, str], lab: str | None = None,
                      lab_name: str | None = None, grace_s: float | None = None) -> DisaggReport | None:
    """Run the ``P + D`` ranks wherever :func:`~tensorfabric.transfer.launch.placement` puts them; the report
    from rank 0's gathered results, or None on a rank other than 0 of a launched job."""
    from tensorfabric.transfer.launch import launch, placement

    where = placement(environ, ranks=cfg.world, lab=lab, lab_name=lab_name)
    if where.kind == "lab" and where.ranks != cfg.world:
        raise InputError(f"--lab {lab} has {where.ranks} hosts; --disaggregate {cfg.prefill}:{cfg.decode} needs "
                         f"{cfg.world}")
    if not where.launched:
        cfg.check()
        prepare(cfg.run)  # bad input is exit 2 here, before any rank starts
    if grace_s is None and where.kind == "local":
        grace_s = 10.0  # a KV peer blocked on a dead partner needs its transfer timeout to fail on its own
    ranks = launch(disagg_entry, where, args=(cfg,), timeout_s=cfg.run.timeout_s + 60, grace_s=grace_s)
    if 0 not in ranks:
        return None
    # Every rank gathered everyone's results at the end: rank 0 reports for the whole run.
    everyone: list[DisaggRankResult] = ranks[0].everyone
    return disagg_report(everyone, cfg, where.rate_bps)
