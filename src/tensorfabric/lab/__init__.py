"""The lab: an emulated multi-host cluster in network namespaces with shaped links.

``with Lab(hosts=2, rate="1gbit") as lab:`` builds hosts ``h0``, ``h1`` on a switch, each link shaped to
1 Gbit/s in each direction; ``lab.spawn(cmd)`` runs one rank per host with a torchrun environment;
:func:`run_distributed` does all of it for one command and returns rank 0's output. Needs root or
CAP_NET_ADMIN. See ``docs/lab.md``.
"""

from __future__ import annotations

from tensorfabric.lab.lab import Lab, down_all, lab_down, rank_env
from tensorfabric.lab.launch import run_distributed
from tensorfabric.lab.plan import LabPlan, plan_lab
from tensorfabric.lab.spec import LabSpec, parse_short_spec

__all__ = ["Lab", "LabPlan", "LabSpec", "down_all", "lab_down", "parse_short_spec", "plan_lab", "rank_env",
           "run_distributed"]
