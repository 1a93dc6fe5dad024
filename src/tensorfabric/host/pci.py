"""GPU <-> NIC distance from the PCI tree, in NCCL's vocabulary.

NCCL (src/graph/topo.cc) collapses a PCIe switch -- upstream port plus downstream ports -- into one node, so:

* ``PIX``: both devices hang off the same switch (one switch between them);
* ``PXB``: the path crosses several switches but not the host bridge;
* ``PHB``: the path goes through a host bridge (the CPU) on one NUMA node;
* ``SYS``: the path crosses the inter-socket interconnect.

A chain is the sysfs device path from the host bridge down, e.g.
``("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:02.0", "0000:05:00.0")``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["DISTANCES", "Distance", "GpuAffinity", "chain_of", "distance", "gpu_affinity", "worst"]

Distance = Literal["PIX", "PXB", "PHB", "SYS"]
DISTANCES: tuple[Distance, ...] = ("PIX", "PXB", "PHB", "SYS")
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_HOST_BRIDGE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")


def chain_of(device_path: str) -> tuple[str, ...]:
    """The host bridge and PCI addresses in a resolved sysfs device path; empty when it is not a PCI device."""
    parts = device_path.split("/")
    start = next((i for i, p in enumerate(parts) if _HOST_BRIDGE.match(p)), None)
    if start is None:
        return ()
    chain = [parts[start]]
    for part in parts[start + 1:]:
        if not _BDF.match(part):
            break
        chain.append(part)
    return tuple(chain) if len(chain) > 1 else ()


def distance(a: Sequence[str], b: Sequence[str], numa_a: int | None = None, numa_b: int | None = None) -> Distance:
    """The NCCL path type between two devices given their chains and NUMA nodes."""
    if not a or not b or a[0] != b[0]:
        # Different host bridges: same socket means through the CPU, else across the interconnect.
        return "PHB" if numa_a == numa_b and numa_a is not None else "SYS"
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    if common <= 1:
        return "PHB"
    # Each device hangs directly off a downstream port of the common switch -> one switch between them.
    if max(len(a) - common, len(b) - common) <= 2:
        return "PIX"
    return "PXB"


def worst(distances: Sequence[Distance]) -> Distance:
    return max(distances, key=DISTANCES.index)


@dataclass(frozen=True, slots=True)
class GpuAffinity:
    gpu: str
    nic: str
    distance: Distance


def gpu_affinity(gpus: Sequence[str], nics: Mapping[str, str], paths: Mapping[str, Sequence[str]],
                 numa: Mapping[str, int | None]) -> tuple[GpuAffinity, ...]:
    """For each GPU (PCI address), the nearest RDMA device (``nics``: name -> PCI address) and its distance."""
    result = []
    for gpu in gpus:
        best: tuple[int, str, Distance] | None = None
        for name, address in sorted(nics.items()):
            d = distance(paths.get(gpu, ()), paths.get(address, ()), numa.get(gpu), numa.get(address))
            rank = DISTANCES.index(d)
            if best is None or rank < best[0]:
                best = (rank, name, d)
        if best is not None:
            result.append(GpuAffinity(gpu, best[1], best[2]))
    return tuple(result)
