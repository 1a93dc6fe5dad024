"""``fabric lint --deployed`` on input that is not a config (issue 27, acceptance 5): a 10 MB single line and binary
data exit 2 with one line, under every ``--format`` of the registry, in time that grows with the size only."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tensorfabric.cli.main import main
from tensorfabric.fabric.parsers import FORMATS


def _lint(capsys: pytest.CaptureFixture[str], path: Path, fmt: str | None = None) -> tuple[int, str]:
    code = main(["fabric", "lint", "--deployed", str(path), *(["--format", fmt] if fmt else [])])
    out, err = capsys.readouterr()
    assert out == ""
    return code, err


def _one_line_exit_2(code: int, err: str) -> None:
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err[:400]
    assert len(err) < 2000


def test_a_ten_megabyte_line_exits_2_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # QoS words everywhere, so a scan that is not linear on one line would show here.
    path = tmp_path / "one-line.conf"
    path.write_text(("qos dscp 26 priority-flow-control priority 3 no-drop " * 200_000)[:10 * 1024 * 1024])
    start = time.process_time()
    code, err = _lint(capsys, path)
    assert time.process_time() - start < 5.0
    _one_line_exit_2(code, err)
    assert "over 65536 characters" in err


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_refuses_a_long_line_and_binary_in_one_line(fmt: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    long = tmp_path / "long.txt"
    long.write_text("priority-flow-control watchdog " * 40_000)
    _one_line_exit_2(*_lint(capsys, long, fmt))
    binary = tmp_path / "blob.bin"
    binary.write_bytes(os.urandom(64 * 1024) + b"\x00" * 16)
    code, err = _lint(capsys, binary, fmt)
    _one_line_exit_2(code, err)
    assert "not text" in err


def _wide(path: Path, megabytes: float) -> None:
    """Lines just under the intake's limit with no QoS word: each is scanned in full by every reader's tally."""
    line = ("interface Ethernet1 description uplink-to-spine " * 1400)[:60_000]
    path.write_text("\n".join([line] * int(megabytes * 1024 * 1024 / 60_001)))


def test_cpu_time_per_megabyte_stays_flat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    small, large = tmp_path / "small.conf", tmp_path / "large.conf"
    _wide(small, 0.5)
    _wide(large, 2.0)
    _lint(capsys, small, "eos")  # imports and caches out of the timing
    times = []
    for path in (small, large):
        start = time.process_time()
        code, err = _lint(capsys, path, "eos")
        times.append(time.process_time() - start)
        _one_line_exit_2(code, err)
    # 4x the input: at most ~4x the time (a wide margin for a loaded machine, far below quadratic 16x).
    assert times[1] < 8 * times[0] + 0.2, times
