"""Known NCCL failure signatures, each with what it means and the maintainers' advice.

One record per signature; matching is a registry walk, never an ``if`` ladder. Sources: NVIDIA/nccl
troubleshooting guide and the issues cited in ``fix``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tensorfabric.findings import Severity

__all__ = ["SIGNATURES", "Signature", "match_signatures"]


@dataclass(frozen=True, slots=True)
class Signature:
    id: str
    pattern: re.Pattern[str]
    severity: Severity
    meaning: str
    fix: str


def _sig(id: str, pattern: str, severity: Severity, meaning: str, fix: str) -> Signature:
    return Signature(id, re.compile(pattern), severity, meaning, fix)


SIGNATURES: tuple[Signature, ...] = (
    _sig("nccl.no-ib-device", r"NET/IB ?: No device found", "error",
         "NCCL sees no usable RDMA device and will fall back to TCP sockets",
         "check `ibv_devinfo` (port Active), /sys/class/infiniband and the RDMA stack; in a container pass "
         "--device=/dev/infiniband --cap-add IPC_LOCK (NVIDIA/nccl#958)"),
    _sig("nccl.ib-open-failed", r"ibv_open_device failed|Unable to open device", "error",
         "an RDMA device exists but cannot be opened (container without /dev/infiniband, permissions)",
         "expose /dev/infiniband to the container and run with --cap-add IPC_LOCK (NVIDIA/nccl#451)"),
    _sig("nccl.modify-qp-failed", r"ibv_modify_qp failed", "error",
         "the QP could not move to RTR/RTS: usually a wrong GID (RoCE v1, link-local, empty or another netdev's)",
         "NCCL >= 2.21: unset NCCL_IB_GID_INDEX and let NCCL auto-select; older NCCL: use the RoCE v2 IPv4 index "
         "from show_gids"),
    _sig("nccl.completion-error-12", r"Got completion with error 12\b", "error",
         "transport retry counter exceeded: the NICs cannot reach each other over RoCE (GID, TC, routing, drops)",
         "run ib_write_bw between the hosts with the same GID index and traffic class as NCCL (NVIDIA/nccl#426); "
         "check PFC/ECN on the path; raise NCCL_IB_TIMEOUT only on very large fabrics"),
    _sig("nccl.completion-error", r"Got completion with error (?!12\b)\d+", "error",
         "an RDMA work request completed with an error", "look up the ibv_wc_status code; check both hosts' logs"),
    _sig("nccl.memlock", r"ibv_create_qp failed|ibv_reg_mr\w* failed|ibv_create_cq failed", "error",
         "the pinned-memory limit (RLIMIT_MEMLOCK) is too low for NCCL's queues and buffers",
         "set `* soft memlock unlimited` and `* hard memlock unlimited` (containers: --ulimit memlock=-1)"),
    _sig("nccl.gdr-disabled", r"GPU Direct RDMA Disabled for HCA", "warning",
         "GPUDirect RDMA is off: every transfer is staged through host memory",
         "modprobe nvidia-peermem and check /sys/kernel/mm/memory_peers/nv_mem; NCCL <= 2.22.3 only detects "
         "nv_peer_mem (NVIDIA/nccl#897, #1676)"),
    _sig("nccl.bad-socket-ifname", r"is neither AF_INET\(2\) nor AF_INET6\(10\)", "error",
         "NCCL_SOCKET_IFNAME names an interface that does not exist (NVIDIA/nccl#1837)",
         "set NCCL_SOCKET_IFNAME to an existing interface (`tensorfabric env` derives it)"),
    _sig("nccl.watchdog-timeout", r"Watchdog caught collective operation timeout", "error",
         "a collective did not finish within the process-group timeout (network stall or hang)",
         "find the first failing rank's log; check for PFC storms or drops and that every node uses the same "
         "transport (NVIDIA/nccl#234)"),
    _sig("nccl.ib-async-event", r"NET/IB ?: Got async event", "warning",
         "the HCA reported an asynchronous event (port down, fatal error)",
         "check the port state and the kernel log (dmesg) on that host"),
)


def match_signatures(line: str) -> list[Signature]:
    return [s for s in SIGNATURES if s.pattern.search(line)]
