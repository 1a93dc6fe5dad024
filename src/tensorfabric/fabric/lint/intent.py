"""What a device's own configuration says its lossless classes are: DSCP -> priority (TC) -> queue -> PFC priority.

Rules used to judge ECN, buffers and scheduling on the plan's priority 3, so a config whose lossless class is 4 (or
whose RoCE DSCP is 24) was held to a class it never uses. Here each lossless class is derived from the config
itself: a PFC priority, the egress queue and ingress priority group it is served from, and the DSCPs the config's
map sends there. The RoCE class is the lossless class the RoCE DSCP (the spec's, else 26) lands in; where the map
is unknown or sends RoCE to a lossy class (R1's finding), the classes the config evidently uses stand in for it.

Nothing here guesses: a port whose PFC priorities are unknown has unknown classes (``None``), and a class whose
DSCPs are unknown says so (``dscps is None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the view exposes these on LintContext, so it imports this module
    from tensorfabric.fabric.lint.view import PortRef

__all__ = ["LosslessClass", "RoceIntent", "lossless_classes", "roce_intent"]


@dataclass(frozen=True, slots=True)
class LosslessClass:
    """One PFC-enabled class of a port, as the config wires it."""

    priority: int
    """The internal class (TC, switch-priority, qos-group, NIC prio) PFC is enabled on."""
    queue: int
    """The egress queue the class is served from (``priority_to_queue``, else the priority itself)."""
    pg: int
    """The ingress priority group its headroom is held in (``priority_to_pg``, else the priority itself)."""
    dscps: frozenset[int] | None
    """The DSCPs the port's map sends to this class; ``None`` when the map is unknown."""

    @property
    def used(self) -> bool | None:
        """Whether any DSCP lands here; ``None`` when the map is unknown."""
        return None if self.dscps is None else bool(self.dscps)


@dataclass(frozen=True, slots=True)
class RoceIntent:
    """Where a port's config puts RoCE, and the lossless classes to judge it on."""

    dscp: int
    priority: int | None
    """The priority the RoCE DSCP lands on; ``None`` when the port's DSCP map is unknown."""
    classes: tuple[LosslessClass, ...] | None
    """Every lossless class of the port; ``None`` when its PFC priorities are unknown."""
    roce: tuple[LosslessClass, ...]
    """The class RoCE rides when the config says so (one); else the used lossless classes (all of them when the
    map is unknown or sends nothing to any); empty when there is no lossless class or it is unknown."""
    determined: bool
    """``roce`` is the class the RoCE DSCP lands in, not a stand-in."""


def _table(ref: PortRef) -> dict[int, int] | None:
    table = ref.port.dscp_to_priority
    return dict(table) if table else None


def lossless_classes(ref: PortRef) -> tuple[LosslessClass, ...] | None:
    """The port's lossless classes in priority order, or ``None`` when its PFC priorities are unknown."""
    pfc = ref.port.pfc_priorities
    if pfc is None:
        return None
    table = _table(ref)
    out = []
    for prio in sorted(pfc):
        dscps = None if table is None else frozenset(d for d, p in table.items() if p == prio)
        out.append(LosslessClass(prio, ref.device.queue_of(prio), ref.device.priority_to_pg.get(prio, prio), dscps))
    return tuple(out)


def roce_intent(ref: PortRef, roce_dscps: Sequence[int]) -> RoceIntent:
    """The lossless class(es) RoCE (the first of ``roce_dscps`` the map sends to a lossless class) rides on."""
    table = _table(ref)
    classes = lossless_classes(ref)
    dscp = roce_dscps[0]
    prio: int | None = None
    if table is not None:
        # An unmapped DSCP falls to the default class 0 on every NOS we read.
        for candidate in roce_dscps:
            got = table.get(candidate, 0)
            if classes is not None and any(c.priority == got for c in classes):
                dscp, prio = candidate, got
                break
        else:
            prio = table.get(dscp, 0)
    if classes is None:
        return RoceIntent(dscp, prio, None, (), False)
    hit = tuple(c for c in classes if c.priority == prio)
    if hit:
        return RoceIntent(dscp, prio, classes, hit, True)
    # R1 reports RoCE in a lossy class; the config's intent is then read from the lossless classes it uses (all of
    # them when none has a DSCP: a PFC class nothing maps to still shows where the operator meant RoCE to go).
    used = tuple(c for c in classes if c.used is not False) or classes
    return RoceIntent(dscp, prio, classes, used, False)
