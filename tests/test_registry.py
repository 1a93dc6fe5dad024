from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tensorfabric.errors import InputError
from tensorfabric.registry import Registry, resolve

SRC = Path(__file__).resolve().parents[1] / "src" / "tensorfabric"


def test_register_decorator_direct_and_get() -> None:
    reg: Registry[object] = Registry("widget")

    @reg.register("a")
    def a() -> int:
        return 1

    reg.register("b", 2)
    assert reg.names() == ("a", "b")
    assert reg.get("a") is a and reg.get("b") == 2
    assert "a" in reg and "c" not in reg and len(reg) == 2 and list(reg) == ["a", "b"]
    assert reg.items() == [("a", a), ("b", 2)]


def test_unknown_name_is_input_error_naming_value_and_accepted() -> None:
    reg: Registry[int] = Registry("widget", {"x": 1, "y": 2})
    with pytest.raises(InputError, match=r"widget: 'z' is not one of x, y"):
        reg.get("z")
    with pytest.raises(KeyError):
        reg["z"]


def test_second_object_under_a_name_is_a_programming_error() -> None:
    reg: Registry[int] = Registry("widget", {"x": 1})
    reg.register("x", reg.get("x"))  # the same object again is harmless (module re-import)
    with pytest.raises(ValueError, match="registered twice"):
        reg.register("x", 3)


def test_lazy_entries_are_listed_without_import_and_imported_on_get() -> None:
    module = "tensorfabric._registry_probe_never_imported"
    reg: Registry[object] = Registry("thing", lazy={"json": "json:dumps", "probe": f"{module}:X"})
    assert reg.names() == ("json", "probe")
    assert module not in sys.modules
    import json

    assert reg.get("json") is json.dumps
    with pytest.raises(ModuleNotFoundError):
        reg.get("probe")


def test_lazy_check_validates_the_imported_object() -> None:
    def must_be_callable(name: str, obj: object) -> object:
        if not callable(obj):
            raise TypeError(f"{name} is not callable")
        return obj

    reg: Registry[object] = Registry("thing", lazy={"sep": "os:sep"}, check=must_be_callable)
    with pytest.raises(TypeError):
        reg.get("sep")


def test_modules_are_imported_on_first_listing() -> None:
    from tensorfabric.transfer.codecs import CODECS

    assert {"int8", "int4", "none"} <= set(CODECS.names())


def test_resolve() -> None:
    import os.path

    assert resolve("os.path:join") is os.path.join
    assert resolve("os.path") is os.path


def test_every_library_registry_is_a_registry() -> None:
    from tensorfabric.cli.main import VERBS
    from tensorfabric.fabric.headroom import ASICS, MODELS
    from tensorfabric.fabric.lint import RULES
    from tensorfabric.fabric.parsers import PARSERS
    from tensorfabric.fabric.renderers import RENDERERS
    from tensorfabric.fabric.renderers.host import NIC_DIALECTS
    from tensorfabric.host.checks import CHECKS
    from tensorfabric.sim.reaction import REACTION_POINTS
    from tensorfabric.sim.scenarios import SCENARIOS
    from tensorfabric.telemetry.detectors import DETECTORS
    from tensorfabric.telemetry.sources import SOURCES
    from tensorfabric.transfer.codecs import CODECS

    for reg in (VERBS, ASICS, MODELS, RULES, PARSERS, RENDERERS, NIC_DIALECTS, CHECKS, REACTION_POINTS, SCENARIOS,
                DETECTORS, SOURCES, CODECS):
        assert isinstance(reg, Registry) and len(reg.names()) >= 2, reg


def test_spec_nos_names_are_the_renderer_registry() -> None:
    # The spec validator cannot import the renderers (they import the spec); this keeps the two lists one.
    from tensorfabric.fabric.renderers import RENDERERS
    from tensorfabric.fabric.spec import NOS_NAMES
    from tensorfabric.fabric.starter import PORT_NAMING

    assert tuple(NOS_NAMES) == RENDERERS.names() == PORT_NAMING.names()


def _registry_like_assignments(path: Path) -> list[str]:
    """Module-level ``NAME: dict[str, ...] = {}`` followed by a ``register`` function: a home-made registry."""
    tree = ast.parse(path.read_text())
    empty_dicts = {t.target.id for t in tree.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name)
                   and isinstance(t.value, ast.Dict) and not t.value.keys}
    registers = {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and "register" in f.name}
    return sorted(empty_dicts) if empty_dicts and registers and path.name != "registry.py" else []


def test_no_second_registry_mechanism() -> None:
    offenders = {str(p.relative_to(SRC)): names for p in SRC.rglob("*.py") if (names := _registry_like_assignments(p))}
    assert offenders == {}
    text = {p: p.read_text() for p in SRC.rglob("*.py")}
    assert [str(p) for p, t in text.items() if "importlib.import_module" in t and p.name != "registry.py"] == []
