"""Counter sources, one module per kind, selected on the command line as ``--source KIND:ARG``.

The registry maps a kind to ``module:factory``; modules are imported on first use so a missing optional
dependency (redis) only matters to the source that needs it.
"""

from __future__ import annotations

from collections.abc import Callable

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry
from tensorfabric.telemetry.sources.base import Reading, Source, SourceContext

__all__ = ["SOURCES", "Reading", "Source", "SourceContext", "open_source"]

SOURCES: Registry[Callable[[str, SourceContext], Source]] = Registry("source kind", lazy={
    "sysfs": "tensorfabric.telemetry.sources.sysfs:open_source",
    "ethtool": "tensorfabric.telemetry.sources.ethtool:open_live",
    "ethtool-file": "tensorfabric.telemetry.sources.ethtool:open_file",
    "rdma-json": "tensorfabric.telemetry.sources.rdma:open_file",
    "rdma-file": "tensorfabric.telemetry.sources.rdma:open_text_file",
    "rdma": "tensorfabric.telemetry.sources.rdma:open_live",
    "sonic-redis": "tensorfabric.telemetry.sources.sonic_redis:open_source",
    "netdev": "tensorfabric.telemetry.sources.netdev:open_source",
    "lab": "tensorfabric.telemetry.sources.lab:open_source",
    "replay": "tensorfabric.telemetry.sources.replay:open_source",
    "file": "tensorfabric.telemetry.sources.paste:open_source",
})


def open_source(spec: str, ctx: SourceContext) -> Source:
    """Build a source from ``KIND:ARG`` (``rdma:`` and ``netdev:`` take an empty ARG)."""
    kind, sep, arg = spec.partition(":")
    if not sep or kind not in SOURCES:
        raise InputError(f"--source {spec!r}: expected KIND:ARG with KIND one of {', '.join(SOURCES.names())} "
                         "(e.g. sysfs:/sys, ethtool:eth0, replay:trace.jsonl)")
    return SOURCES.get(kind)(arg, ctx)
