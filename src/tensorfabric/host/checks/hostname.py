"""The host's name must not resolve to loopback: Gloo and NCCL advertise that address to their peers.

Debian-style ``/etc/hosts`` maps the hostname to 127.0.1.1; a rank that binds or advertises it tells the other
hosts to connect to their own loopback, and rendezvous fails with ``Connection refused ... 127.0.0.1``.
"""

from __future__ import annotations

from collections.abc import Iterator

from tensorfabric.findings import Finding
from tensorfabric.host.checks.base import DoctorContext, register


@register("net.hostname")
def hostname(ctx: DoctorContext) -> Iterator[Finding]:
    host = ctx.hostname
    if host is None or not host.loopback:
        return
    yield Finding(
        "net.hostname-loopback", "warning", f"hostname {host.name}",
        f"{host.name} resolves to loopback {', '.join(host.loopback)}: Gloo and NCCL advertise it to peers on other "
        "hosts, and rendezvous fails with 'Connection refused ... 127.0.0.1'", host.to_dict(),
        "pin the interfaces with `eval \"$(tensorfabric env)\"` (GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME), or map the "
        f"hostname to the data address in /etc/hosts instead of {host.loopback[0]}")
