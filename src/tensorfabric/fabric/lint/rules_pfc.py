"""R2 and R11 (class count): PFC on exactly the lossless priorities, alike on both ends, never with link pause."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from tensorfabric import roce
from tensorfabric.fabric.lint import finding, fixes, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

MISMATCH = "pfc.priority-mismatch"
LINK_PAUSE = "pfc.link-pause"
TOO_MANY = "pfc.too-many-lossless"
NOT_THREE = "pfc.non-default-priority"
NO_HYSTERESIS = "pfc.no-hysteresis"
UNUSED = "pfc.priority-unused"
MAX_LOSSLESS = 2  # Guo et al. 2016: shallow-buffer switches had headroom for two lossless classes


@rule(MISMATCH, "error", "R2", "PFC priorities differ from the plan or between the two ends of a link")
def mismatch(ctx: LintContext) -> Iterator[Finding]:
    planned = planned_lossless(ctx)
    for ref in ctx.ports():
        pfc = ref.port.pfc_priorities
        if planned is not None and pfc is not None and pfc != planned:
            yield finding(MISMATCH, ref.subject, f"PFC enabled on {sorted(pfc)}, the plan's lossless priorities "
                          f"are {sorted(planned)}", {"pfc_priorities": sorted(pfc), "planned": sorted(planned),
                                                     "source": ref.device.source},
                          f"enable PFC on priorities {sorted(planned)} only")
    if ctx.spec is None:
        yield from _switches_disagree(ctx)
    for left, right, subject in ctx.pairs():
        a, b = left.port.pfc_priorities, right.port.pfc_priorities
        if a is not None and b is not None and a != b:
            yield finding(MISMATCH, subject, f"PFC is asymmetric: {sorted(a)} on {left.endpoint}, {sorted(b)} on "
                          f"{right.endpoint}; pauses for one side's class are ignored by the other",
                          {left.endpoint: sorted(a), right.endpoint: sorted(b)},
                          "enable PFC on the same priorities at both ends")


def planned_lossless(ctx: LintContext) -> frozenset[int] | None:
    """The lossless set to hold every port to: the spec's, else what the hosts use (the NIC decides)."""
    if ctx.spec is not None:
        return frozenset(ctx.plan.lossless_priorities)
    hosts = {ref.port.pfc_priorities for ref in ctx.ports("host") if ref.port.pfc_priorities}
    return next(iter(hosts)) if len(hosts) == 1 else None


def _switches_disagree(ctx: LintContext) -> Iterator[Finding]:
    # Without a spec or hosts to agree on, two switches with different lossless sets cannot both be right.
    if planned_lossless(ctx) is not None:
        return
    sets: dict[frozenset[int], list[str]] = {}
    for name, dev in ctx.devices.items():
        if dev.kind == "switch":
            found = {ref.port.pfc_priorities for ref in ctx.ports() if ref.device is dev and ref.port.pfc_priorities}
            for pfc in found:
                sets.setdefault(frozenset(pfc), []).append(name)
    if len(sets) > 1:
        shown = {", ".join(sorted(set(v))): sorted(k) for k, v in sets.items()}
        yield finding(MISMATCH, "fabric", f"switches disagree on the lossless priorities: {shown}",
                      {"by_switch": shown}, "use one lossless priority set on every switch and NIC")


@rule(NOT_THREE, "info", "R2", "lossless priority other than 3 (legal; every NIC and switch must use the same one)")
def not_three(ctx: LintContext) -> Iterator[Finding]:
    seen: set[str] = set()
    for ref in ctx.ports():
        pfc = ref.port.pfc_priorities
        if not pfc or ctx.plan.roce.priority in pfc or ref.device.device in seen:
            continue
        seen.add(ref.device.device)
        yield finding(NOT_THREE, f"{ref.device.kind} {ref.device.device}", f"lossless priority {sorted(pfc)} instead "
                      f"of the usual {ctx.plan.roce.priority}; fine if every NIC (mlnx_qos --pfc, cnp/roce maps) and "
                      "switch on the path uses the same one", {"pfc_priorities": sorted(pfc),
                                                                "usual": ctx.plan.roce.priority},
                      "check that the hosts' PFC mask names the same priority")


@rule(NO_HYSTERESIS, "warning", "R2", "PFC pause and resume thresholds are equal (no hysteresis)")
def no_hysteresis(ctx: LintContext) -> Iterator[Finding]:
    for ref in ctx.ports("switch"):
        for pg, room in sorted((ref.port.headroom or {}).items()):
            if room.hysteresis_bytes == 0:
                yield finding(NO_HYSTERESIS, ref.subject, f"PG {pg}: PFC resumes at the same fill it pauses at; the "
                              "port sends a pause/resume pair for nearly every frame near the threshold",
                              {"pg": pg, "xoff_bytes": room.xoff_bytes, "hysteresis_bytes": 0,
                               "source": ref.device.source},
                              "resume at least one MTU below the pause threshold (resume-threshold < pause-threshold,"
                              " xon_delta > 0)")


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


def _sent_dscps(ctx: LintContext, env: Mapping[str, str]) -> set[int]:
    """The DSCPs a host's RDMA traffic carries: the plan's RoCE DSCP and the one NCCL_IB_TC sets."""
    dscps = set(ctx.plan.roce.dscp)
    raw = env.get("NCCL_IB_TC")
    if raw is not None:
        try:
            dscps.add(roce.dscp_of_traffic_class(int(raw, 0)))
        except ValueError:
            pass  # a malformed value is the NCCL rule's finding
    return dscps


@rule(UNUSED, "warning", "R2", "a host enables PFC on a priority its DSCP map never sends RoCE to")
def unused(ctx: LintContext) -> Iterator[Finding]:
    switch_sets = [set(r.port.pfc_priorities) for r in ctx.ports("switch") if r.port.pfc_priorities is not None]
    for ref in ctx.ports("host"):
        pfc, table = ref.port.pfc_priorities, ref.port.dscp_to_priority
        if not pfc or not table or ref.device.format == "spec":
            continue  # a spec's host is held to the plan by pfc.priority-mismatch
        sent = _sent_dscps(ctx, ref.device.nccl_env)
        lands = {d: table.get(d, 0) for d in sorted(sent)}
        # A priority outside the plan's lossless set, or one a switch given with it does not pause, is
        # pfc.priority-mismatch's finding already; this rule names the idle class everyone agrees on.
        planned = set(ctx.plan.lossless_priorities) if ctx.spec is not None else set(pfc)
        for sw in switch_sets:
            planned &= sw
        idle = sorted(p for p in pfc if p not in lands.values() and p in planned)
        if not idle:
            continue
        shown = ", ".join(f"DSCP {d} -> {p}" for d, p in lands.items())
        target = min(idle)
        yield finding(UNUSED, ref.subject, f"PFC is on priority {idle} but the traffic this host sends lands "
                      f"elsewhere ({shown}): the lossless class holds headroom for nothing"
                      + ("" if set(lands.values()) & pfc else ", and RoCE itself rides a lossy priority"),
                      {"pfc_priorities": sorted(pfc), "dscp_to_priority": lands, "source": ref.device.source},
                      fixes.dscp_map(ref.device.format, min(sent), target) + f" (or --pfc on priority "
                      f"{sorted(set(lands.values()))})")
