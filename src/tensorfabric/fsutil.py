"""Atomic file output (a reader never sees a half-written file, and a failure leaves the old one), and the one
reading of a user's "sysfs root" (:func:`locate_sysfs`: ``/`` and ``/sys`` both work) shared by host and telemetry.

Files come out with the permissions the user's umask gives a new file (``0666 & ~umask``, or ``mode & ~umask``
for an explicit ``mode`` such as a script's ``0o755``), as ``open()`` would, not the ``0600`` of a temporary file.
The temporary file is ``.<name>.<pid>.<random>.tmp`` beside the target; one left by a process that was killed
mid-write (SIGKILL, power loss) is removed by the next write of the same file once its pid is gone.

:func:`write_files` writes several files through one staging directory ``.tf-staging-<pid>-<random>`` beside them
(removed the same way when its writer was killed) and, when one fails (disk full, read-only directory), raises an
:class:`~tensorfabric.errors.InputError` that says which were written and which were not.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tensorfabric.errors import InputError

__all__ = ["MAX_INPUT_BYTES", "SCRATCH_ENV", "SysfsRoot", "atomic_write_bytes", "atomic_write_figure",
           "atomic_write_text", "current_umask", "figure_png", "locate_sysfs", "read_input", "scratch", "scratch_dir",
           "write_files"]


SCRATCH_ENV = "TENSORFABRIC_SCRATCH"
"""Environment variable naming a launcher's temporary directory, set for the ranks it starts: a rank keeps its
scratch files (UCX logs) there, so they go with the launcher's directory even when the rank is killed."""


MAX_INPUT_BYTES = 256 * 1024 * 1024
"""Largest file a reader takes. A day of NCCL INFO from 64 ranks is tens of MB; more is an endless stream (/dev/zero, a
log that is still being written) or the wrong file, and reading it whole would only end in running out of memory."""

_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_input(path: str | os.PathLike[str], what: str, *, max_bytes: int = MAX_INPUT_BYTES,
               stdin: BinaryIO | None = None) -> bytes:
    """The bytes of a file the user named, or InputError in one line.

    Only regular files are opened: a FIFO with no writer would block for ever and a device such as /dev/zero never
    ends, so both are refused from ``stat`` before any open. ``-`` reads ``stdin`` (a paste piped in), bounded by the
    same cap. The open itself is non-blocking, so a file swapped for a FIFO after the check cannot hang the read.
    """
    name = os.fspath(path)
    if name == "-" and stdin is not None:
        data = stdin.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise InputError(f"{what} on standard input is over {max_bytes} bytes; save the part you need to a file")
        return data
    try:
        info = os.stat(name)
    except OSError as exc:
        raise InputError(f"{what} {name!r} cannot be read: {exc.strerror or exc}; pass a readable file") from None
    kind = next((label for test, label in _KINDS if test(info.st_mode)), None)
    if kind is not None:
        raise InputError(f"{what} {name!r} is {kind}, not a regular file; save the output to a file and pass that")
    if info.st_size > max_bytes:
        raise InputError(f"{what} {name!r} is {info.st_size} bytes; at most {max_bytes} are read (pass the part of "
                         "it you need)")
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise InputError(f"{what} {name!r} cannot be read: {exc.strerror or exc}; pass a readable file") from None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise InputError(f"{what} {name!r} is not a regular file; save the output to a file and pass that")
        # Sized from fstat: read(max_bytes + 1) allocates the whole cap (256 MiB) for every file, which made reading
        # 10,000 small reports take seconds of allocation alone. A file that grew since is read on up to the cap.
        data = handle.read(min(opened.st_size, max_bytes) + 1)
        if len(data) > opened.st_size:
            data += handle.read(max_bytes + 1 - len(data))
    if len(data) > max_bytes:
        raise InputError(f"{what} {name!r} grew past {max_bytes} bytes while being read; pass a finished file")
    return data


_SYSFS_FORMS = ("accepted: '/' or a capture holding sys/ (ROOT/sys/class/...), or '/sys' or a capture's sys/ "
                "directory (SYS/class/...)")


@dataclass(frozen=True)
class SysfsRoot:
    """Where a user's "sysfs root" led: the sysfs directory itself and, when known, the tree above it."""

    given: str
    sys: Path
    """The directory holding ``class/`` (``/sys`` on the live host)."""
    root: Path | None
    """The directory holding ``sys/`` (and ``proc/``, ``dev/``); None when ``sys`` is not named ``sys``."""
    note: str
    """One line saying how ``given`` was read, for logs and the CLI's host line."""

    def to_dict(self) -> dict[str, str | None]:
        return {"given": self.given, "sys": str(self.sys), "root": None if self.root is None else str(self.root),
                "note": self.note}


def locate_sysfs(given: str | os.PathLike[str], *, need_root: bool = False) -> SysfsRoot:
    """Read ``given`` as either spelling of a sysfs root: the tree holding ``sys/`` or the ``sys/`` directory.

    ``/`` and ``/sys`` (and a capture and its ``sys/``) mean the same host. ``need_root`` asks for the tree above
    ``sys/`` too (the doctor reads ``proc/`` and ``dev/`` beside it): a directory holding ``class/`` that is not
    named ``sys`` has no such tree, and is refused then.
    """
    text = os.fspath(given)
    path = Path(text)
    if not path.is_dir():
        raise InputError(f"sysfs root {text!r} is not a directory; {_SYSFS_FORMS}")
    if (path / "sys" / "class").is_dir():
        return SysfsRoot(text, path / "sys", path, f"{text} read as the tree holding sys/")
    if not (path / "class").is_dir():
        raise InputError(f"sysfs root {text!r} holds no sys/class/ and no class/; {_SYSFS_FORMS}")
    # normpath keeps the user's relative spelling ('capture/sys/' -> 'capture'); abspath only for '.' and the like
    norm = Path(os.path.normpath(text))
    absolute = norm if norm.name == "sys" else Path(os.path.abspath(text))
    if absolute.name != "sys":
        if need_root:
            raise InputError(f"sysfs root {text!r} holds class/ but is not named sys, so the tree with proc/ and "
                             f"dev/ beside it is unknown; {_SYSFS_FORMS}")
        return SysfsRoot(text, path, None, f"{text} read as a sysfs directory (it holds class/)")
    return SysfsRoot(text, path, absolute.parent,
                     f"{text} read as the sys/ directory of {absolute.parent}")


def current_umask() -> int:
    """The process umask, read without changing it where /proc allows (``os.umask`` is process-wide)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def scratch_dir(kind: str, parent: str | os.PathLike[str] | None = None) -> str:
    """A new private directory ``tf-<kind>-<pid>-<random>`` under ``parent`` (default: the temporary directory).

    The owner's pid is in the name, so the scratch of a process that was SIGKILLed (nothing of it could clean up) is
    recognisable: each new one first removes the ``tf-<kind>-*`` directories whose owner is gone.
    """
    base = Path(parent) if parent is not None and Path(parent).is_dir() else Path(tempfile.gettempdir())
    prefix = f"tf-{kind}-"
    try:
        entries = list(os.scandir(base))
    except OSError:
        entries = []
    for entry in entries:
        pid_text = entry.name[len(prefix):].split("-", 1)[0] if entry.name.startswith(prefix) else ""
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not _pid_alive(int(pid_text)):
            shutil.rmtree(entry.path, ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=base)


@contextmanager
def scratch(kind: str, parent: str | os.PathLike[str] | None = None) -> Iterator[str]:
    """:func:`scratch_dir` for the length of a ``with`` block, removed on the way out (a SIGKILL leaves it to the next
    start of the same kind)."""
    path = scratch_dir(kind, parent)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


_STAGING = ".tf-staging-"
"""Prefix of :func:`write_files`' private staging directory, ``.tf-staging-<pid>-<random>`` beside the targets."""


def _dead_owner(pid_text: str) -> bool:
    return pid_text.isdigit() and int(pid_text) != os.getpid() and not _pid_alive(int(pid_text))


def _remove_stale_temps(directory: Path, names: Collection[str]) -> None:
    """Remove what a writer that is gone left in ``directory``: the temporaries ``.<name>.<pid>.<random>.tmp`` of the
    files ``names`` and :func:`write_files`' staging directories, in one directory listing (a glob per file made a
    render of N files O(N^2))."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(_STAGING):
            if _dead_owner(entry.name[len(_STAGING):].split("-", 1)[0]):
                shutil.rmtree(entry.path, ignore_errors=True)
            continue
        if not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
            continue
        parts = entry.name[1:-4].rsplit(".", 2)
        if len(parts) != 3 or parts[0] not in names or not _dead_owner(parts[1]):
            continue
        try:
            os.unlink(entry.path)
        except OSError:
            pass


def _write_temp(target: Path, data: bytes, mode: int | None, *, fsync: bool) -> str:
    """The temporary sibling of ``target`` holding ``data``, with its final mode; OS errors name ``target``."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(target.parent, {target.name})
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        # Name the file the user asked for, not the temporary one or a parent.
        raise OSError(exc.errno, exc.strerror, str(target)) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, (0o666 if mode is None else mode) & ~current_umask())
    except BaseException as exc:
        _unlink_quietly(tmp)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        raise
    return tmp


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same directory and ``os.replace``."""
    target = Path(path)
    tmp = _write_temp(target, data, mode, fsync=True)
    try:
        os.replace(tmp, target)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise OSError(exc.errno, exc.strerror, str(target)) from exc
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str, *, mode: int | None = None) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """``obj`` as indented JSON with a final newline (how benchmarks and scripts save results), atomically."""
    import json

    return atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class _Staging:
    """One private directory per target directory: each file is written there under its index and renamed onto its
    target. ``open`` applies the umask itself, so a file gets ``mode & ~umask`` with no chmod and no umask read, and
    the directory's pid makes what a killed writer left recognisable to the next write (:func:`_remove_stale_temps`).
    """

    def __init__(self) -> None:
        self.dirs: dict[str, str] = {}

    def write(self, index: int, target: str, directory: str, data: bytes, mode: int | None) -> str:
        try:
            staging = self.dirs.get(directory)
            if staging is None:
                os.makedirs(directory, exist_ok=True)
                staging = tempfile.mkdtemp(prefix=f"{_STAGING}{os.getpid()}-", dir=directory)
                self.dirs[directory] = staging
            staged = os.path.join(staging, str(index))
            fd = os.open(staged, _CREATE, 0o666 if mode is None else mode)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        except OSError as exc:
            # Name the file the user asked for, not the staging directory or a parent.
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        return staged

    def remove(self) -> None:
        for staging in self.dirs.values():
            shutil.rmtree(staging, ignore_errors=True)


def write_files(files: Iterable[tuple[str | os.PathLike[str], str | bytes, int | None]]) -> list[Path]:
    """Write each ``(path, content, mode)`` atomically, in order; on an OS error say what was and was not written.

    Every file is first written into one staging directory beside its target, one ``os.sync()`` makes them all
    durable, then each is renamed onto its target (``os.replace``: a symlink there is replaced, never followed).
    A temporary file with an fsync per file (``fabric render`` of a large fabric: thousands) cost seconds. A reader
    sees an old or a new file, never a partial one; the files before a failing one are still written, and the
    message says so.
    """
    items = list(files)
    # Paths as strings (os.path) until the end: a pathlib object or two per file was a visible share of writing
    # thousands of small files.
    targets = [os.fspath(path) for path, _, _ in items]
    pending: list[tuple[str, int]] = []
    failure: tuple[int, OSError] | None = None
    by_directory: dict[str, set[str]] = {}
    for target in targets:
        directory, name = os.path.split(target)
        by_directory.setdefault(directory or ".", set()).add(name)
    for directory, names in by_directory.items():
        _remove_stale_temps(Path(directory), names)
    staging = _Staging()
    written: list[Path] = []
    try:
        for index, (_, content, mode) in enumerate(items):
            data = content.encode("utf-8") if isinstance(content, str) else content
            target = targets[index]
            try:
                pending.append((staging.write(index, target, os.path.dirname(target) or ".", data, mode), index))
            except OSError as error:
                failure = (index, error)
                break
        os.sync()
        for staged, index in pending:
            try:
                os.replace(staged, targets[index])
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, targets[index]) from exc
            path = items[index][0]
            written.append(path if isinstance(path, Path) else Path(path))
    finally:
        staging.remove()
    if failure is not None:
        index, cause = failure
        missing = [str(p) for p, _, _ in items[index:]]
        raise InputError(
            f"cannot write {str(items[index][0])!r}: {cause.strerror or cause}; written: "
            f"{', '.join(map(str, written)) or 'none'}; not written: {', '.join(missing)}") from cause
    return written


def figure_png(fig: Any, **savefig: Any) -> bytes:
    """A matplotlib figure as PNG bytes; the figure is closed (``savefig`` kwargs pass on, e.g. ``dpi``)."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", **savefig)
    plt.close(fig)
    return buf.getvalue()


def atomic_write_figure(path: str | os.PathLike[str], fig: Any, **savefig: Any) -> Path:
    """Render a matplotlib figure to PNG in memory, close it, and write it atomically."""
    return atomic_write_bytes(path, figure_png(fig, **savefig))
