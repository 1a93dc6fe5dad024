from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tensorfabric import __version__
from tensorfabric.cli.main import VERBS, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert __version__ in capsys.readouterr().out


def test_every_verb_is_registered_and_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(VERBS) == {"run", "bench", "doctor", "env", "fabric", "monitor", "simulate", "lab", "model", "fleet"}
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


def test_debug_shows_the_traceback_the_default_hides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert main(["fabric", "lint", "--fabric", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert main(["--debug", "fabric", "lint", "--fabric", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "no switches and no hosts" in err.splitlines()[-1]


def test_an_unexpected_exception_is_one_line_exit_1(monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import tensorfabric.fabric.starter as starter

    def broken(**kwargs: object) -> str:
        raise RuntimeError("the starter template is broken")

    monkeypatch.setattr(starter, "starter_yaml", broken)
    assert main(["fabric", "init"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == ("tensorfabric: internal error: RuntimeError: the starter template is broken "
                           "(run with --debug for the traceback)")


def test_os_errors_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["fabric", "init", "-o", str(blocker / "sub" / "spec.yaml")]) == 2
    err = capsys.readouterr().err
    assert "is not a directory" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_sigterm_in_process_exits_143(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import os
    import signal

    import tensorfabric.fabric.starter as starter

    def slow(**kwargs: object) -> str:
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not interrupt")

    monkeypatch.setattr(starter, "starter_yaml", slow)
    assert main(["fabric", "init"]) == 143
    assert "terminated by SIGTERM" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_piped_output_never_folds_a_token_at_80_columns() -> None:
    """A CI log or `| tee`: every rule id and subject printed whole, so it can be pasted into --rule."""
    import json
    import os

    root = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-m", "tensorfabric", "fabric", "lint", "--fabric",
            str(root / "examples" / "fabric-dscp-mismatch.yaml")]
    env = {**os.environ, "COLUMNS": "80"}
    human = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    machine = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=60, env=env)
    findings = json.loads(machine.stdout)["findings"]
    assert human.returncode == 1 and findings
    for finding in findings:
        assert finding["rule"] in human.stdout and finding["subject"] in human.stdout


def test_deeply_nested_links_yaml_is_bad_input_not_an_internal_error(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "links.yaml"
    deep.write_text("[" * 20000)
    sysfs = Path(__file__).resolve().parent / "fixtures" / "sysfs" / "mlx5-roce"
    assert main(["monitor", "--links", str(deep), "--once", "--source", f"sysfs:{sysfs}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--links" in err[0] and "nested deeper than" in err[0]


@pytest.mark.parametrize(("argv", "needle"), [
    (["fabric", "lint", "examples/fabric.yaml"], "give the spec as --fabric FILE"),
    (["run", "--model", "/etc/passwd"], "is a file, not a model directory"),
])
def test_errors_name_the_fix_in_domain_words(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_a_spec_field_of_the_wrong_kind_says_the_accepted_form(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("switches:\n  - name: leaf1\n    nos: sonic\n    ports: 12\n")
    assert main(["fabric", "lint", "--fabric", str(spec)]) == 2
    err = capsys.readouterr().err
    assert "switches[0].ports: 12 is not a list; give a YAML list such as [Ethernet0, Ethernet4]" in err
    assert "Input should be" not in err
