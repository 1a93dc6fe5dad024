"""Fleet rules: cross-host configuration (``config``) and the pairwise data path (``datapath``), in one registry."""

from __future__ import annotations

from tensorfabric.fleet.rules.base import RULES, FleetContext, FleetRule, register, vote

__all__ = ["RULES", "FleetContext", "FleetRule", "register", "vote"]
