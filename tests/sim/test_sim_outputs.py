"""simulate --counters/--plot: an existing file or a symlink is refused (exit 2, before simulating) unless --force."""

from __future__ import annotations

from pathlib import Path

import pytest

from tensorfabric.cli.main import main

FAST = ["simulate", "deadlock", "--duration", "0.2ms"]


@pytest.mark.parametrize("flag", ["--counters", "--plot"])
def test_existing_file_is_refused_without_force(flag: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "out"
    target.write_text("someone's data\n")
    assert main([*FAST, flag, str(target)]) == 2
    err = capsys.readouterr().err
    assert flag in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert target.read_text() == "someone's data\n"


def test_symlink_is_refused_and_force_replaces_the_link_not_its_target(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep\n")
    link = tmp_path / "counters.jsonl"
    link.symlink_to(victim)
    assert main([*FAST, "--counters", str(link)]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert main([*FAST, "--counters", str(link), "--force"]) == 0
    assert victim.read_text() == "keep\n"
    assert not link.is_symlink() and link.read_text().startswith("{")


def test_force_replaces_an_existing_counter_file(tmp_path: Path) -> None:
    target = tmp_path / "c.jsonl"
    target.write_text("old\n")
    assert main([*FAST, "--counters", str(target), "--force"]) == 0
    assert "old" not in target.read_text()
