"""Doctor checks, one module per topic; importing this package registers them all in ``CHECKS``."""

from __future__ import annotations

from tensorfabric.findings import Finding, sort_key
from tensorfabric.host.checks import ecn, gids, hostname, log, mtu, nccl_tests, ncclvars, qos, rdma, ucx
from tensorfabric.host.checks.base import CHECKS, Check, DoctorContext, register

__all__ = ["CHECKS", "Check", "DoctorContext", "register", "run_checks"]
_MODULES = (ecn, gids, hostname, log, mtu, nccl_tests, ncclvars, qos, rdma, ucx)


def run_checks(ctx: DoctorContext) -> list[Finding]:
    """Every registered check's findings, most severe first."""
    findings = [f for check in CHECKS.values() for f in check(ctx)]
    return sorted(findings, key=sort_key)
