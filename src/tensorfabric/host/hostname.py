"""Resolve this host's name the way Gloo and NCCL do (``getaddrinfo``), with the resolver injectable for tests."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence

from tensorfabric.host.records import HostName

__all__ = ["Resolver", "resolve_hostname", "system_resolver"]

Resolver = Callable[[str], Sequence[str]]


def system_resolver(name: str) -> list[str]:
    """Addresses ``getaddrinfo`` returns for ``name``, in its order, without duplicates."""
    infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def resolve_hostname(name: str, resolver: Resolver = system_resolver) -> HostName:
    try:
        return HostName(name, tuple(resolver(name)))
    except OSError as exc:
        return HostName(name, (), f"{type(exc).__name__}: {exc}")
