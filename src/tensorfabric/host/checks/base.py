"""The doctor's check registry and the context every check reads.

A check is a function ``(DoctorContext) -> Iterable[Finding]`` registered under a name; each lives in the module
of its topic (rdma, gids, ncclvars, mtu, ecn, log). Checks never raise for what they find -- only findings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tensorfabric import roce
from tensorfabric.findings import Finding
from tensorfabric.host.gid_capture import CapturedPort
from tensorfabric.host.mlnx_qos import MlnxQos
from tensorfabric.host.nccl_log import NcclLogReport
from tensorfabric.host.nccl_tests import LineRate, NcclTestsReport
from tensorfabric.host.records import HostInventory, HostName, RdmaPort
from tensorfabric.host.ucx_report import UcxLogReport
from tensorfabric.registry import Registry

__all__ = ["CHECKS", "Check", "DoctorContext", "register"]


@dataclass(frozen=True, slots=True)
class DoctorContext:
    inventory: HostInventory
    environ: Mapping[str, str] = field(default_factory=dict)
    """The NCCL environment judged: this shell's (over /etc/nccl.conf), or the logged job's own variables."""
    environ_source: Literal["shell", "log"] = "shell"
    environ_complete: bool = True
    """False when a variable missing from ``environ`` may still have been set (a log without ENV lines)."""
    roce_dscp: int = roce.ROCE_DSCP
    roce_priority: int | None = None
    """Lossless priority of RoCE; ``None`` means the default DSCP -> priority map (DSCP >> 3)."""
    mtu: int | None = None
    """Netdev MTU the fabric plan expects, when a spec was given."""
    nccl_log: NcclLogReport | None = None
    mlnx_qos: Mapping[str, MlnxQos] = field(default_factory=dict)
    """Per-netdev ``mlnx_qos`` state, when the tool ran or a capture was given."""
    captured_gids: Sequence[CapturedPort] | None = None
    """GID tables from ``--gids FILE`` (a :class:`~tensorfabric.host.gid_capture.GidCapture`); they replace sysfs
    as the GID evidence when given."""
    hostname: HostName | None = None
    """This host's name and what it resolves to (live host only)."""
    ucx_log: UcxLogReport | None = None
    """A UCX/NIXL log from ``--ucx-log FILE``."""
    require_rdma: bool = False
    """Whether a UCX log that does not prove RDMA is an error rather than a warning."""
    nccl_tests: NcclTestsReport | None = None
    """nccl-tests output from ``--nccl-tests FILE``."""
    nccl_tests_line_rate: LineRate | None = None
    """What its busbw is compared with: ``--line-rate``, else this host's active RoCE ports."""

    @property
    def priority(self) -> int:
        return self.roce_priority if self.roce_priority is not None else roce.default_priority(self.roce_dscp)

    @property
    def active_roce(self) -> tuple[RdmaPort, ...]:
        return tuple(p for p in self.inventory.roce_ports if p.active)

    @property
    def gid_ports(self) -> tuple[RdmaPort, ...]:
        """Ports whose GID tables the GID checks judge: the captured ones when given, else active sysfs RoCE ports."""
        if self.captured_gids is not None:
            return tuple(p.as_port() for p in self.captured_gids if p.is_roce and p.usable)
        return self.active_roce


Check = Callable[[DoctorContext], Iterable[Finding]]
CHECKS: Registry[Check] = Registry("doctor check")


def register(name: str) -> Callable[[Check], Check]:
    return CHECKS.register(name)
