"""Statements a configuration holds that the device cannot act on, found while reading it.

The readers record these as :class:`~tensorfabric.fabric.deployed.ConfigDefect` (a Cumulus ``port_group_list``
naming a group whose keys carry another name: switchd configures nothing for it); this family reports each one.
"""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.fabric.lint import finding, rule
from tensorfabric.fabric.lint.view import LintContext
from tensorfabric.findings import Finding

UNDEFINED = "config.undefined-reference"


@rule(UNDEFINED, "error", "R2", "the config names a group or profile it never defines, so that part does nothing")
def undefined(ctx: LintContext) -> Iterator[Finding]:
    for dev in ctx.devices.values():
        for defect in dev.defects:
            where = f"{dev.source}:{defect.line}" if defect.line is not None else dev.source
            yield finding(UNDEFINED, f"{dev.kind} {dev.device}", defect.message,
                          {"source": dev.source, "line": defect.line, "location": where}, defect.fix)
