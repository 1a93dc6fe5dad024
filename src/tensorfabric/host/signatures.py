"""Known NCCL failure signatures, each with what it means, the upstream thread it comes from and the fix.

One record per signature; matching is a registry walk, never an ``if`` ladder. A record's ``needle`` is a literal
that must occur in the line before its pattern runs (cheap, and it keeps every line linear-time); a record that
``refines`` another replaces it when both match, so ``ibv_modify_qp failed with 101 Network is unreachable`` is
reported once, with the errno's own advice. Sources: NVIDIA/nccl troubleshooting guide, ``ibv_wc_status`` in
rdma-core ``libibverbs/verbs.h``, and the issues cited in ``reference``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tensorfabric.findings import Severity

__all__ = ["SIGNATURES", "Signature", "match_signatures"]


@dataclass(frozen=True, slots=True)
class Signature:
    id: str
    needle: str
    pattern: re.Pattern[str]
    severity: Severity
    meaning: str
    fix: str
    reference: str
    refines: str | None = None


def _sig(id: str, needle: str, pattern: str, severity: Severity, meaning: str, fix: str, reference: str,
         refines: str | None = None) -> Signature:
    return Signature(id, needle, re.compile(pattern), severity, meaning, fix, reference, refines)


# Both completion-error forms: ``Got completion with error 12, opcode ...`` (<= 2.18) and ``Got completion from
# peer 10.0.0.2<55921> with status=12 opcode=1 ...`` (2.19+, also the IBext plugin and NET/IBP).
_COMPLETION = r"Got completion (?:with error |from peer \S+ with status=)"
_MODIFY_QP = r"ibv_modify_qp failed with (?:error |\d+ )"
# The dlerror() text of a plugin that is there but did not load, after each era's lead-in: 2.19 "Plugin load
# (libnccl-net.so) returned 2 : " or "dlerror=", 2.21 "Plugin load returned 2 : ", 2.23+ nothing. glibc writes it as
# "<library>: <reason>"; the plugin's own name with "cannot open shared object file" only means no plugin is installed.
_PLUGIN_LOAD = (r"NET/Plugin ?: ?(?:(?:Most recent )?[Pp]lugin load (?:\([\w.+-]{1,64}\) )?returned -?\d{1,4} : "
                r"|dlerror=)?")
_GID_FIX = ("NCCL >= 2.21: unset NCCL_IB_GID_INDEX and let NCCL pick the RoCE v2 IPv4 GID; older NCCL: the RoCE v2 "
            "IPv4 index from `tensorfabric doctor --gids` (show_gids)")

SIGNATURES: tuple[Signature, ...] = (
    _sig("nccl.no-ib-device", "No device found", r"NET/IB ?: No device found", "error",
         "NCCL sees no usable RDMA device and will fall back to TCP sockets",
         "check `ibv_devinfo` (port Active), /sys/class/infiniband and the RDMA stack; in a container pass "
         "--device=/dev/infiniband --cap-add IPC_LOCK", "NVIDIA/nccl#958"),
    _sig("nccl.no-libibverbs", "libibverbs", r"Failed to open libibverbs", "error",
         "libibverbs is not installed (or not on the library path), so NCCL cannot use any RDMA device",
         "install rdma-core / libibverbs1 in the image (the host driver alone is not enough)", "NVIDIA/nccl#229"),
    _sig("nccl.ib-open-failed", "open", r"ibv_open_device failed|Unable to open device", "error",
         "an RDMA device exists but cannot be opened (container without /dev/infiniband, permissions)",
         "expose /dev/infiniband to the container and run with --cap-add IPC_LOCK", "NVIDIA/nccl#451"),
    _sig("nccl.modify-qp-failed", "ibv_modify_qp", r"ibv_modify_qp failed", "error",
         "the QP could not move to RTR/RTS: usually a wrong GID (RoCE v1, link-local, empty or another netdev's)",
         _GID_FIX, "NVIDIA/nccl troubleshooting guide (RoCE GID index)"),
    _sig("nccl.modify-qp-einval", "ibv_modify_qp", _MODIFY_QP + r"Invalid argument", "error",
         "EINVAL from ibv_modify_qp: the GID index points at a RoCE v1, link-local or missing entry",
         _GID_FIX, "NVIDIA/nccl-tests#185, NVIDIA/nccl troubleshooting guide", refines="nccl.modify-qp-failed"),
    _sig("nccl.modify-qp-enetunreach", "ibv_modify_qp", _MODIFY_QP + r"Network is unreachable", "error",
         "ENETUNREACH: the kernel has no route from this GID's netdev to the peer's GID (different subnets, "
         "or NCCL paired NICs that cannot reach each other)",
         "check `ip route` on the RoCE netdev toward the peer's GID address; on rail-optimized fabrics set "
         "NCCL_CROSS_NIC=0", "NVIDIA/nccl-tests#185", refines="nccl.modify-qp-failed"),
    _sig("nccl.modify-qp-etimedout", "ibv_modify_qp", _MODIFY_QP + r"Connection timed out", "error",
         "ETIMEDOUT: neighbour (ARP/ND) resolution for the peer's GID failed on this NIC: the peer is not "
         "reachable on that subnet", "ping the peer's GID address from the RoCE netdev (`ping -I <netdev>`); "
         "give each rail its own reachable subnet", "NVIDIA/nccl#1333", refines="nccl.modify-qp-failed"),
    _sig("nccl.modify-qp-enodata", "ibv_modify_qp", _MODIFY_QP + r"No data available", "error",
         "ENODATA: the GID entry NCCL uses is empty (its address was removed or never applied)",
         "re-apply the netdev's IP address and restart the job (NCCL picks the GID once at init)",
         "NVIDIA/nccl#1333", refines="nccl.modify-qp-failed"),
    _sig("nccl.completion-error", "Got completion", _COMPLETION + r"\d+", "error",
         "an RDMA work request completed with an error", "look up the ibv_wc_status code; check both hosts' logs",
         "rdma-core libibverbs/verbs.h (enum ibv_wc_status)"),
    _sig("nccl.completion-error-12", "Got completion", _COMPLETION + r"12\b", "error",
         "status 12 (IBV_WC_RETRY_EXC_ERR): transport retries exceeded, the NICs cannot reach each other over "
         "RoCE (GID, TC, routing, drops)",
         "run ib_write_bw between the hosts with the same GID index and traffic class as NCCL; check PFC/ECN on "
         "the path; raise NCCL_IB_TIMEOUT only on very large fabrics", "NVIDIA/nccl#426, NVIDIA/nccl#1814",
         refines="nccl.completion-error"),
    _sig("nccl.completion-error-13", "Got completion", _COMPLETION + r"13\b", "error",
         "status 13 (IBV_WC_RNR_RETRY_EXC_ERR): the receiver had no buffer posted for too long",
         "check the peer for a crash or stall first (its log has the real error)",
         "rdma-core libibverbs/verbs.h", refines="nccl.completion-error"),
    _sig("nccl.completion-error-4", "Got completion", _COMPLETION + r"4\b", "error",
         "status 4 (IBV_WC_LOC_PROT_ERR): a local memory registration does not cover the buffer (GPUDirect "
         "registration, dma-buf or peer-memory problem)",
         "check nvidia-peermem / dma-buf support; retry with NCCL_NET_GDR_LEVEL=LOC to confirm GPUDirect is the "
         "cause", "NVIDIA/nccl#1405", refines="nccl.completion-error"),
    _sig("nccl.completion-error-5", "Got completion", _COMPLETION + r"5\b", "warning",
         "status 5 (IBV_WC_WR_FLUSH_ERR): queued requests flushed after the QP failed; a symptom, not the cause",
         "find the first completion error before this one (on this or the peer host)",
         "rdma-core libibverbs/verbs.h", refines="nccl.completion-error"),
    _sig("nccl.memlock", "ibv_",
         r"ibv_create_qp failed|ibv_reg_(?:dmabuf_)?mr(?:_iova2)? failed|ibv_create_cq failed", "error",
         "the pinned-memory limit (RLIMIT_MEMLOCK) is too low for NCCL's queues and buffers",
         "set `* soft memlock unlimited` and `* hard memlock unlimited` (containers: --ulimit memlock=-1)",
         "NVIDIA/nccl troubleshooting guide"),
    _sig("nccl.create-qp-failed", "ibv_create_qp", r"ibv_create_qp failed", "error",
         "NCCL could not create a queue pair: ENOMEM is the pinned-memory limit or the device's QP limit (VFs, "
         "irdma limits_sel, Soft-RoCE), EINVAL a device that cannot do the QP attributes NCCL asks for",
         "set memlock unlimited (containers: --ulimit memlock=-1); check `ibv_devinfo -v` max_qp on that device; "
         "lower NCCL_IB_QPS_PER_CONNECTION", "NVIDIA/nccl#1129, NVIDIA/nccl#562", refines="nccl.memlock"),
    _sig("nccl.gdr-disabled", "GPU Direct RDMA Disabled for HCA", r"GPU Direct RDMA Disabled for HCA", "warning",
         "GPUDirect RDMA is off: every transfer is staged through host memory",
         "modprobe nvidia-peermem and check /sys/kernel/mm/memory_peers/nv_mem; NCCL <= 2.22.3 only detects "
         "nv_peer_mem", "NVIDIA/nccl#897, NVIDIA/nccl#1676"),
    _sig("nccl.gdr-distance", "GPU Direct RDMA Disabled for GPU",
         r"GPU Direct RDMA Disabled for GPU \S+ / HCA \S+ \(distance", "warning",
         "GPUDirect RDMA is off for this GPU because the GPU-NIC PCI distance exceeds NCCL_NET_GDR_LEVEL (a "
         "topology decision, not a missing module)",
         "check the GPU-NIC distance (`tensorfabric doctor` gpu_nic_distance); put GPU and NIC under one switch, or "
         "raise NCCL_NET_GDR_LEVEL (e.g. PHB) if crossing the host bridge is acceptable",
         "NVIDIA/nccl src/graph/paths.cc ncclTopoCheckGdr"),
    _sig("nccl.bad-socket-ifname", "AF_INET", r"is neither AF_INET\(2\) nor AF_INET6\(10\)", "error",
         "NCCL_SOCKET_IFNAME names an interface that does not exist",
         "set NCCL_SOCKET_IFNAME to an existing interface (`tensorfabric env` derives it)", "NVIDIA/nccl#1837"),
    _sig("nccl.socket-loopback", "Using ", r"(?:NET/Socket|Bootstrap) ?: Using (?:\[\d+\])?[\w.@-]*:127\.\d", "error",
         "NCCL's sockets are bound to loopback (lo / 127.x): peers on other hosts cannot connect, and a hostname "
         "that resolves to 127.x makes ranks advertise it", "set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME to the "
         "data interface (`eval \"$(tensorfabric env)\"`); map the hostname to a routable address",
         "NVIDIA/nccl#1053, NVIDIA/nccl#286"),
    _sig("nccl.gid-link-local", "fe80:", r"localGid fe80:", "error",
         "the QP uses a link-local (fe80::) GID: not routed, so any path through a router fails",
         _GID_FIX, "NVIDIA/nccl#769"),
    _sig("nccl.ofi-av", "Couldn't open AV", r"NET/OFI Couldn't open AV", "error",
         "aws-ofi-nccl could not open the libfabric address vector (EFA provider missing or misconfigured)",
         "check `fi_info -p efa`, the EFA driver and that the security group allows all traffic to itself",
         "aws/aws-ofi-nccl#24"),
    _sig("nccl.ofi-no-nic-info", "No NIC info", r"NET/OFI No NIC info", "warning",
         "aws-ofi-nccl reports no PCI path for the NIC: NCCL treats it as SYS-distant and disables GPUDirect",
         "upgrade aws-ofi-nccl to a version with the instance's topology file", "NVIDIA/nccl#229"),
    _sig("nccl.watchdog-timeout", "Watchdog", r"Watchdog caught collective operation timeout", "error",
         "a collective did not finish within the process-group timeout (network stall or hang)",
         "find the first failing rank's log; check for PFC storms or drops and that every node uses the same "
         "transport", "NVIDIA/nccl#234, pytorch/pytorch#97191"),
    _sig("nccl.net-plugin-failed", "NET/Plugin",
         _PLUGIN_LOAD + r"(?!lib[nr]ccl-net[\w.-]{0,32}: cannot open shared object file)/?[\w.+-]{1,64}"
         r"(?:/[\w.+-]{1,64}){0,12}: (?:version `|undefined symbol|wrong ELF class|cannot open shared object file)",
         "error",
         "a net plugin library is there but did not load (a missing dependency, a glibc or libfabric version it "
         "needs, a wrong architecture): NCCL went on with its internal IB or socket transport",
         "install the plugin built for this image (glibc, libfabric and CUDA of the container), or remove it from "
         "LD_LIBRARY_PATH; `ldd <plugin>` shows the missing piece",
         "awslabs/awsome-distributed-ai#292, NVIDIA/nccl src/plugin/plugin_open.cc"),
    _sig("nccl.net-plugin-unsupported", "ncclNetPlugin", r"Failed to find ncclNetPlugin(?:_v\d+)? symbol", "warning",
         "a net plugin library loaded but exports no net API version this NCCL supports: NCCL uses its internal "
         "transport instead", "use the plugin release built for this NCCL version (e.g. the HPC-X "
         "nccl-rdma-sharp-plugins or aws-ofi-nccl matching it)", "NVIDIA/nccl#1528, NVIDIA/nccl#1267"),
    _sig("nccl.network-not-found", "Error: network", r"Error: network \S{1,64} not found", "error",
         "NCCL_NET names a network that is not available here (its plugin is not installed or did not initialise, "
         "e.g. gIB outside a GCP RDMA VM): NCCL init fails with ncclInvalidUsage",
         "unset NCCL_NET (and NCCL_NET_PLUGIN) or install the plugin that provides that network; NCCL_NET=IB or "
         "Socket name the internal transports", "NVIDIA/nccl src/net.cc (\"Error: network %s not found\")"),
    _sig("nccl.ofi-init-failed", "NET/OFI",
         r"NET/OFI (?:\S{1,32} )?(?:initialization failed|Initializing plugin failed|Unable to find a protocol that "
         r"worked|Could not find any optimal provider|Caught exception in plugin init)", "error",
         "aws-ofi-nccl could not initialise (no usable libfabric provider: EFA device or driver missing in the "
         "container, wrong FI_PROVIDER): NCCL falls back to its internal transports, usually TCP sockets",
         "check `fi_info -p efa` inside the container, pass the EFA devices (vpc.amazonaws.com/efa resources) and "
         "use the libfabric the plugin was built for", "NVIDIA/nccl#229, aws-samples/aws-do-eks#54"),
    _sig("nccl.soft-roce", "rxe", r"\[\d{1,4}\] ?rxe[\w.-]{0,32}:", "warning",
         "the RDMA device is Soft-RoCE (rdma_rxe): RoCE done in software over a plain NIC, with no PCI device "
         "behind it; not hardware RDMA, no GPUDirect, far below line rate",
         "use the hardware RoCE NIC (NCCL_IB_HCA=<mlx5_N>) and remove the rxe link (`rdma link delete rxe0`)",
         "linux-rdma rdma-core docs (rxe), SoftRoCE/rxe-dev#46"),
    _sig("nccl.ib-async-event", "async event", r"NET/IB ?: Got async event", "warning",
         "the HCA reported an asynchronous event (port down, fatal error)",
         "check the port state and the kernel log (dmesg) on that host", "NVIDIA/nccl env.rst"
         " NCCL_IB_RETURN_ASYNC_EVENTS"),
)


def match_signatures(line: str) -> list[Signature]:
    """Signatures found in ``line``; a refined signature replaces the general one it refines."""
    hits = [s for s in SIGNATURES if s.needle in line and s.pattern.search(line)]
    refined = {s.refines for s in hits if s.refines}
    return [s for s in hits if s.id not in refined]
