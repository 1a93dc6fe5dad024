"""GID tables as users paste them, read into one record per node and port.

Forms (line rules in :mod:`tensorfabric.host.gid_forms`): ``show_gids``; ``ibv_devinfo -v``/``-vv`` port sections,
also without their ``hca_id:``; sysfs ``gids/N``, ``gid_attrs/types/N`` and ``gid_attrs/ndevs/N`` read with ``grep``,
``cat``, ``tail`` or a loop; and port listings that hold no GID table (``rdma link``, ``ibstat``, ``ibstatus``,
``ibdev2netdev``), which say so rather than fail. The paste goes through :func:`tensorfabric.intake.normalise`
first, so prompts, collector prefixes, timestamps and Markdown around it do not matter.

One paste may hold several nodes. A node boundary is, in this order of strength: a collector prefix naming two or
more hosts (pdsh, kubectl, Ray, JSON records), a prompt naming a host (``root@gpu-a17:~# show_gids``), a heading that
names one (``## gpu-a17``), and, with no name at all, a second table for a port that disagrees with the first (a
different GID at one index, or a different set of indices in two complete tables: two pods' ``show_gids``). Unnamed
nodes are numbered ``#1``, ``#2`` in paste order; a paste of one node has no node name.

What is not read is listed in the :class:`~tensorfabric.intake.ReadReport`, never fatal: a text is refused (ParseError)
only when it is not text, empty, or holds no line of any form above.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from tensorfabric.findings import Finding
from tensorfabric.host.gid_forms import Block, PortKey, Stream
from tensorfabric.host.gids import Gid, assume_pair_types, preferred_gid
from tensorfabric.host.records import RdmaPort
from tensorfabric.intake import Line, ReadReport, Tally, normalise

__all__ = ["NO_ROCE_GIDS", "CapturedPort", "GidCapture", "parse_gid_capture", "recommended_index"]

NO_ROCE_GIDS = "no RoCE GIDs: no RoCE netdev in this namespace or pod"
_PDSH = re.compile(r"([A-Za-z][\w.-]{0,252}): ")
_SRUN = re.compile(r" {0,6}(\d{1,6}): ")
_TABLE_WORDS = ("GID", "gid", "fe80", ":ffff:", "DEV", "hca_id", "port", "Port", "link", "CA '", "/sys/")
_EXPECTED = ("show_gids, ibv_devinfo -v, sysfs gids, rdma link or ibstat output (e.g. 'mlx5_0  1  3  "
             "0000:0000:0000:0000:0000:ffff:0a00:0001  10.0.0.1  v2  eth0' or 'GID[  3]:  ::ffff:10.0.0.1, RoCE v2')")


@dataclass(frozen=True, slots=True)
class CapturedPort:
    device: str
    port: int
    gids: tuple[Gid, ...] = ()
    state: str | None = None
    link_layer: str | None = None
    netdev: str | None = None
    formats: tuple[str, ...] = ()
    node: str = ""
    """The host or pod the table came from; "" when the paste holds one node."""
    types_assumed: bool = False
    """The paste printed no RoCE versions; they were assumed from the mlx5 pairing (v1 at 2k, v2 at 2k+1)."""

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def label(self) -> str:
        """``gpu-a17 mlx5_0:1``: the name with its node, as subjects and summaries show it."""
        return f"{self.node} {self.name}" if self.node else self.name

    @property
    def is_roce(self) -> bool:
        if self.link_layer is not None:
            return self.link_layer.lower() == "ethernet"
        return any(g.version is not None for g in self.gids)

    @property
    def usable(self) -> bool:
        """Active, or of unknown state (``show_gids`` carries none)."""
        return self.state is None or "ACTIVE" in self.state.upper()

    def as_port(self) -> RdmaPort:
        """The port record the doctor's GID checks read (state defaults to active when the capture has none)."""
        return RdmaPort(self.device, self.port, state="4: ACTIVE" if self.usable else (self.state or ""),
                        link_layer=self.link_layer or ("Ethernet" if self.is_roce else ""), gids=self.gids,
                        netdev=self.netdev)


def recommended_index(port: CapturedPort) -> int | None:
    """The RoCE v2 IPv4 GID to use: NCCL >= 2.21's own pick unless that sits on an overlay netdev (then the RoCE
    netdev's, see :func:`~tensorfabric.host.gids.preferred_gid`); ``None`` when the port has none."""
    gid = preferred_gid(port.gids, family="AF_INET", version=2)
    return gid.index if gid is not None else None


@dataclass(frozen=True, slots=True)
class GidCapture(Sequence[CapturedPort]):
    """Every port of a paste, per node, with what the paste said beyond them and how it was read.

    Iterating it yields the ports (a sequence of :class:`CapturedPort`)."""

    source: str
    ports: tuple[CapturedPort, ...]
    nodes: tuple[str, ...]
    """Node names in paste order (``("",)`` for a paste of one unnamed node)."""
    empty: tuple[str, ...]
    """Nodes whose GID table was listed and empty (``show_gids`` with ``n_gids_found=0``)."""
    read: ReadReport

    def __iter__(self) -> Iterator[CapturedPort]:
        return iter(self.ports)

    def __len__(self) -> int:
        return len(self.ports)

    @overload
    def __getitem__(self, index: int) -> CapturedPort: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[CapturedPort]: ...
    def __getitem__(self, index: int | slice) -> CapturedPort | Sequence[CapturedPort]:
        return self.ports[index]

    def findings(self) -> list[Finding]:
        """What the paste says about whole nodes, as answers: an empty table, or ports listed without any table."""
        found = []
        for node in self.nodes:
            subject = f"{node} GID table" if node else "GID table"
            evidence = {"node": node, "source": self.source}
            if node in self.empty:
                found.append(Finding(
                    "gid.no-roce-gids", "warning", subject, f"{NO_ROCE_GIDS} (show_gids listed no GID)",
                    evidence, "run show_gids in the host's namespace, or give the pod the RoCE netdev (a Multus "
                    "macvlan or SR-IOV network attachment on the RoCE port); a calico/flannel veth has no RoCE GIDs"))
                continue
            ports = [p for p in self.ports if p.node == node]
            if ports and not any(p.gids for p in ports):
                forms = ", ".join(dict.fromkeys(f for p in ports for f in p.formats))
                found.append(Finding(
                    "gid.no-table", "info", subject, f"no GID table in this paste ({forms} list ports, not "
                    "their GIDs), so no index can be recommended", evidence,
                    "add `show_gids` or `ibv_devinfo -v` output from the same host"))
        return found

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "nodes": list(self.nodes), "empty_tables": list(self.empty),
                "answers": [f.message for f in self.findings()], "read": self.read.to_dict()}


@dataclass
class _Node:
    label: str
    gids: dict[PortKey, dict[int, Gid]] = field(default_factory=dict)
    full: set[PortKey] = field(default_factory=set)
    blocks: list[Block] = field(default_factory=list)
    named: bool = False

    def conflicts(self, block: Block) -> bool:
        if block.empty_table:
            return any(self.gids.values())
        for key, table in block.gids.items():
            mine = self.gids.get(key)
            if not mine:
                continue
            if any(i in mine and mine[i].address != gid.address for i, gid in table.items()):
                return True
            if block.full and key in self.full and set(mine) != set(table):
                return True
        return False

    def add(self, block: Block) -> None:
        self.blocks.append(block)
        for key, table in block.gids.items():
            mine = self.gids.setdefault(key, {})
            for index, gid in table.items():
                mine.setdefault(index, gid)
            if block.full:
                self.full.add(key)

    @property
    def empty(self) -> bool:
        return any(b.empty_table for b in self.blocks) and not any(self.gids.values())

    def ports(self, node: str) -> list[CapturedPort]:
        keys: dict[PortKey, list[str]] = {}
        types: dict[PortKey, dict[int, str]] = {}
        ndevs: dict[PortKey, dict[int, str]] = {}
        fields: dict[PortKey, dict[str, str]] = {}
        for block in self.blocks:
            for key, forms in block.forms.items():
                seen = keys.setdefault(key, [])
                seen.extend(f for f in forms if f not in seen)
            for source, target in ((block.types, types), (block.ndevs, ndevs)):
                for key, by_index in source.items():
                    target.setdefault(key, {}).update(by_index)
            for key, named in block.fields.items():
                target_fields = fields.setdefault(key, {})
                for name, value in named.items():
                    # a netdev read from the table's default entries yields to one a listing states
                    if name != "netdev" or name not in target_fields or block.form != "show_gids":
                        target_fields[name] = value
        return [self._port(key, tuple(forms), types.get(key, {}), ndevs.get(key, {}), fields.get(key, {}), node)
                for key, forms in sorted(keys.items())]

    def _port(self, key: PortKey, forms: tuple[str, ...], types: dict[int, str], ndevs: dict[int, str],
              values: dict[str, str], node: str) -> CapturedPort:
        table = tuple(Gid(g.index, g.gid, g.type or types.get(g.index), g.ndev or ndevs.get(g.index))
                      for _, g in sorted(self.gids.get(key, {}).items()))
        paired = assume_pair_types(table)
        return CapturedPort(key[0], key[1], paired or table, values.get("state"), values.get("link_layer"),
                            values.get("netdev"), forms, node, paired is not None)


def _host_prefix(line: Line) -> tuple[str, str]:
    """The text and origin of a line, with a ``host: `` (pdsh) or ``N: `` (srun -l) prefix the intake left on it
    taken off: such output inside another collector's prefix, or a short paste with prose mixed in (then no prefix
    dominates the paste and the intake leaves them)."""
    if line.kind != "text":
        return line.text, line.origin
    if (match := _PDSH.match(line.text)) is not None and any(c.isdigit() for c in match[1]):
        return line.text[match.end():], match[1]
    if (match := _SRUN.match(line.text)) is not None:
        return line.text[match.end():], f"task {match[1]}"
    return line.text, line.origin


def _streams(text_lines: Sequence[Line], tally: Tally) -> list[Stream]:
    """One stream of lines per host when prefixes name two or more hosts, else one for the paste."""
    routed = [(line, *_host_prefix(line)) for line in text_lines]
    # prose that happens to start with "node1: " must not make a one-host paste look like two
    origins = {origin for line, text, origin in routed
               if line.kind == "text" and origin and any(word in text for word in _TABLE_WORDS)}
    if len(origins) < 2:
        stream = Stream(next(iter(origins), ""), tally)
        for line, text, _ in routed:
            stream.feed(line, text)
        return [stream]
    streams: dict[str, Stream] = {}
    for line, text, origin in routed:
        streams.setdefault(origin, Stream(origin, tally)).feed(line, text)
    return list(streams.values())


def _nodes(streams: list[Stream]) -> list[_Node]:
    named: dict[str, _Node] = {}
    order: list[_Node] = []

    def new(label: str) -> _Node:
        node = _Node(label, named=bool(label))
        order.append(node)
        if label:
            named[label] = node
        return node

    for stream in streams:
        current: _Node | None = None
        for block in stream.blocks:
            if not block.forms and not block.header:
                continue  # a command or heading with nothing read after it
            if block.title and (current is None or current.label != block.title):
                current = named.get(block.title) or new(block.title)
            elif current is None:
                current = new("")
            if current.conflicts(block):
                current = new("")
            current.add(block)
    return [n for n in order if n.blocks]


def parse_gid_capture(data: str | bytes, *, source: str = "<gids>") -> GidCapture:
    """Every port of a pasted GID capture, per node, with its GIDs sorted by index and a read report.

    Raises ParseError for binary or empty input, or a paste where no line of any form is recognised."""
    text = normalise(data, source=source, what=f"GID tables: {_EXPECTED}")
    tally = Tally(text, "GID table")
    streams = _streams(text.lines, tally)
    tally.require(_EXPECTED)
    nodes = _nodes(streams)
    labels = [n.label if n.named or len(nodes) == 1 else f"#{i}" for i, n in enumerate(nodes, start=1)]
    ports = tuple(p for node, label in zip(nodes, labels, strict=True) for p in node.ports(label))
    forms = list(dict.fromkeys(f for p in ports for f in p.formats))
    tally.format = f"{' + '.join(forms)} GID table" if forms else "GID table"
    tally.sections = max(1, sum(len(n.blocks) for n in nodes))
    return GidCapture(source, ports, tuple(labels),
                      tuple(label for node, label in zip(nodes, labels, strict=True) if node.empty), tally.report())
