"""The simulator's engines, chosen by name through the one Registry, and the run that dispatches to them.

An engine is an object with a ``name``, ``applies(net, cfg)`` (None when it models this run, otherwise why not) and
``run(net, cfg, advance=...)`` returning a :class:`~tensorfabric.sim.trace.Trace`. ``SimConfig(engine="auto")``
takes the first registered engine that applies, so the registration order is the preference: the event engine
(:mod:`tensorfabric.sim.events`, PFC steady state from flow event to flow event) where its closed form holds, the
time-stepped one (:mod:`tensorfabric.sim.stepped`) everywhere else. To add an engine, copy ``sim/events.py``'s
``EventsEngine`` and add a lazy entry below, ahead of the engines it should win over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry

if TYPE_CHECKING:  # only names here: importing this module (the CLI's --engine choices) must stay cheap
    from tensorfabric.sim.config import SimConfig
    from tensorfabric.sim.network import Network
    from tensorfabric.sim.trace import Trace

__all__ = ["AUTO", "ENGINES", "ENGINE_NAMES", "Engine", "run"]


class Engine(Protocol):
    name: str

    def applies(self, net: Network, cfg: SimConfig) -> str | None: ...

    def run(self, net: Network, cfg: SimConfig, *, advance: Callable[[float], None] | None = None) -> Trace: ...


ENGINES: Registry[Engine] = Registry("simulator engine", lazy={
    "events": "tensorfabric.sim.events:ENGINE",
    "stepped": "tensorfabric.sim.stepped:ENGINE",
})
AUTO = "auto"
ENGINE_NAMES: tuple[str, ...] = (AUTO, *ENGINES.names())
"""Every value ``SimConfig.engine`` and ``simulate --engine`` accept."""


def run(net: Network, cfg: SimConfig, *, advance: Callable[[float], None] | None = None) -> Trace:
    """Run the configured engine (``auto``: the first that applies) until ``cfg.duration_s`` or, with
    ``stop_when_idle``, until every flow finished."""
    if cfg.engine == AUTO:
        for name in ENGINES.names():
            engine = ENGINES.get(name)
            if engine.applies(net, cfg) is None:
                return engine.run(net, cfg, advance=advance)
    engine = ENGINES.get(cfg.engine)
    why_not = engine.applies(net, cfg)
    if why_not is not None:
        raise InputError(f"engine {cfg.engine}: does not apply here ({why_not}); use engine auto or stepped")
    return engine.run(net, cfg, advance=advance)
