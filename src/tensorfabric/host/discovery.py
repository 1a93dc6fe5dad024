"""Discover RDMA devices, GIDs, netdevs, GPUs and limits from a filesystem tree (live ``/`` or a fixture).

Paths follow the kernel's layout (Documentation/ABI/stable/sysfs-class-infiniband, sysfs-class-net):

* ``sys/class/infiniband/<dev>/{node_type,fw_ver,hca_type,device}`` and ``ports/<p>/{state,phys_state,rate,
  link_layer,gids/<i>,gid_attrs/types/<i>,gid_attrs/ndevs/<i>}``; MLNX_OFED adds ``tc/<p>/traffic_class``;
* ``sys/class/net/<if>/{mtu,speed,operstate,device}`` and MLNX_OFED ``ecn/roce_{np,rp}/enable/<prio>``;
* ``sys/bus/pci/devices/<bdf>/{vendor,class,device,numa_node}`` for GPUs (vendor 0x10de, class 0x0300/0x0302);
* ``dev/infiniband``, ``proc/self/limits`` (RLIMIT_MEMLOCK), ``proc/net/route``;
* NCCL's configuration files in NCCL's order (``host.nccl_conf``): ``NCCL_CONF_FILE`` or ``<home>/.nccl.conf``,
  then ``etc/nccl.conf``, each read inside the tree;
* peer-memory evidence for GPUDirect RDMA: ``sys/kernel/mm/memory_peers/nv_mem``, ``sys/module/nvidia_peermem``.

Nothing here raises for a missing optional file; only an unusable root is an error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from tensorfabric.fsutil import locate_sysfs
from tensorfabric.host.gids import Gid
from tensorfabric.host.nccl_conf import NcclConf, parse_nccl_conf, read_nccl_conf
from tensorfabric.host.pci import GpuAffinity, chain_of, gpu_affinity
from tensorfabric.host.records import Gpu, HostInventory, Memlock, NetDev, RdmaDevice, RdmaPort
from tensorfabric.host.sysfs import Tree

__all__ = ["affinity", "discover", "parse_memlock", "parse_nccl_conf", "parse_route"]

_NVIDIA = 0x10DE
_GPU_CLASSES = (0x0300, 0x0302)  # VGA-compatible display controller, 3D controller
_TCLASS = re.compile(r"tclass=(-?\d+)")
_PEERMEM = ("sys/kernel/mm/memory_peers/nv_mem", "sys/module/nvidia_peermem", "sys/module/nv_peer_mem")
_CONTAINER_MARKERS = (".dockerenv", "run/.containerenv")


def discover(root: str | os.PathLike[str] = "/", *, environ: Mapping[str, str] | None = None,
             home: str | None = None, cwd: str = "/") -> HostInventory:
    """Read everything the doctor needs from the tree at ``root`` (either spelling: ``/`` or ``/sys``).

    ``environ`` and ``home`` choose NCCL's configuration files as NCCL would in that process (``NCCL_CONF_FILE``,
    else ``home``/.nccl.conf; then /etc/nccl.conf); without them only /etc/nccl.conf is read. A relative
    ``NCCL_CONF_FILE`` is relative to ``cwd``, as NCCL's ``fopen`` has it."""
    where = locate_sysfs(root, need_root=True)
    assert where.root is not None, "locate_sysfs(need_root=True) returned no tree root"
    tree = Tree(where.root)
    rdma = tuple(_rdma_device(tree, name) for name in tree.listdir("sys/class/infiniband"))
    netdevs = {name: _netdev(tree, name) for name in tree.listdir("sys/class/net")}
    gpus, paths, numa = _pci(tree, rdma)
    dev_ib = tuple(tree.listdir("dev/infiniband")) if tree.is_dir("dev/infiniband") else None
    limits = tree.read("proc/self/limits")
    route = tree.read("proc/net/route")
    nccl_conf = _nccl_conf(tree, environ or {}, home, cwd)
    return HostInventory(
        root=str(where.root), rdma_devices=rdma, netdevs=netdevs, gpus=gpus, pci_paths=paths, pci_numa=numa,
        dev_infiniband=dev_ib, memlock=parse_memlock(limits) if limits is not None else None,
        default_route=parse_route(route) if route is not None else None,
        gdr_support=tuple(p for p in _PEERMEM if tree.exists(p)) + _peermem_modules(tree),
        in_container=any(tree.exists(m) for m in _CONTAINER_MARKERS),
        nccl_conf=dict(nccl_conf.values), nccl_conf_read=nccl_conf,
    )


def _nccl_conf(tree: Tree, environ: Mapping[str, str], home: str | None, cwd: str) -> NcclConf:
    def read(path: str) -> str | None:
        # Bytes as NCCL's getline sees them: Tree.read strips, which would hide a leading space in a name.
        try:
            data = tree.path(os.path.join(cwd, path)).read_bytes()
        except OSError:
            return None
        return data.decode("utf-8", errors="replace")

    return read_nccl_conf(environ, home, read)


def affinity(inv: HostInventory) -> tuple[GpuAffinity, ...]:
    """Nearest RDMA device and PCI distance for every GPU (empty without GPUs or RDMA devices)."""
    nics = {d.name: d.pci_address for d in inv.rdma_devices if d.pci_address}
    return gpu_affinity([g.pci_address for g in inv.gpus], nics, inv.pci_paths, inv.pci_numa)


def _numa(value: int | None) -> int | None:
    return None if value is None or value < 0 else value


def _rdma_device(tree: Tree, name: str) -> RdmaDevice:
    base = f"sys/class/infiniband/{name}"
    real = tree.resolve(f"{base}/device") or ""
    chain = chain_of(real)
    ports = tuple(_port(tree, name, int(p)) for p in tree.listdir(f"{base}/ports") if p.isdecimal())
    return RdmaDevice(
        name=name, node_type=tree.read(f"{base}/node_type") or "", fw_ver=tree.read(f"{base}/fw_ver") or "",
        hca_type=tree.read(f"{base}/hca_type") or "", driver=tree.link_name(f"{base}/device/driver"),
        pci_address=chain[-1] if chain else None, numa_node=_numa(tree.read_int(f"{base}/device/numa_node")),
        ports=ports,
    )


def _port(tree: Tree, dev: str, port: int) -> RdmaPort:
    base = f"sys/class/infiniband/{dev}/ports/{port}"
    gids = []
    for entry in tree.listdir(f"{base}/gids"):
        if not entry.isdecimal():
            continue
        gid = Gid(int(entry), tree.read(f"{base}/gids/{entry}") or "",
                  tree.read(f"{base}/gid_attrs/types/{entry}") or None,
                  tree.read(f"{base}/gid_attrs/ndevs/{entry}") or None)
        if not gid.is_zero:
            gids.append(gid)
    gids.sort(key=lambda g: g.index)
    netdev = next((g.ndev for g in gids if g.ndev), None) or _port_netdev(tree, dev, port)
    tc_text = tree.read(f"sys/class/infiniband/{dev}/tc/{port}/traffic_class")
    return RdmaPort(
        device=dev, port=port, state=tree.read(f"{base}/state") or "", phys_state=tree.read(f"{base}/phys_state") or "",
        rate=tree.read(f"{base}/rate") or "", link_layer=tree.read(f"{base}/link_layer") or "", gids=tuple(gids),
        netdev=netdev, traffic_class=_traffic_class(tc_text),
    )


def _port_netdev(tree: Tree, dev: str, port: int) -> str | None:
    """The netdev of the same PCI function (IPoIB or an Ethernet port without GIDs yet), matched by dev_port."""
    names = tree.listdir(f"sys/class/infiniband/{dev}/device/net")
    for name in names:
        if tree.read_int(f"sys/class/infiniband/{dev}/device/net/{name}/dev_port") == port - 1:
            return name
    return names[0] if names else None


def _traffic_class(text: str | None) -> int | None:
    if not text:
        return None
    match = _TCLASS.search(text)
    raw = match.group(1) if match else text.split()[0]
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if 0 <= value <= 255 else None


def _netdev(tree: Tree, name: str) -> NetDev:
    base = f"sys/class/net/{name}"
    real = tree.resolve(f"{base}/device") if tree.exists(f"{base}/device") else None
    chain = chain_of(real or "")
    speed = tree.read_int(f"{base}/speed")
    return NetDev(
        name=name, mtu=tree.read_int(f"{base}/mtu"), speed_mbps=speed if speed is not None and speed > 0 else None,
        operstate=tree.read(f"{base}/operstate") or "", pci_address=chain[-1] if chain else None,
        ecn_np=_ecn(tree, f"{base}/ecn/roce_np/enable"), ecn_rp=_ecn(tree, f"{base}/ecn/roce_rp/enable"),
    )


def _ecn(tree: Tree, base: str) -> dict[int, bool]:
    return {int(p): tree.read_int(f"{base}/{p}") == 1 for p in tree.listdir(base) if p.isdecimal()}


def _pci(tree: Tree, rdma: tuple[RdmaDevice, ...]) -> tuple[
        tuple[Gpu, ...], dict[str, tuple[str, ...]], dict[str, int | None]]:
    gpus: list[Gpu] = []
    paths: dict[str, tuple[str, ...]] = {}
    numa: dict[str, int | None] = {}
    wanted = {d.pci_address for d in rdma if d.pci_address}
    for bdf in tree.listdir("sys/bus/pci/devices"):
        base = f"sys/bus/pci/devices/{bdf}"
        klass = tree.read_int(f"{base}/class")
        is_gpu = tree.read_int(f"{base}/vendor") == _NVIDIA and klass is not None and klass >> 8 in _GPU_CLASSES
        if not is_gpu and bdf not in wanted:
            continue
        paths[bdf] = chain_of(tree.resolve(base) or "")
        numa[bdf] = _numa(tree.read_int(f"{base}/numa_node"))
        if is_gpu:
            gpus.append(Gpu(bdf, tree.read(f"{base}/device") or "", numa[bdf]))
    # RDMA devices whose PCI function is not listed under sys/bus/pci (partial captures): use the class link.
    for dev in rdma:
        if dev.pci_address and dev.pci_address not in paths:
            paths[dev.pci_address] = chain_of(tree.resolve(f"sys/class/infiniband/{dev.name}/device") or "")
            numa[dev.pci_address] = dev.numa_node
    return tuple(gpus), paths, numa


def _peermem_modules(tree: Tree) -> tuple[str, ...]:
    text = tree.read("proc/modules") or ""
    loaded = {line.split()[0] for line in text.splitlines() if line.strip()}
    return tuple(f"proc/modules:{m}" for m in ("nvidia_peermem", "nv_peer_mem") if m in loaded)


def parse_memlock(text: str) -> Memlock:
    """RLIMIT_MEMLOCK (soft) from ``/proc/<pid>/limits``: bytes, ``"unlimited"`` or ``None`` if absent."""
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            fields = line[len("Max locked memory"):].split()
            if not fields:
                return None
            if fields[0] == "unlimited":
                return "unlimited"
            return int(fields[0]) if fields[0].isdecimal() else None
    return None


def parse_route(text: str) -> str | None:
    """The interface of the default IPv4 route (lowest metric) in ``/proc/net/route``."""
    best: tuple[int, str] | None = None
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8 or fields[1] != "00000000" or fields[7] != "00000000":
            continue
        try:
            flags, metric = int(fields[3], 16), int(fields[6])
        except ValueError:
            continue
        if flags & 0x1 and (best is None or metric < best[0]):  # RTF_UP
            best = (metric, fields[0])
    return best[1] if best else None
