from __future__ import annotations

import subprocess
import sys

import pytest

from tensorfabric import __version__
from tensorfabric.cli.main import VERBS, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert __version__ in capsys.readouterr().out


def test_every_verb_is_registered_and_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(VERBS) == {"run", "bench", "doctor", "env", "fabric", "monitor", "simulate", "lab", "model"}
    for verb in VERBS:
        assert main([verb, "--help"]) == 0, verb
        assert "Usage" in capsys.readouterr().out


def test_unknown_verb_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    err = capsys.readouterr().err
    assert "frobnicate" in err and len(err.strip().splitlines()) == 1


def test_python_dash_m() -> None:
    out = subprocess.run([sys.executable, "-m", "tensorfabric", "--version"], capture_output=True, text=True,
                         timeout=60, check=True)
    assert __version__ in out.stdout
