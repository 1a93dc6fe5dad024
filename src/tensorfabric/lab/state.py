"""State files: what each lab created, so ``lab down NAME`` removes exactly that.

One JSON file per lab, ``<state dir>/<name>.json``. The state directory is resolved here and nowhere else:
``TENSORFABRIC_LAB_DIR`` if set, otherwise ``/run/tensorfabric/lab`` (a tmpfs, emptied at boot together
with the namespaces it describes). This module is the lab's one documented reader of the environment.

The file is claimed with ``O_EXCL`` before the first namespace exists (two ``up`` runs with one name cannot
both proceed) and rewritten atomically after every namespace is created, so a crash at any point leaves a
file that lists everything there is to remove. ``owner`` is the process that holds the lab (a
``with Lab(...)`` block or a launcher); a CLI-made lab has no owner and lives until ``lab down``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tensorfabric.errors import InputError, LabError
from tensorfabric.fsutil import atomic_write_text
from tensorfabric.jsonload import load_json
from tensorfabric.lab.spec import LabSpec

__all__ = ["DEFAULT_STATE_DIR", "LabState", "Owner", "StateStore", "default_state_dir"]

DEFAULT_STATE_DIR = "/run/tensorfabric/lab"
ENV_STATE_DIR = "TENSORFABRIC_LAB_DIR"


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get(ENV_STATE_DIR) or DEFAULT_STATE_DIR)


@dataclass(frozen=True, slots=True)
class Owner:
    """A process, identified by pid and start time (clock ticks since boot) so a reused pid does not match."""

    pid: int
    start_ticks: int

    @classmethod
    def current(cls) -> Owner:
        return cls(os.getpid(), _start_ticks(os.getpid()))

    def alive(self) -> bool:
        return _start_ticks(self.pid) == self.start_ticks


def _start_ticks(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    # Field 22 (starttime); fields after the ')' that closes the command name, which may contain spaces.
    return int(stat.rsplit(")", 1)[1].split()[19])


@dataclass(frozen=True, slots=True)
class LabState:
    spec: LabSpec
    namespaces: tuple[str, ...] = ()
    """Namespaces created so far, in creation order."""
    phase: str = "building"
    """``building`` while ``up`` runs, ``up`` when complete, ``down`` while being removed."""
    owner: Owner | None = None
    created_at: float = field(default_factory=time.time)

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "name": self.spec.name, "phase": self.phase, "created_at": self.created_at,
            "owner": None if self.owner is None else {"pid": self.owner.pid, "start_ticks": self.owner.start_ticks},
            "namespaces": list(self.namespaces), "spec": self.spec.to_dict(),
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str, source: str) -> LabState:
        try:
            data = load_json(text, what="a lab state file (this tool's JSON)", source=source)
            owner = data.get("owner")
            spec = LabSpec.from_dict(data["spec"])
            namespaces = data["namespaces"]
            # down() deletes what this list names: it may only ever name this lab's own namespaces.
            prefix = f"tf-{spec.name}-"
            if not isinstance(namespaces, list) or not all(
                    isinstance(ns, str) and ns.startswith(prefix) for ns in namespaces):
                raise ValueError(f"namespaces {namespaces!r} must be a list of names starting with {prefix!r}")
            return cls(spec, tuple(namespaces), str(data["phase"]),
                       None if owner is None else Owner(int(owner["pid"]), int(owner["start_ticks"])),
                       float(data["created_at"]))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # InputError is a ValueError
            raise LabError(f"lab state file {source} is unreadable: {exc}") from exc

    def with_namespace(self, ns: str) -> LabState:
        return replace(self, namespaces=(*self.namespaces, ns))


class StateStore:
    """Reads and writes state files under one directory."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory) if directory is not None else default_state_dir()

    def path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def claim(self, state: LabState) -> None:
        """Create the state file, failing with InputError if the name is taken."""
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path(state.spec.name), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError as exc:
            raise InputError(f"lab name: {state.spec.name!r} is already in use (state file "
                             f"{self.path(state.spec.name)}); pick another --name or run "
                             f"'tensorfabric lab down {state.spec.name}'") from exc
        with os.fdopen(fd, "w") as handle:
            handle.write(state.to_json())

    def save(self, state: LabState) -> None:
        atomic_write_text(self.path(state.spec.name), state.to_json())

    def load(self, name: str) -> LabState:
        path = self.path(name)
        try:
            text = path.read_text()
        except FileNotFoundError as exc:
            known = ", ".join(self.names()) or "none"
            raise InputError(f"lab {name!r} does not exist (labs: {known})") from exc
        return LabState.from_json(text, str(path))

    def remove(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)

    def names(self) -> list[str]:
        if not self.directory.is_dir():
            return []
        return sorted(p.stem for p in self.directory.glob("*.json"))
