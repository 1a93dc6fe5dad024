"""``model import-gguf`` (and the first run's import) draws a bar per tensor on a terminal, and nothing in a pipe."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.inference.gguf_import import import_gguf
from tensorfabric.inference.tiny import make_tiny, tiny_config

from ._gguf_files import write_gguf

CFG = tiny_config(layers=2, hidden=64, heads=4, kv_heads=2, vocab=320)


@pytest.fixture(scope="module")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("progress")
    return write_gguf(base / "tiny.gguf", make_tiny(base / "ckpt", CFG, seed=3), CFG, {})


def test_every_tensor_advances_the_bar_once(gguf: Path, tmp_path: Path) -> None:
    bars: list[tuple[str, int]] = []
    steps: list[float] = []

    def start(description: str, total: int) -> Callable[[float], None]:
        bars.append((description, total))
        return steps.append

    import_gguf(gguf, tmp_path / "out", progress=start)
    tensors = 2 + 9 * CFG.num_layers + 1  # embedding, final norm, lm_head, nine per layer
    assert bars == [("importing tiny test model", tensors)]
    assert steps == [1] * tensors


def test_the_bar_is_drawn_only_when_stderr_is_a_terminal(gguf: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["model", "import-gguf", str(gguf), str(tmp_path / "piped"), "--json"]) == 0
    assert capsys.readouterr().err == ""  # piped: no bar, no control sequences in a log
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["model", "import-gguf", str(gguf), str(tmp_path / "terminal"), "--json"]) == 0
    captured = capsys.readouterr()
    assert "importing tiny test model" in captured.err
    assert captured.out.startswith("{")  # --json on stdout stays clean


def test_the_first_run_import_of_the_default_model_draws_the_bar(gguf: Path, tmp_path: Path) -> None:
    """`run` without --model imports the packaged GGUF into the cache once; that import advances the same bar."""
    import importlib.util
    import shutil
    from types import SimpleNamespace
    from typing import Any

    from tensorfabric.inference.default import GGUF_NAME, PACKAGE, default_model

    package = tmp_path / "pkg"
    package.mkdir()
    shutil.copy(gguf, package / GGUF_NAME)

    def find_spec(name: str) -> Any:
        return SimpleNamespace(submodule_search_locations=[str(package)]) if name == PACKAGE else \
            importlib.util.find_spec(name)

    bars: list[tuple[str, int]] = []
    steps: list[float] = []

    def start(description: str, total: int) -> Callable[[float], None]:
        bars.append((description, total))
        return steps.append

    environ = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    chosen = default_model(environ, find_spec=find_spec, progress=start)
    assert chosen.real and bars == [("importing tiny test model", len(steps))] and steps
    default_model(environ, find_spec=find_spec, progress=start)  # cached: no second import, no second bar
    assert len(bars) == 1
