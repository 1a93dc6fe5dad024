"""The fleet rule registry, the context every rule reads, and the vote that names outliers.

A fleet rule is a function ``(FleetContext) -> Iterable[Finding]`` registered under a stable id (``fleet.mtu``) with
the short column name the hosts x checks table shows. Rules about configuration compare hosts with each other
(:func:`vote`), never with a built-in expectation: the doctor judges one host against the recipe, the fleet judges
hosts against each other. Every finding names the hosts it is about in ``evidence["hosts"]`` and whether it is about
a host or a link in ``evidence["kind"]``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tensorfabric.findings import Finding, Severity
from tensorfabric.fleet.facts import HostReport
from tensorfabric.fleet.pairs import PairResult, Thresholds
from tensorfabric.registry import Registry

__all__ = ["RULES", "FleetContext", "FleetRule", "host_finding", "register", "vote"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Hashable)


@dataclass(frozen=True, slots=True)
class FleetContext:
    hosts: tuple[HostReport, ...]
    pairs: tuple[PairResult, ...] = ()
    line_rate_bps: float | None = None
    thresholds: Thresholds = Thresholds()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(h.host for h in self.hosts)

    @property
    def current(self) -> tuple[HostReport, ...]:
        """Hosts whose report carries the environment and versions (schema 2+): in an older report an absent
        variable is unknown, not unset, and must not vote."""
        return tuple(h for h in self.hosts if h.schema_version >= 2)


@dataclass(frozen=True, slots=True)
class FleetRule:
    name: str
    column: str
    """Header of this rule's column in the hosts x checks table."""
    check: Callable[[FleetContext], Iterable[Finding]]
    doc: str


RULES: Registry[FleetRule] = Registry("fleet rule", modules=("tensorfabric.fleet.rules.config",
                                                             "tensorfabric.fleet.rules.datapath"))


def register(name: str, column: str) -> Callable[[Callable[[FleetContext], Iterable[Finding]]],
                                                 Callable[[FleetContext], Iterable[Finding]]]:
    def decorate(fn: Callable[[FleetContext], Iterable[Finding]]) -> Callable[[FleetContext], Iterable[Finding]]:
        RULES.register(name, FleetRule(name, column, fn, (fn.__doc__ or "").strip().splitlines()[0]))
        return fn
    return decorate


def vote(values: Mapping[K, V]) -> tuple[V | None, dict[K, V]]:
    """The value most keys hold and the keys that hold another one.

    A strict plurality wins (``{3: 5 hosts, 5: 3 hosts, 4: 2 hosts}`` names the five hosts not at 3). When the top
    values tie (two hosts that differ, four against four) no side can be called the odd one out: the majority is
    None and every key is returned, so each host is named and none is trusted.
    """
    counts = Counter(values.values())
    if len(counts) <= 1:
        return (next(iter(counts)) if counts else None), {}
    (top, first), (_, second) = counts.most_common(2)
    if first == second:
        return None, dict(values)
    return top, {k: v for k, v in values.items() if v != top}


def host_finding(rule: str, host: str, message: str, fix: str, *, severity: Severity = "error",
                 detail: str = "", evidence: Mapping[str, Any] | None = None) -> Finding:
    subject = f"host {host}" + (f" {detail}" if detail else "")
    return Finding(rule, severity, subject, message, {"hosts": [host], "kind": "host", **(evidence or {})}, fix)


def counts_of(values: Iterable[Hashable]) -> dict[str, int]:
    """``{"9000": 7, "1500": 1}``: a value's count over hosts, for evidence (JSON keys are text)."""
    return {str(k): n for k, n in Counter(values).most_common()}


def majority_text(value: Any, counts: Mapping[str, int], total: int) -> str:
    if value is None:
        return "no value is held by more hosts than another (" + ", ".join(
            f"{k} on {n}" for k, n in counts.items()) + ")"
    return f"{value} on {counts.get(str(value), 0)} of {total}"


def names(hosts: Sequence[HostReport]) -> list[str]:
    return [h.host for h in hosts]
