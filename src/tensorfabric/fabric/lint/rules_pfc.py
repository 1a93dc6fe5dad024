"""R2 and R11 (class count): PFC on exactly the lossless priorities, alike on both ends, never with link pause."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

MISMATCH = "pfc.priority-mismatch"
LINK_PAUSE = "pfc.link-pause"
TOO_MANY = "pfc.too-many-lossless"
MAX_LOSSLESS = 2  # Guo et al. 2016: shallow-buffer switches had headroom for two lossless classes


@rule(MISMATCH, "error", "R2", "PFC priorities differ from the plan or between the two ends of a link")
def mismatch(ctx: LintContext) -> Iterator[Finding]:
    planned = frozenset(ctx.plan.lossless_priorities)
    for ref in ctx.ports():
        pfc = ref.port.pfc_priorities
        if pfc is not None and pfc != planned:
            yield finding(MISMATCH, ref.subject, f"PFC enabled on {sorted(pfc)}, the plan's lossless priorities "
                          f"are {sorted(planned)}", {"pfc_priorities": sorted(pfc), "planned": sorted(planned),
                                                     "source": ref.device.source},
                          f"enable PFC on priorities {sorted(planned)} only")
    for left, right, subject in ctx.pairs():
        a, b = left.port.pfc_priorities, right.port.pfc_priorities
        if a is not None and b is not None and a != b:
            yield finding(MISMATCH, subject, f"PFC is asymmetric: {sorted(a)} on {left.endpoint}, {sorted(b)} on "
                          f"{right.endpoint}; pauses for one side's class are ignored by the other",
                          {left.endpoint: sorted(a), right.endpoint: sorted(b)},
                          "enable PFC on the same priorities at both ends")


@rule(LINK_PAUSE, "error", "R2", "link-level (global) pause enabled on a PFC port")
def link_pause(ctx: LintContext) -> Iterator[Finding]:
    for endpoint, extra in sorted(ctx.extras.items()):
        if extra.link_pause:
            yield finding(LINK_PAUSE, f"host port {endpoint}", "link-level pause is on together with PFC; the two "
                          "are mutually exclusive and global pause stalls every class",
                          {"link_pause": True}, f"ethtool -A {endpoint.partition(':')[2]} rx off tx off")


@rule(TOO_MANY, "error", "R11", "more than two lossless priorities on a port")
def too_many(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports():
        pfc = ref.port.pfc_priorities
        if pfc is not None and len(pfc) > MAX_LOSSLESS:
            yield finding(TOO_MANY, ref.subject, f"{len(pfc)} lossless priorities {sorted(pfc)}; switch buffers hold "
                          f"headroom for at most {MAX_LOSSLESS}", {"pfc_priorities": sorted(pfc)},
                          "keep RoCE on one lossless priority (two at most)")
