"""``lab:NAME`` -- netdev and qdisc statistics of every host of a running tensorfabric lab.

The lab (``tensorfabric.lab``) records its namespaces in state files; this source attaches to it by name and
runs iproute2 inside each host's namespace. Hosts are polled one after the other; one host failing is an error
of this poll, not of the others.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tensorfabric.errors import TensorFabricError
from tensorfabric.samples import Sample
from tensorfabric.telemetry.sources.base import Reading, SourceContext, run_command
from tensorfabric.telemetry.sources.netdev import NetdevSource

__all__ = ["LabSource", "open_source"]


class LabSource:
    def __init__(self, name: str, lab_name: str, ctx: SourceContext) -> None:
        from tensorfabric.lab.lab import Lab

        self.name = name
        self._lab = Lab.attach(lab_name)
        self._hosts: list[NetdevSource] = []
        for host in self._lab.hosts:
            def runner(argv: Sequence[str], _host: str = host) -> str:
                return run_command(self._lab.command(_host, argv))

            host_ctx = replace(ctx, host=host, run=runner)
            self._hosts.append(NetdevSource(f"{name}/{host}", host_ctx))

    def read(self) -> Reading:
        samples: list[Sample] = []
        errors: list[str] = []
        for source in self._hosts:
            try:
                reading = source.read()
            except TensorFabricError as exc:
                errors.append(f"{source.name}: {exc}")
                continue
            samples += reading.samples
            errors += reading.errors
        return Reading(tuple(samples), tuple(errors))


def open_source(arg: str, ctx: SourceContext) -> LabSource:
    from tensorfabric.errors import InputError

    if not arg:
        raise InputError("lab: needs a lab name, e.g. lab:demo (see `tensorfabric lab status`)")
    return LabSource(f"lab:{arg}", arg, ctx)
