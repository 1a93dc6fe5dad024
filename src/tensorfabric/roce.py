"""The RoCEv2 lossless recipe in one place: the numbers fabric, host, telemetry and sim all default to.

Facts and their sources are in ``shared/reference/lossless-config.md``: NVIDIA, AMD/Broadcom and Cisco mark RoCE
data DSCP 26 (AF31) on priority 3 with PFC, CNPs DSCP 48 on a strict priority (6 on ConnectX and Spectrum);
``NCCL_IB_TC`` is the IP traffic-class byte, DSCP << 2 plus the ECN bits (106 = 26 << 2 | ECT(0)); NICs and
Spectrum switches map DSCP to priority as ``DSCP >> 3`` by default. The pause-quanta table is the peer response
time per link speed that SONiC uses (IEEE 802.3 Annex 31B), in 512-bit quanta.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "CNP_DSCP",
    "CNP_PRIORITY",
    "ECN_KMAX_BYTES",
    "ECN_KMIN_BYTES",
    "ECN_PMAX_PERCENT",
    "ECT0",
    "LOSSLESS_PRIORITY",
    "PAUSE_QUANTA",
    "PAUSE_QUANTUM_BITS",
    "PFCWD_ACTION",
    "PFCWD_DETECTION_MS",
    "PFCWD_POLL_MS",
    "PFCWD_RESTORATION_MS",
    "ROCE_DSCP",
    "ROCE_UDP_PORT",
    "SONIC_LOSSLESS_PRIORITIES",
    "TRAFFIC_CLASS",
    "default_priority",
    "dscp_of_traffic_class",
    "pause_quanta",
    "traffic_class",
]

ROCE_DSCP = 26
"""DSCP of RoCE data (AF31)."""
CNP_DSCP = 48
"""DSCP of congestion notification packets (CS6); the NIC firmware default ``CNP_DSCP_P1``."""
LOSSLESS_PRIORITY = 3
"""The PFC priority RoCE rides: 26 >> 3."""
CNP_PRIORITY = 6
"""The strict priority CNPs ride on ConnectX/Spectrum (``CNP_802P_PRIO_P1``); Broadcom Thor2 uses 7."""
SONIC_LOSSLESS_PRIORITIES = (LOSSLESS_PRIORITY, 4)
"""The priorities SONiC's stock config enables PFC on (``pfc_enable: "3,4"``, lossless-config.md §1); a monitor
watching SONiC switches treats both as lossless."""
ROCE_UDP_PORT = 4791
"""The IANA UDP destination port of RoCEv2."""
ECT0 = 2
"""ECN codepoint ECT(0) in the low two bits of the traffic-class byte."""
PAUSE_QUANTUM_BITS = 512
"""One pause quantum is 512 bit times (IEEE 802.3 Annex 31B / 802.1Qbb)."""

PFCWD_DETECTION_MS = 200
"""PFC watchdog detection time: SONiC's ``pfcwd start_default`` (sonic-utilities pfcwd/main.py
``DEFAULT_DETECTION_TIME = 200``) and NVIDIA's RoCE recipe; long enough that a congested but draining queue (PFC
pauses last microseconds to a few ms) is never taken for a storm, short enough that a stuck receiver cannot hold
the fabric for more than a fraction of a second."""
PFCWD_RESTORATION_MS = 200
"""PFC watchdog restoration time: SONiC's ``DEFAULT_RESTORATION_TIME = 200``. One value for every rule and renderer
(rules once advised 200 and 400 ms): the vendor default, so a config that states it and one that relies on
``start_default`` behave the same."""
PFCWD_POLL_MS = 100
"""Watchdog poll interval. SONiC defaults to 200 ms; detection is counted in whole polls, so polling at half the
detection time keeps the detection of a storm within 200-300 ms instead of 200-400 ms (NX-OS and Cumulus express
detection as a multiple of this interval)."""
PFCWD_ACTION = "drop"
"""Drop the stuck queue's frames during a storm (SONiC's ``DEFAULT_ACTION``): the pause stops spreading upstream."""
ECN_KMIN_BYTES = 150_000
"""ECN/WRED Kmin on the RoCE queue: NVIDIA's RoCE default (Cumulus ``nv set qos roce``: 150 KB)."""
ECN_KMAX_BYTES = 1_500_000
"""ECN/WRED Kmax: NVIDIA's RoCE default 1.5 MB, below the lossless PG's XOFF so DCQCN reacts before PFC pauses."""
ECN_PMAX_PERCENT = 100
"""Marking probability at Kmax: NVIDIA's RoCE default (mark every packet above Kmax rather than drop)."""

PAUSE_QUANTA: Mapping[int, int] = {
    0: 1, 1: 2, 10: 67, 25: 80, 40: 118, 50: 147, 100: 394, 200: 453, 400: 905, 800: 905,
}
"""Peer response time in pause quanta by link speed in Gb/s (0 stands for 100 Mb/s)."""


def traffic_class(dscp: int = ROCE_DSCP, ecn: int = ECT0) -> int:
    """The IP ToS / traffic-class byte (``NCCL_IB_TC``) for ``dscp`` with ECN bits ``ecn``."""
    if not 0 <= dscp <= 63 or not 0 <= ecn <= 3:
        raise ValueError(f"DSCP {dscp} must be 0..63 and ECN bits {ecn} 0..3")
    return dscp << 2 | ecn


TRAFFIC_CLASS = traffic_class()
"""106, the one ``NCCL_IB_TC`` every part of tensorfabric derives (env, doctor, fabric render and lint, docs).

NCCL copies the value into the GRH traffic class of every QP (``ah_attr.grh.traffic_class``); on RoCE v2 that is
the IP ToS byte, and mlx5 takes the DSCP from its upper six bits, so 104 and 106 put RoCE in the same lossless
class. They differ in the low two ECN bits: 104 sends Not-ECT, which a switch may not CE-mark (RED drops or leaves
it instead), so DCQCN would depend on the NIC rewriting the bits; 106 carries ECT(0) and is ECN-capable as sent.
106 is also what NVIDIA's doRoCE writes to /etc/nccl.conf, mlnx-tools' ``cma_roce_tos`` default and the
``UCX_IB_TRAFFIC_CLASS`` the same guides give (shared/reference/lossless-config.md, nccl.md)."""


def dscp_of_traffic_class(tclass: int) -> int:
    """The DSCP a traffic-class byte carries (mlx5 programs ``traffic_class >> 2``)."""
    if not 0 <= tclass <= 255:
        raise ValueError(f"traffic class {tclass} must be 0..255")
    return tclass >> 2


def default_priority(dscp: int) -> int:
    """The priority ConnectX, Spectrum and Intel E800 give ``dscp`` without an explicit map."""
    return dscp >> 3


def pause_quanta(speed_bps: float) -> int | None:
    """Pause quanta of the peer response at ``speed_bps``, or ``None`` for a speed the table lacks."""
    gbps = 0 if speed_bps == 100e6 else round(speed_bps / 1e9)
    if gbps * 1e9 != speed_bps and speed_bps != 100e6:
        return None
    return PAUSE_QUANTA.get(gbps)
