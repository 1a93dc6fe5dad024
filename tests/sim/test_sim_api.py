"""The public surface of tensorfabric.sim: __all__ is exactly what the package exports, and it stays light."""

from __future__ import annotations

import subprocess
import sys

import tensorfabric.sim as sim


def test_all_names_resolve_and_are_public() -> None:
    assert sorted(sim.__all__) == sorted(set(sim.__all__))
    for name in sim.__all__:
        assert getattr(sim, name) is not None, name
    public = {n for n in vars(sim) if not n.startswith("_") and not isinstance(getattr(sim, n), type(sys))}
    assert public == set(sim.__all__)


def test_import_pulls_in_neither_torch_nor_telemetry_nor_matplotlib() -> None:
    code = ("import sys, tensorfabric.sim; bad = [m for m in ('torch', 'matplotlib', 'tensorfabric.telemetry') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
