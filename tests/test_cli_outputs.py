"""Every verb that writes a file the user names refuses an existing file or symlink without --force, and never writes
through a symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tensorfabric.cli.main import main

SYSFS = Path(__file__).resolve().parent / "fixtures" / "sysfs" / "mlx5-roce"
WRITERS = {
    "bench --plot": (["bench", "-e", "64", "-n", "1", "-w", "0", "--plot"], "--plot"),
    "run --save-logits": (["run", "--model", "tiny", "--max-new-tokens", "1", "--save-logits"], "--save-logits"),
}


@pytest.mark.parametrize("name", sorted(WRITERS))
@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_an_existing_target_is_refused_before_any_work(name: str, kind: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    argv, flag = WRITERS[name]
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "out.bin"
    if kind == "file":
        target.write_text("keep me too")
    else:
        target.symlink_to(victim)
    assert main([*argv, str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and "--force" in err[0]
    assert victim.read_text() == "keep me" and (kind == "symlink" or target.read_text() == "keep me too")


def test_force_replaces_a_symlink_itself_never_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "plot.png"
    target.symlink_to(victim)
    assert main(["bench", "-e", "64", "-n", "1", "-w", "0", "--plot", str(target), "--force"]) == 0
    assert victim.read_text() == "keep me" and not target.is_symlink() and target.read_bytes()[:4] == b"\x89PNG"


def test_monitor_record_never_appends_through_a_symlink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    record = tmp_path / "samples.jsonl"
    record.symlink_to(victim)
    assert main(["monitor", "--once", "--source", f"sysfs:{SYSFS}", "--record", str(record)]) == 2
    assert "symbolic link" in capsys.readouterr().err and victim.read_text() == "keep me"
    os.unlink(record)
    assert main(["monitor", "--once", "--source", f"sysfs:{SYSFS}", "--record", str(record), "--json"]) in (0, 1)
    assert record.read_text().count("\n") > 0 and not record.is_symlink()
