"""The generic family: counters a source reads but has no canonical name for, exported as they are.

``roce_nic_stat_total{name="<raw name>", queue=...}`` (node_exporter style). Canonical names stay what the
detectors read; this family makes sure nothing a driver reports is silently dropped, within the bound a
:class:`~tensorfabric.telemetry.sources.base.CounterFilter` sets per source.
"""

from __future__ import annotations

from tensorfabric.telemetry.metrics import GENERIC
from tensorfabric.telemetry.sources.base import CounterFilter

__all__ = ["GENERIC", "GenericBudget"]


class GenericBudget:
    """One source's admission of generic series: the filter, then the cap (first come, first kept).

    A source reports the same names in the same order on every poll, so the kept set is stable from poll to
    poll; what the cap turns away is reported once, not on every poll.
    """

    def __init__(self, counters: CounterFilter, source: str) -> None:
        self._filter = counters
        self._source = source
        self._kept: set[tuple[str, ...]] = set()
        self._refused = 0
        self._reported = False

    def admits(self, name: str, *identity: str) -> bool:
        key = (name, *identity)
        if key in self._kept:
            return True
        if not self._filter.admits(name):
            return False
        if len(self._kept) >= self._filter.max_series:
            self._refused += 1
            return False
        self._kept.add(key)
        return True

    def report(self, errors: list[str]) -> None:
        """Add one error the first time the cap turned a series away."""
        if self._refused and not self._reported:
            self._reported = True
            errors.append(f"{self._source}: more than {self._filter.max_series} counters without a canonical name; "
                          "the rest are not exported (raise --counters-max or narrow --counters-allow/--counters-deny)")
