"""Transfer engines: what moves a group's tensors, chosen once per process at ``init``.

* :mod:`~tensorfabric.transfer.engines.base` -- the :class:`Communicator` interface with torch.distributed
  defaults (and the world-of-one identity);
* :mod:`~tensorfabric.transfer.engines.torch` -- ``torch``: everything through torch.distributed;
* :mod:`~tensorfabric.transfer.engines.nixl` -- ``nixl``: small CPU tensors by one-sided UCX writes
  (:mod:`~tensorfabric.transfer.engines.nixl_engine`, brought up by
  :mod:`~tensorfabric.transfer.engines.nixl_connect`, :mod:`~tensorfabric.transfer.engines.nixl_ops`,
  :mod:`~tensorfabric.transfer.engines.nixl_bulk`, :mod:`~tensorfabric.transfer.engines.nixl_ucx`), composed
  with ``torch`` by :mod:`~tensorfabric.transfer.engines.router`.

Nothing outside this package asks which engine a group has: a :class:`~tensorfabric.transfer.group.Group`
calls its communicator and reports ``communicator.name``.
"""

from __future__ import annotations

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry
from tensorfabric.transfer.engines.base import Communicator

__all__ = ["ENGINES", "ENGINE_CHOICES", "Communicator", "select"]

ENGINES: Registry[type[Communicator]] = Registry("engine", lazy={
    "torch": "tensorfabric.transfer.engines.torch:TorchCommunicator",
    "nixl": "tensorfabric.transfer.engines.nixl:NixlCommunicator",
})
"""Every engine by name; entries are imported the first time they are looked up."""
ENGINE_CHOICES = ("auto", *ENGINES.names())
"""What ``--engine`` accepts: ``auto`` (the last-registered engine that is ready and prefers the backend,
else the first) or an engine's name."""


def select(engine: str, backend: str, world: int) -> type[Communicator]:
    """The engine class a world of ``world`` ranks on ``backend`` runs (InputError for an unknown name, or a
    named engine that cannot run here). Called before the rendezvous, so bad input fails every rank at once."""
    if engine == "auto":
        names = ENGINES.names()
        for name in reversed(names[1:]):
            cls = ENGINES.get(name)
            if world > 1 and cls.preferred(backend) and cls.ready() is None:
                return cls
        return ENGINES.get(names[0])
    if engine not in ENGINE_CHOICES:
        raise InputError(f"engine: {engine!r} is not one of {', '.join(ENGINE_CHOICES)}")
    cls = ENGINES.get(engine)
    missing = cls.ready() if world > 1 else None
    if missing is not None:
        raise InputError(missing)
    return cls
