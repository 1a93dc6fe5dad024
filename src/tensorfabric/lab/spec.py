"""What a lab is asked to be: a validated, frozen :class:`LabSpec`, and the ``NxRATE`` short form.

Every check happens here, before anything touches the kernel, so bad input creates nothing. Bounds:

* ``hosts``: 1..64 -- each host is a network namespace plus a veth pair and two qdiscs; beyond a few dozen
  the machine's CPUs, not the lab, limit every measurement.
* ``rate`` and ``uplink_rate``: 100 kbit/s .. 32 Gbit/s. tbf keeps the rate as 32-bit bytes per second in
  ``tc_ratespec`` (34.3 Gbit/s at most), and below 100 kbit/s one jumbo frame takes longer than the
  queue's latency budget.
* ``leaves`` 1..16, ``spines`` 1..8: leaf--spine point-to-point /31s come out of one /24 (leaves x spines <= 128).
* ``mtu``: 576..9000 (IPv4 minimum .. the usual jumbo frame).
* ``subnet``: an IPv4 network, 198.18.0.0/15 (RFC 2544 benchmarking range) by default, large enough for
  one /24 per leaf (one for a star) plus one /24 of point-to-point links.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from tensorfabric.errors import InputError
from tensorfabric.units import format_rate, parse_rate

__all__ = [
    "DEFAULT_MTU",
    "DEFAULT_SUBNET",
    "MAX_HOSTS",
    "LabSpec",
    "Topology",
    "parse_short_spec",
    "validate_name",
]

Topology = Literal["star", "leafspine"]
TOPOLOGIES: tuple[Topology, ...] = ("star", "leafspine")
DEFAULT_SUBNET = "198.18.0.0/15"
# Jumbo frames, as on the RoCE fabrics the lab stands in for (and topology.Nic's default): TCP then carries
# 8948 payload bytes per 9014-byte frame (99.3 %) instead of 1448 per 1514 (95.6 %) at MTU 1500.
DEFAULT_MTU = 9000
MAX_HOSTS = 64
MAX_LEAVES = 16
MAX_SPINES = 8
LEAFSPINE_DEFAULT = (2, 2)
"""Leaves and spines of a leaf-spine lab when not given: the smallest with two paths between racks (ECMP)."""
MIN_RATE_BPS = 1e5
MAX_RATE_BPS = 32e9
MIN_MTU, MAX_MTU = 576, 9000
# Lowercase letters and digits only: the name becomes part of namespace names ``tf-<name>-h0``, and keeping
# '-' out of it means one lab's prefix can never match another lab's namespaces.
_NAME = re.compile(r"^[a-z][a-z0-9]{0,19}$")
_SHORT = re.compile(r"^\s*(\d+)\s*[xX]\s*(\S+)\s*$")


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InputError(
            f"lab name: {name!r} must be 1-20 lowercase letters or digits starting with a letter, e.g. 'lab1'")
    return name


def _bounded_int(value: object, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{what}: {value!r} must be a whole number from {low} to {high}")
    if not low <= value <= high:
        raise InputError(f"{what}: {value} is out of range; use {low}..{high}")
    return value


def _rate(value: str | float, what: str) -> float:
    # A number here comes from code (the CLI's parsed --rate, a saved rate_bps): bit/s by name. Text needs a unit.
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    bps = float(value) if numeric else parse_rate(value, what=what)
    if not MIN_RATE_BPS <= bps <= MAX_RATE_BPS:
        raise InputError(f"{what}: {value!r} ({format_rate(bps)}) is out of range; use 100kbit..32gbit")
    return bps


@dataclass(frozen=True, slots=True)
class LabSpec:
    """A lab to build. Construct with :meth:`create`, which accepts unit strings and validates everything."""

    name: str
    """Lab name; namespaces are ``tf-<name>-<node>``."""
    hosts: int
    """Number of hosts (ranks), 1..64."""
    rate_bps: float
    """Host link rate in bits per second, each direction."""
    topology: Topology = "star"
    """``star``: one switch; ``leafspine``: hosts spread over leaves in blocks, every leaf linked to every spine."""
    leaves: int = 1
    """Leaf switches (leafspine only)."""
    spines: int = 1
    """Spine switches (leafspine only)."""
    uplink_rate_bps: float = 0.0
    """Leaf--spine link rate in bits per second (leafspine only); 0 means the host rate."""
    mtu: int = DEFAULT_MTU
    """MTU of every lab interface, bytes."""
    subnet: str = DEFAULT_SUBNET
    """IPv4 network the lab's addresses come from."""

    @classmethod
    def create(cls, *, name: str, hosts: int, rate: str | float, topology: str = "star", leaves: int | None = None,
               spines: int | None = None, uplink_rate: str | float | None = None, mtu: int = DEFAULT_MTU,
               subnet: str = DEFAULT_SUBNET) -> LabSpec:
        """Validate user-facing values (unit strings allowed) and build the spec. ``leaves``/``spines`` left out
        are the topology's own: one switch for a star, :data:`LEAFSPINE_DEFAULT` for a leaf-spine."""
        validate_name(name)
        _bounded_int(hosts, "hosts", 1, MAX_HOSTS)
        rate_bps = _rate(rate, "rate")
        if topology not in TOPOLOGIES:
            raise InputError(f"topology: {topology!r} is not one of {', '.join(TOPOLOGIES)}")
        if topology == "star" and (leaves not in (None, 1) or spines not in (None, 1) or uplink_rate is not None):
            raise InputError("--leaves, --spines and --uplink-rate only apply to --topology leafspine")
        # `is None`, not `or`: an explicit 0 is the user's value, refused below, not a default.
        default = LEAFSPINE_DEFAULT if topology == "leafspine" else (1, 1)
        leaves = default[0] if leaves is None else leaves
        spines = default[1] if spines is None else spines
        _bounded_int(leaves, "leaves", 1, MAX_LEAVES)
        _bounded_int(spines, "spines", 1, MAX_SPINES)
        if topology == "leafspine" and leaves > hosts:
            raise InputError(f"leaves: {leaves} leaves need at least {leaves} hosts (got --hosts {hosts})")
        uplink_bps = _rate(uplink_rate, "uplink rate") if uplink_rate is not None else 0.0
        _bounded_int(mtu, "mtu", MIN_MTU, MAX_MTU)
        spec = cls(name, hosts, rate_bps, topology, leaves, spines, uplink_bps, mtu, subnet)
        spec.network()
        return spec

    @property
    def uplink_bps(self) -> float:
        return self.uplink_rate_bps or self.rate_bps

    @property
    def host_blocks(self) -> int:
        """How many /24 host blocks the lab uses (one per leaf; one for a star)."""
        return self.leaves if self.topology == "leafspine" else 1

    def network(self) -> ipaddress.IPv4Network:
        """The lab's subnet, checked to hold every /24 the address plan needs."""
        try:
            net = ipaddress.ip_network(self.subnet, strict=True)
        except ValueError as exc:
            raise InputError(f"subnet: {self.subnet!r} is not an IPv4 network such as '198.18.0.0/15'") from exc
        if not isinstance(net, ipaddress.IPv4Network):
            raise InputError(f"subnet: {self.subnet!r} must be IPv4, such as '198.18.0.0/15'")
        needed = self.host_blocks + 1
        if net.num_addresses < needed * 256:
            raise InputError(f"subnet: {self.subnet!r} is too small; this lab needs {needed} /24s "
                             f"(a /{32 - (needed * 256 - 1).bit_length()} or larger)")
        return net

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabSpec:
        """Rebuild a spec saved with :meth:`to_dict`, validating it again (InputError if it does not hold)."""
        if not isinstance(data, dict) or set(data) != set(cls.__dataclass_fields__):
            raise InputError(f"lab spec: {data!r} must have exactly the keys {sorted(cls.__dataclass_fields__)}")
        uplink = data["uplink_rate_bps"]
        return cls.create(name=data["name"], hosts=data["hosts"], rate=data["rate_bps"], topology=data["topology"],
                          leaves=data["leaves"], spines=data["spines"], uplink_rate=uplink if uplink else None,
                          mtu=data["mtu"], subnet=data["subnet"])


def parse_short_spec(text: str) -> tuple[int, float]:
    """Parse ``NxRATE`` (``2x1gbit``, ``4x200mbit``) into ``(hosts, rate_bps)``."""
    match = _SHORT.match(text) if isinstance(text, str) else None
    if match is None:
        raise InputError(f"lab spec: {text!r} must be HOSTSxRATE, e.g. '2x1gbit' or '4x200mbit'")
    hosts = _bounded_int(int(match.group(1)), "lab spec hosts", 1, MAX_HOSTS)
    return hosts, _rate(match.group(2), "lab spec rate")
