"""R12: one DCBX owner per NIC, not willing to take a peer's settings over the pushed plan."""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

RULE = "dcbx.ownership"


@rule(RULE, "warning", "R12", "DCBX owner differs from the plan or the NIC is willing")
def check(ctx: LintContext) -> Iterator[Finding]:
    planned = ctx.plan.dcbx
    for endpoint, extra in sorted(ctx.extras.items()):
        dcbx = extra.dcbx
        if dcbx is None:
            continue
        if dcbx.owner != planned.owner or dcbx.willing:
            yield finding(RULE, f"host port {endpoint}", f"DCBX owner {dcbx.owner}, willing={dcbx.willing}; the plan "
                          f"is owner {planned.owner}, not willing: a second agent or the switch overwrites PFC/trust",
                          {"owner": dcbx.owner, "willing": dcbx.willing, "planned_owner": planned.owner},
                          f"mlnx_qos -i {endpoint.partition(':')[2]} -d {planned.owner} and set willing off")
