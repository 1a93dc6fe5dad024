"""Read a captured or live filesystem tree under an injectable root.

Every path the host doctor reads (``sys/``, ``proc/``, ``dev/``, ``etc/``) is resolved under one root so tests
run on fixture trees built to the kernel's layout. Symlinks inside the tree (``sys/class/net/<if>/device``) are
stored as relative links, exactly as the kernel presents them, so they resolve inside the tree.
"""

from __future__ import annotations

import os
from pathlib import Path

from tensorfabric.errors import InputError

__all__ = ["Tree"]


class Tree:
    """A read-only view of a filesystem rooted at ``root`` (``/`` for the live host)."""

    def __init__(self, root: str | os.PathLike[str] = "/") -> None:
        path = Path(root)
        if not path.is_dir():
            raise InputError(f"sysfs root {str(root)!r} is not a directory; pass the root of a tree holding "
                             "sys/ (and optionally proc/, dev/), e.g. '/' or 'tests/fixtures/sysfs/mlx5-roce'")
        self.root = path.resolve()

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def is_dir(self, rel: str) -> bool:
        return self.path(rel).is_dir()

    def read(self, rel: str) -> str | None:
        """The stripped text of a file, or ``None`` when absent or unreadable (sysfs returns EINVAL for empty GIDs)."""
        try:
            return self.path(rel).read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None

    def read_int(self, rel: str) -> int | None:
        text = self.read(rel)
        if text is None:
            return None
        try:
            return int(text.split()[0], 0) if text else None
        except ValueError:
            return None

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError:
            return []

    def resolve(self, rel: str) -> str | None:
        """The tree-relative real path of ``rel`` after following symlinks, e.g. ``sys/devices/pci0000:00/...``.

        ``None`` when the link leaves the tree (fixture trees hold relative links only).
        """
        real = Path(os.path.realpath(self.path(rel)))
        try:
            return str(real.relative_to(self.root))
        except ValueError:
            return None

    def link_name(self, rel: str) -> str | None:
        """The last component of a symlink's target (``device/driver`` -> ``mlx5_core``)."""
        try:
            return Path(os.readlink(self.path(rel))).name
        except OSError:
            return None
