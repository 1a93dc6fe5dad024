from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tensorfabric.errors import InputError
from tensorfabric.fsutil import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    current_umask,
    locate_sysfs,
    write_files,
)


@pytest.fixture()
def umask() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_honour_the_umask(tmp_path: Path, umask: None) -> None:
    assert current_umask() == 0o027
    assert _mode(atomic_write_text(tmp_path / "a.yaml", "x")) == 0o640
    assert _mode(atomic_write_text(tmp_path / "h1.sh", "#!/bin/sh\n", mode=0o755)) == 0o750
    os.umask(0o002)
    assert _mode(atomic_write_text(tmp_path / "b.json", "{}")) == 0o664


def test_plots_and_rendered_configs_honour_the_umask(tmp_path: Path, umask: None) -> None:
    from tensorfabric.cli.main import main

    spec = Path(__file__).resolve().parents[1] / "examples" / "fabric.yaml"
    assert main(["fabric", "render", "--fabric", str(spec), "--out", str(tmp_path / "out")]) == 0
    modes = {p.suffix: _mode(p) for p in (tmp_path / "out").iterdir()}
    assert modes[".json"] == 0o640 and modes[".sh"] == 0o750


def test_a_killed_writers_temp_file_is_cleaned_by_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "spec.yaml"
    # A writer that dies between creating its temporary file and the rename (SIGKILL cannot be handled).
    code = ("import os, tempfile; fd, _ = tempfile.mkstemp(prefix=f'.spec.yaml.{os.getpid()}.', suffix='.tmp', "
            f"dir={str(tmp_path)!r}); os.write(fd, b'half'); os.kill(os.getpid(), 9)")
    subprocess.run([sys.executable, "-c", code], check=False, timeout=60)
    assert len(list(tmp_path.glob(".spec.yaml.*.tmp"))) == 1
    live = tmp_path / f".spec.yaml.{os.getpid()}.busy.tmp"  # this process is alive: its temp file stays
    live.write_bytes(b"")
    atomic_write_bytes(target, b"whole")
    assert target.read_bytes() == b"whole"
    assert sorted(p.name for p in tmp_path.glob(".spec.yaml.*.tmp")) == [live.name]


def test_write_files_says_what_was_and_was_not_written(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where a directory should be")
    items = [(tmp_path / "a.txt", "a", None), (tmp_path / "blocker" / "b.txt", "b", None),
             (tmp_path / "c.txt", "c", None)]
    with pytest.raises(InputError) as caught:
        write_files(items)
    message = str(caught.value)
    assert f"written: {tmp_path / 'a.txt'}" in message
    assert f"not written: {tmp_path / 'blocker' / 'b.txt'}, {tmp_path / 'c.txt'}" in message
    assert (tmp_path / "a.txt").read_text() == "a" and not (tmp_path / "c.txt").exists()


def test_locate_sysfs_reads_both_spellings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sys" / "class" / "net").mkdir(parents=True)
    tree, mount = locate_sysfs(tmp_path), locate_sysfs(tmp_path / "sys")
    assert (tree.root, tree.sys) == (mount.root, mount.sys) == (tmp_path, tmp_path / "sys")
    assert tree.note == f"{tmp_path} read as the tree holding sys/"
    assert mount.note == f"{tmp_path}/sys read as the sys/ directory of {tmp_path}"
    monkeypatch.chdir(tmp_path / "sys")  # '.' is the sys/ directory: its tree is the real parent, not '.'
    assert locate_sysfs(".").root == tmp_path
    monkeypatch.chdir(tmp_path)
    assert locate_sysfs("sys/").root == Path(".")  # the user's relative spelling is kept
    bare = tmp_path / "capture"
    (bare / "class" / "infiniband").mkdir(parents=True)
    assert locate_sysfs(bare).root is None and locate_sysfs(bare).sys == bare
    with pytest.raises(InputError, match="not named sys"):
        locate_sysfs(bare, need_root=True)
    for bad, why in ((tmp_path / "nope", "is not a directory"), (tmp_path / "sys" / "class", "holds no sys/class/")):
        with pytest.raises(InputError, match=why) as info:
            locate_sysfs(bad)
        assert repr(str(bad)) in str(info.value) and "accepted: '/'" in str(info.value)


def test_atomic_write_json_is_indented_with_a_final_newline_and_makes_parents(tmp_path: Path) -> None:
    import json

    target = tmp_path / "results" / "bench.json"
    atomic_write_json(target, {"a": [1, 2]})
    text = target.read_text()
    assert text.endswith("}\n") and "\n  " in text and json.loads(text) == {"a": [1, 2]}


def test_read_input_takes_regular_files_and_refuses_streams_before_opening_them(tmp_path: Path) -> None:
    import io
    import time

    from tensorfabric.errors import InputError
    from tensorfabric.fsutil import read_input

    good = tmp_path / "log.txt"
    good.write_bytes(b"NCCL INFO x\n")
    assert read_input(good, "NCCL log") == b"NCCL INFO x\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    start = time.monotonic()
    kinds = ((fifo, r"a FIFO \(named pipe\)"), ("/dev/zero", "a character device"), (tmp_path, "a directory"))
    for path, kind in kinds:
        with pytest.raises(InputError, match=f"is {kind}, not a regular file") as info:
            read_input(path, "NCCL log")
        assert "\n" not in str(info.value)
    assert time.monotonic() - start < 5  # a FIFO without a writer must not block (a hang bound, not a speed claim)
    with pytest.raises(InputError, match="at most 4 are read"):
        read_input(good, "NCCL log", max_bytes=4)
    with pytest.raises(InputError, match="cannot be read: No such file"):
        read_input(tmp_path / "missing", "NCCL log")
    assert read_input("-", "NCCL log", stdin=io.BytesIO(b"pasted")) == b"pasted"
    with pytest.raises(InputError, match="standard input is over 3 bytes"):
        read_input("-", "NCCL log", max_bytes=3, stdin=io.BytesIO(b"pasted"))


def test_write_files_clears_a_dead_writers_temporaries_with_one_listing(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".a.conf.{dead.pid}.k2j4h5g6.tmp"
    stale.write_text("half")
    unrelated = tmp_path / f".notes.txt.{dead.pid}.k2j4h5g6.tmp"  # not one of the files being written: kept
    unrelated.write_text("mine")
    write_files([(tmp_path / "a.conf", "x", None), (tmp_path / "b.conf", "y", None)])
    assert not stale.exists() and unrelated.exists()
    assert (tmp_path / "a.conf").read_text() == "x" and (tmp_path / "b.conf").read_text() == "y"


def test_scratch_names_carry_the_owner_and_a_dead_owners_scratch_is_removed(tmp_path: Path) -> None:
    from tensorfabric.fsutil import scratch_dir

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"tf-spawn-{dead.pid}-abc123"
    (stale / "tf-ucx-1-x").mkdir(parents=True)
    alive = tmp_path / f"tf-spawn-{os.getppid()}-def456"  # a running owner (our parent): kept
    alive.mkdir()
    other = tmp_path / f"tf-ucx-{dead.pid}-ghi789"  # another kind: left to its own kind's next start
    other.mkdir()
    made = Path(scratch_dir("spawn", tmp_path))
    assert made.name.startswith(f"tf-spawn-{os.getpid()}-") and made.is_dir()
    assert not stale.exists() and alive.exists() and other.exists()


def test_write_files_stages_in_one_directory_and_clears_a_dead_writers_staging(tmp_path: Path, umask: None) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".tf-staging-{dead.pid}-x1y2z3"  # a writer killed between staging and renaming
    stale.mkdir()
    (stale / "0").write_text("half")
    mine = tmp_path / f".tf-staging-{os.getpid()}-busy"  # a live writer's: kept
    mine.mkdir()
    link = tmp_path / "b.sh"
    link.symlink_to(tmp_path / "elsewhere")
    written = write_files([(tmp_path / "a.conf", "x", None), (link, "#!/bin/sh\n", 0o755)])
    assert written == [tmp_path / "a.conf", link]
    assert not stale.exists() and mine.exists()
    assert not link.is_symlink() and link.read_text() == "#!/bin/sh\n" and not (tmp_path / "elsewhere").exists()
    assert _mode(tmp_path / "a.conf") == 0o640 and _mode(link) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name, "a.conf", "b.sh"]
