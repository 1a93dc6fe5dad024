"""Versions of what one host's data path runs on, for ``doctor --json`` and the fleet's version rules.

Read without importing torch, NIXL or UCX (the doctor must stay cheap and work without the extras):

* Python packages by their distribution metadata: ``torch``, NCCL from its wheel (``nvidia-nccl-cu12`` / ``-cu13`` /
  ``-cu11``, what torch loads), NIXL (``nixl`` or its ``nixl-cu12`` / ``nixl-cu13`` flavour), ``ucxx``;
* a system NCCL from the library file name (``libnccl.so.2.21.5`` under the usual library directories), which is
  how a reporter found the one node with a different NCCL in NVIDIA/nccl#1267;
* the kernel (``proc/sys/kernel/osrelease``) and each RDMA driver's module version
  (``sys/module/<driver>/version``, set by out-of-tree drivers such as MLNX_OFED's mlx5_core; an in-tree driver has
  none and is the kernel's, which is what ``ethtool -i`` prints for it);
* UCX from ``ucx_info -v`` when a command runner is given (``# Library version: 1.16.0``; older builds print
  ``# UCT version=1.9.0 revision ...``).
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

__all__ = ["PACKAGES", "software_versions", "ucx_version"]

PACKAGES: dict[str, tuple[str, ...]] = {
    "tensorfabric": ("tensorfabric",),
    "torch": ("torch",),
    "nccl": ("nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-nccl-cu11"),
    "nixl": ("nixl", "nixl-cu12", "nixl-cu13"),
    "ucxx": ("ucxx-cu12", "ucxx-cu13", "ucxx"),
}
"""Name in the report -> distributions that provide it, the first installed one wins."""
_LIB_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib/aarch64-linux-gnu", "usr/lib64", "usr/lib", "usr/local/lib",
             "usr/local/cuda/lib64", "usr/local/nccl/lib", "opt/nccl/lib")
_NCCL_LIB = re.compile(r"^libnccl\.so\.(\d+\.\d+\.\d+)$")
_UCX = re.compile(r"^#\s*(?:Library version:\s*|UCT version=)(\d+\.\d+(?:\.\d+)?)")

Lookup = Callable[[str], str]
Runner = Callable[[Sequence[str]], str]


def _package(names: Iterable[str], lookup: Lookup) -> str | None:
    for name in names:
        try:
            return lookup(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace").strip() or None
    except OSError:
        return None


def _system_nccl(root: Path) -> str | None:
    found = []
    for rel in _LIB_DIRS:
        try:
            names = [p.name for p in (root / rel).iterdir()]
        except OSError:
            continue
        found += [m.group(1) for m in map(_NCCL_LIB.match, names) if m]
    return max(found, key=lambda v: tuple(int(x) for x in v.split("."))) if found else None


def ucx_version(run: Runner) -> str | None:
    """UCX's library version from ``ucx_info -v``; None when the tool is absent or says nothing readable."""
    try:
        text = run(["ucx_info", "-v"])
    except OSError:
        return None
    for line in text.splitlines():
        match = _UCX.match(line.strip())
        if match:
            return match.group(1)
    return None


def software_versions(root: str | Path = "/", drivers: Iterable[str] = (), *,
                      lookup: Lookup = importlib.metadata.version, run: Runner | None = None) -> dict[str, str]:
    """Every version found (name -> version); what is absent is left out rather than guessed."""
    base = Path(root)
    out: dict[str, str] = {}
    for name, dists in PACKAGES.items():
        version = _package(dists, lookup)
        if version:
            out[name] = version
    if "nccl" not in out:
        system = _system_nccl(base)
        if system:
            out["nccl"] = system
    kernel = _read(base / "proc/sys/kernel/osrelease")
    if kernel:
        out["kernel"] = kernel
    for driver in sorted(set(drivers)):
        version = _read(base / "sys/module" / driver / "version")
        out[f"driver:{driver}"] = version or (f"in-tree ({kernel})" if kernel else "in-tree")
    if run is not None:
        ucx = ucx_version(run)
        if ucx:
            out["ucx"] = ucx
    return out
