"""The one registry every backend, dialect, source, detector, rule and check uses.

A :class:`Registry` maps a name to an object. Entries arrive two ways:

* ``Registry(kind, {"name": obj})``, or ``@REG.register("name")`` on a function or class (or
  ``REG.register("name", obj)``) at import of the module that defines it;
* ``lazy={"name": "package.module:attr"}`` given to the constructor (or :meth:`Registry.add_lazy`), imported the
  first time that name is looked up -- so listing the names (a CLI's choices, ``--help``) imports nothing, and a
  missing optional dependency only matters to the entry that needs it.

``modules`` names modules whose import registers entries with the decorator; they are imported the first time
the registry is listed or searched. Names keep their registration order (sniffing and checklist order matter to
some registries). An unknown name is the user's mistake: :meth:`Registry.get` raises
:class:`~tensorfabric.errors.InputError` naming the value and every accepted name. Registering a second,
different object under a taken name is the programmer's, and raises ``ValueError``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar, overload

from tensorfabric.errors import InputError

__all__ = ["Registry", "resolve"]

T = TypeVar("T")
Obj = TypeVar("Obj")


def resolve(ref: str) -> Any:
    """Import ``package.module:attr`` (or a bare ``package.module``) and return the object it names."""
    module_name, sep, attr = ref.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attr.split(".") if sep else ():
        value = getattr(value, part)
    return value


class Registry(Generic[T]):
    """Name -> object, with lazily imported entries; ``kind`` names what it holds in messages (``codec``)."""

    def __init__(self, kind: str, entries: Mapping[str, T] | None = None, *, lazy: Mapping[str, str] | None = None,
                 modules: Iterable[str] = (), check: Callable[[str, Any], T] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}
        self._lazy: set[str] = set()
        self._modules = tuple(modules)
        self._loaded = not self._modules
        self._check = check
        for name, obj in (entries or {}).items():
            self.register(name, obj)
        for name, ref in (lazy or {}).items():
            self.add_lazy(name, ref)

    # registration --------------------------------------------------------------------------------------
    @overload
    def register(self, name: str) -> Callable[[Obj], Obj]: ...

    @overload
    def register(self, name: str, obj: T) -> T: ...

    def register(self, name: str, obj: Any = None) -> Any:
        """Add ``obj`` under ``name``; without ``obj``, a decorator that adds what it decorates."""
        if obj is None:
            def decorate(target: Obj) -> Obj:
                self._add(name, target)
                return target

            return decorate
        self._add(name, obj)
        return obj

    def add_lazy(self, name: str, ref: str) -> None:
        """Add ``name`` as ``module:attr``, imported on first :meth:`get`."""
        if ":" not in ref and "." not in ref:
            raise ValueError(f"{self.kind} {name!r}: lazy entry {ref!r} must be 'package.module:attr'")
        self._add(name, ref, lazy=True)

    def _add(self, name: str, obj: Any, *, lazy: bool = False) -> None:
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind}: {name!r} is not a usable name")
        if name not in self._entries:
            if lazy:
                self._lazy.add(name)
        elif name in self._lazy and not lazy:
            # The module a lazy entry points at registered the object itself: the object replaces the pointer.
            self._lazy.discard(name)
        elif self._entries[name] is not obj:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._entries[name] = obj

    # lookup --------------------------------------------------------------------------------------------
    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._modules:
                importlib.import_module(module)

    def names(self) -> tuple[str, ...]:
        """Every name, in registration order (imports only the ``modules`` that register by decorator)."""
        self._load()
        return tuple(self._entries)

    def get(self, name: str) -> T:
        """The object called ``name``; InputError naming the accepted names when there is none."""
        self._load()
        if name not in self._entries:
            accepted = ", ".join(self._entries) or "(none registered)"
            raise InputError(f"{self.kind}: {name!r} is not one of {accepted}")
        if name in self._lazy:
            ref = self._entries[name]
            assert isinstance(ref, str)
            value = resolve(ref)
            if self._check is not None:
                value = self._check(name, value)
            self._lazy.discard(name)
            self._entries[name] = value
        return self._entries[name]  # type: ignore[return-value]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __getitem__(self, name: str) -> T:
        if name not in self:
            raise KeyError(name)
        return self.get(name)

    def items(self) -> list[tuple[str, T]]:
        """Every ``(name, object)``, importing lazy entries."""
        return [(name, self.get(name)) for name in self.names()]

    def values(self) -> list[T]:
        return [self.get(name) for name in self.names()]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)!r})"
